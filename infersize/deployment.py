"""One deployment (target, optional draft, GPU, TP, engine) evaluated over arrays of context,
batch, α and K: memory per GPU and the speed model. `infersize spec` and the sweep both call it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from infersize import memory as mem
from infersize.catalog import GpuSpec, KvDtype, ModelSpec, WeightFormat
from infersize.engines import Engine
from infersize.latency import StepCost, step_cost, step_time_s
from infersize.params import ParamCounts, param_counts
from infersize.speculative import (
    speedup_leviathan,
    speedup_linear,
    speedup_roofline,
)

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class Side:
    """One model of the deployment at its precision, as held by one GPU."""

    model: ModelSpec
    fmt: WeightFormat
    counts: ParamCounts
    weights: mem.WeightBytes  # per GPU
    kv: mem.KvLayout  # per GPU
    cost: StepCost
    tp: int


def prepare_side(
    model: ModelSpec, fmt: WeightFormat, kv_dtype: KvDtype, gpu: GpuSpec, tp: int = 1
) -> Side:
    mem.check_tp(model, tp)
    counts = param_counts(model)
    weights = mem.weight_bytes(counts, fmt, tp)
    kv = mem.kv_layout(model, kv_dtype, tp)
    return Side(
        model, fmt, counts, weights, kv, step_cost(model, counts, weights, fmt, kv, gpu, tp), tp
    )


@dataclass(frozen=True)
class Memory:
    """Bytes per GPU (rank 0 holds the target shard and the whole draft). Arrays broadcast
    over the inputs of deployment_memory."""

    target_kv: FloatArray
    target_workspace: FloatArray
    draft_kv: FloatArray
    draft_workspace: FloatArray
    overhead: int
    combined: FloatArray
    budget: float  # what the engine may use: the device memory, or U · memory for vLLM
    utilization: FloatArray  # combined / device memory
    verdict: NDArray[np.str_]
    kv_pool: FloatArray | None  # vLLM: the KV pool per GPU after weights and activations
    kv_pool_tokens: FloatArray | None
    max_concurrent_sequences: FloatArray | None

    @property
    def fits(self) -> NDArray[np.bool_]:
        return self.verdict != "OOM"


def deployment_memory(
    target: Side,
    draft: Side | None,
    gpu: GpuSpec,
    engine: Engine,
    context: ArrayLike,
    batch: ArrayLike,
    k: ArrayLike,
) -> Memory:
    """Both models keep a KV cache for the full context plus K lookahead slots per sequence;
    the workspace grows with K (fp32 logits of K+1 verified positions, K draft distributions)."""
    context, batch, k = (np.asarray(x, dtype=np.float64) for x in (context, batch, k))
    spec_k = k if draft is not None else np.zeros_like(k)
    tokens = context + spec_k
    t_kv = mem.kv_cache_bytes(target.kv, tokens, batch)
    t_ws = mem.workspace_bytes(target.model, batch, spec_k + 1, batch * (spec_k + 1), target.tp)
    d_kv = d_ws = np.zeros_like(t_kv)
    weights = target.weights.total + (draft.weights.total if draft else 0)
    if draft is not None:
        d_kv = mem.kv_cache_bytes(draft.kv, tokens, batch)
        d_ws = mem.workspace_bytes(draft.model, batch, spec_k, batch, draft.tp)
    overhead = mem.overhead_bytes(engine, target.tp)
    pool = pool_tokens = concurrency = None
    if engine.pools_kv:
        t_ws = np.maximum(t_ws, mem.vllm_profile_bytes(target.model, engine, target.tp))
        if draft is not None:
            d_ws = np.maximum(d_ws, mem.vllm_profile_bytes(draft.model, engine, draft.tp))
        budget = engine.gpu_memory_utilization * gpu.memory_bytes
        pool = budget - weights - t_ws - d_ws - overhead
        per_seq = mem.kv_cache_bytes(target.kv, tokens, 1) + (
            mem.kv_cache_bytes(draft.kv, tokens, 1) if draft else 0.0
        )
        concurrency = np.maximum(pool, 0.0) / per_seq
        pool_tokens = concurrency * context
    else:
        budget = float(gpu.memory_bytes)
    combined = weights + t_kv + t_ws + d_kv + d_ws + overhead
    return Memory(
        target_kv=t_kv,
        target_workspace=t_ws,
        draft_kv=d_kv,
        draft_workspace=d_ws,
        overhead=overhead,
        combined=combined,
        budget=budget,
        utilization=combined / gpu.memory_bytes,
        verdict=mem.verdict(combined, budget),
        kv_pool=pool,
        kv_pool_tokens=pool_tokens,
        max_concurrent_sequences=concurrency,
    )


@dataclass(frozen=True)
class Speed:
    latency_ratio: FloatArray  # γ = T_target(B,1) / T_draft(B,1) unless given
    speedup: FloatArray
    step_cost: FloatArray  # speculative step time / target decode step (S = E / step_cost)
    t_target_s: FloatArray
    t_draft_s: FloatArray
    t_verify_s: FloatArray


def deployment_speed(
    target: Side,
    draft: Side,
    engine: Engine,
    context: ArrayLike,
    batch: ArrayLike,
    alpha: ArrayLike,
    k: ArrayLike,
    speedup_model: str = "leviathan",
    latency_ratio: ArrayLike | None = None,
) -> Speed:
    k = np.asarray(k, dtype=np.float64)
    t_target = step_time_s(target.cost, engine, batch, 1, context)
    t_draft = step_time_s(draft.cost, engine, batch, 1, context)
    t_verify = step_time_s(target.cost, engine, batch, k + 1, context)
    if latency_ratio is None:
        gamma = t_target / t_draft
    else:  # a measured γ replaces the modelled draft step, for every speedup model
        gamma = np.asarray(latency_ratio, dtype=np.float64)
        t_draft = t_target / gamma
    if speedup_model == "roofline":
        speedup = speedup_roofline(alpha, k, t_target, t_draft, t_verify)
        cost = (k * t_draft + t_verify) / t_target
    elif speedup_model == "linear":
        speedup = speedup_linear(alpha, k, gamma)
        cost = 1.0 + (k + 1.0) / gamma
    else:
        speedup = speedup_leviathan(alpha, k, gamma)
        cost = 1.0 + k / gamma
    return Speed(
        gamma * np.ones_like(speedup),
        speedup,
        cost * np.ones_like(speedup),
        t_target,
        t_draft,
        t_verify,
    )
