"""Memory per GPU of a deployment over arrays of context, batch and K, and whether it fits.

Two rules: `plain` sums weights, KV caches, workspaces and overhead against the device memory;
engines that pre-allocate a KV pool (vLLM) size the pool as vLLM does (core/vllm_pool.py), and a
batch fits when its sequences' KV blocks fit in the pool."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from infersize.core import memory as mem
from infersize.core.arrays import BoolArray, FloatArray, floats
from infersize.core.deployment import DeploymentNumbers, SideNumbers
from infersize.core.engines import Engine
from infersize.core.memory import KvLayout
from infersize.core.vllm_pool import (
    PoolSide,
    Profile,
    activation_peak,
    capture_sizes,
    cuda_graph_bytes,
    draft_profile_bytes,
    pool_capacity,
)


@dataclass(frozen=True, kw_only=True)
class PoolMemory:
    """vLLM's pool per GPU, what it holds, and the non-KV parts subtracted before it."""

    kv_pool: FloatArray
    kv_pool_tokens: FloatArray  # as vLLM logs "GPU KV cache size"
    max_concurrent_sequences: FloatArray  # as vLLM logs "Maximum concurrency"
    activation_peak: FloatArray
    non_torch: FloatArray
    cuda_graphs: FloatArray  # subtracted before the pool from vLLM 0.20 on; else 0
    draft_profile: FloatArray  # a separate draft model's share of the profiling run


@dataclass(frozen=True, kw_only=True)
class Memory:
    """Bytes per GPU. Arrays broadcast over the inputs of deployment_memory."""

    target_weights: FloatArray
    target_kv: FloatArray
    target_workspace: FloatArray
    draft_weights: FloatArray
    draft_kv: FloatArray
    draft_workspace: FloatArray
    overhead: FloatArray  # plain: runtime overhead; pools: non-torch memory and CUDA graphs
    combined: FloatArray
    budget: FloatArray  # what the engine may use: the device memory, or U · memory for vLLM
    device: FloatArray  # the device memory (utilization is of it)
    pool: PoolMemory | None = None  # engines with a KV pool

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


@dataclass(frozen=True, kw_only=True)
class _Parts:
    """What a memory rule returns: KV and workspace per model, overhead, budget, the pool."""

    target_kv: FloatArray
    target_workspace: FloatArray
    draft_kv: FloatArray
    draft_workspace: FloatArray
    overhead: FloatArray
    budget: FloatArray
    pool: PoolMemory | None


@dataclass(frozen=True)
class _Cells:
    """The grid inputs, as floats, and the tokens each sequence keeps (context + K)."""

    batch: FloatArray
    spec_k: FloatArray
    tokens: FloatArray


def _plain(dep: DeploymentNumbers, engine: Engine, cells: _Cells, usable: FloatArray) -> _Parts:
    target, draft, bat, spec_k = dep.target, dep.draft, cells.batch, cells.spec_k
    t_kv = mem.kv_cache_bytes(target.kv, cells.tokens, bat)
    t_ws = mem.workspace_bytes(
        target.vocab_size, target.activation_bytes_per_token, bat, spec_k + 1, bat * (spec_k + 1)
    )
    d_kv = d_ws = np.zeros_like(t_kv)
    if draft is not None:
        d_kv = mem.kv_cache_bytes(draft.kv, cells.tokens, bat)
        d_ws = mem.workspace_bytes(
            draft.vocab_size, draft.activation_bytes_per_token, bat, spec_k, bat
        )
    overhead = mem.overhead_bytes(engine, target.tp)
    return _Parts(
        target_kv=t_kv,
        target_workspace=floats(t_ws),
        draft_kv=d_kv,
        draft_workspace=floats(d_ws),
        overhead=overhead,
        budget=usable,
        pool=None,
    )


def _pool_side(side: SideNumbers) -> PoolSide:
    return PoolSide(
        activation_bytes_per_token=side.activation_bytes_per_token,
        vocab_size=side.vocab_size,
        layers=side.cost.layers,
        moe=side.moe,
        kv=side.kv,
        hidden_size=side.hidden_size,
        encoder_bytes_per_item=side.encoder_bytes_per_item,
        encoder_tokens_per_item=side.encoder_tokens_per_item,
    )


def pool_layout(target: KvLayout, draft: KvLayout | None) -> KvLayout:
    """The layers that draw from the one pool: the target's and the draft's."""
    if draft is None:
        return target
    return KvLayout(
        full_bytes_per_token=target.full_bytes_per_token + draft.full_bytes_per_token,
        window_bytes_per_token=target.window_bytes_per_token + draft.window_bytes_per_token,
        window_tokens=np.maximum(target.window_tokens, draft.window_tokens),
        layer_bytes_per_token=target.layer_bytes_per_token,
        state_bytes_per_sequence=target.state_bytes_per_sequence + draft.state_bytes_per_sequence,
    )


def _pooled(dep: DeploymentNumbers, engine: Engine, cells: _Cells, usable: FloatArray) -> _Parts:
    """vLLM: budget = ⌈U · memory⌉; pool = budget − weights − A − N − G; a batch uses its
    sequences' blocks of the pool (sliding windows credited as vLLM allocates them)."""
    profile = Profile(dep.profile_tokens, dep.profile_seqs)
    sides = [dep.target] + ([] if dep.draft is None else [dep.draft])
    peak = floats(np.max([activation_peak(_pool_side(s), profile, engine) for s in sides], axis=0))
    extra = (  # a separate draft model's share of the profiling run
        floats(0.0)
        if dep.draft is None
        else floats(draft_profile_bytes(engine, profile, dep.draft.vocab_size))
        * dep.draft.separate_model
    )
    non_torch = mem.overhead_bytes(engine, dep.tp)
    query_len = 1.0 + cells.spec_k
    sizes = capture_sizes(dep.profile_seqs, dep.profile_tokens, query_len)
    graphs = (
        cuda_graph_bytes([_pool_side(s) for s in sides], sizes, engine)
        if engine.estimates_cuda_graphs
        else floats(0.0)
    )
    budget = floats(np.ceil(engine.gpu_memory_utilization * usable))
    weights = sum((floats(s.weights_bytes) for s in sides), floats(0.0))
    pool = floats(budget - weights - peak - extra - non_torch - graphs)
    layout = pool_layout(dep.target.kv, None if dep.draft is None else dep.draft.kv)
    capacity = pool_capacity(pool, layout, cells.tokens, profile, engine)
    used = floats(cells.batch * capacity.bytes_per_sequence)
    t_plain = mem.kv_cache_bytes(dep.target.kv, cells.tokens, 1)
    d_plain = (
        mem.kv_cache_bytes(dep.draft.kv, cells.tokens, 1) if dep.draft else np.zeros_like(t_plain)
    )
    t_share = t_plain / np.maximum(t_plain + d_plain, 1.0)
    memory_pool = PoolMemory(
        kv_pool=pool,
        kv_pool_tokens=capacity.tokens,
        max_concurrent_sequences=capacity.concurrency,
        activation_peak=peak,
        non_torch=non_torch,
        cuda_graphs=floats(graphs),
        draft_profile=extra,
    )
    kv_target, kv_draft = floats(used * t_share), floats(used * (1 - t_share))
    overhead = floats(non_torch + graphs)
    return _Parts(
        target_kv=kv_target,
        target_workspace=peak,
        draft_kv=kv_draft,
        draft_workspace=floats(extra + np.zeros_like(used)),
        overhead=overhead,
        budget=budget,
        pool=memory_pool,
    )


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
    bat, n_k = floats(batch), floats(k)
    spec_k = n_k if dep.draft is not None else np.zeros_like(n_k)
    cells = _Cells(bat, spec_k, floats(context) + spec_k)
    device = floats(dep.memory_bytes)
    usable = floats(device * (1.0 - headroom)) if headroom else device
    rule = _pooled if engine.pools_kv else _plain
    p = rule(dep, engine, cells, usable)
    t_weights = floats(dep.target.weights_bytes)
    d_weights = floats(0.0 if dep.draft is None else dep.draft.weights_bytes)
    combined = floats(
        t_weights + d_weights + p.target_kv + p.target_workspace + p.draft_kv
        + p.draft_workspace + p.overhead
    )  # fmt: skip
    return Memory(
        target_weights=t_weights,
        target_kv=p.target_kv,
        target_workspace=p.target_workspace,
        draft_weights=d_weights,
        draft_kv=p.draft_kv,
        draft_workspace=p.draft_workspace,
        overhead=p.overhead,
        combined=combined,
        budget=p.budget,
        device=device,
        pool=p.pool,
    )
