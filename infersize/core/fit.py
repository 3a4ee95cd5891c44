"""Memory per GPU of a deployment over arrays of context, batch and K, and whether it fits."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from infersize.core import memory as mem
from infersize.core.arrays import BoolArray, FloatArray, floats
from infersize.core.deployment import DeploymentNumbers
from infersize.core.engines import Engine


@dataclass(frozen=True)
class Memory:
    """Bytes per GPU (rank 0 holds the target shard and the whole draft). Arrays broadcast over
    the inputs of deployment_memory."""

    target_weights: FloatArray
    target_kv: FloatArray
    target_workspace: FloatArray
    draft_weights: FloatArray
    draft_kv: FloatArray
    draft_workspace: FloatArray
    overhead: FloatArray
    combined: FloatArray
    budget: FloatArray  # what the engine may use: the device memory, or U · memory for vLLM
    device: FloatArray  # the device memory (utilization is of it)
    kv_pool: FloatArray | None  # vLLM: the KV pool per GPU after weights and activations
    max_concurrent_sequences: FloatArray | None

    @property
    def share(self) -> FloatArray:
        return floats(self.combined / self.budget)

    @property
    def utilization(self) -> FloatArray:
        return floats(self.combined / self.device)

    @property
    def fits(self) -> BoolArray:
        return mem.fits(self.share)

    @property
    def verdict(self) -> NDArray[np.str_]:
        return mem.verdict(self.share)


def deployment_memory(
    dep: DeploymentNumbers,
    engine: Engine,
    context: ArrayLike,
    batch: ArrayLike,
    k: ArrayLike,
    headroom: float = 0.0,
) -> Memory:
    """Both models keep a KV cache for the full context plus K lookahead slots per sequence;
    the workspace grows with K (fp32 logits of K+1 verified positions, K draft distributions).
    `headroom` is a share of the device kept free (counted against the budget)."""
    ctx, bat, n_k = floats(context), floats(batch), floats(k)
    target, draft = dep.target, dep.draft
    spec_k = n_k if draft is not None else np.zeros_like(n_k)
    tokens = ctx + spec_k
    t_kv = mem.kv_cache_bytes(target.kv, tokens, bat)
    t_ws = mem.workspace_bytes(
        target.vocab_size, target.activation_bytes_per_token, bat, spec_k + 1, bat * (spec_k + 1)
    )
    t_weights = floats(target.weights_bytes)
    d_weights = d_kv = d_ws = np.zeros_like(t_kv)
    weights = t_weights
    if draft is not None:
        d_weights = floats(draft.weights_bytes)
        weights = t_weights + d_weights
        d_kv = mem.kv_cache_bytes(draft.kv, tokens, bat)
        d_ws = mem.workspace_bytes(
            draft.vocab_size, draft.activation_bytes_per_token, bat, spec_k, bat
        )
    overhead = mem.overhead_bytes(engine, target.tp)
    device = floats(dep.memory_bytes)
    usable = device * (1.0 - headroom) if headroom else device
    pool = concurrency = None
    if engine.pools_kv:
        t_ws = np.maximum(
            t_ws,
            mem.vllm_profile_bytes(target.vocab_size, target.activation_bytes_per_token, engine),
        )
        if draft is not None:
            d_ws = np.maximum(
                d_ws,
                mem.vllm_profile_bytes(draft.vocab_size, draft.activation_bytes_per_token, engine),
            )
        budget = engine.gpu_memory_utilization * usable
        pool = floats(budget - weights - t_ws - d_ws - overhead)
        per_seq = mem.kv_cache_bytes(target.kv, tokens, 1)
        if draft is not None:
            per_seq = per_seq + mem.kv_cache_bytes(draft.kv, tokens, 1)
        concurrency = floats(np.maximum(pool, 0.0) / per_seq)
    else:
        budget = usable
    combined = floats(weights + t_kv + t_ws + d_kv + d_ws + overhead)
    return Memory(
        t_weights, t_kv, floats(t_ws), d_weights, d_kv, floats(d_ws), overhead, combined,
        floats(budget), device, pool, concurrency,
    )  # fmt: skip
