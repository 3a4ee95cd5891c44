"""One deployment (target, optional draft, GPU, TP, engine) evaluated over arrays of context,
batch, α and K: memory per GPU and the speed model. `infersize spec` and the sweep both call it.

The formulas read only `SideNumbers`, whose fields may be numpy arrays: `stack` turns the numbers
of many (model, precision, GPU, TP) settings into one SideNumbers of arrays, so a sweep scores a
whole chunk of settings in one broadcast call of the same functions `spec` uses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from infersize import memory as mem
from infersize.catalog import GpuSpec, KvDtype, ModelSpec, WeightFormat
from infersize.engines import Engine
from infersize.latency import StepCost, step_cost, step_time_s
from infersize.params import ParamCounts, param_counts
from infersize.speculative import speedup_leviathan, speedup_linear, speedup_roofline

FloatArray = NDArray[np.float64]
T = TypeVar("T")


@dataclass(frozen=True)
class SideNumbers:
    """What the memory and speed formulas read of one side (per GPU); scalars or arrays."""

    weights_bytes: Any
    vocab_size: Any
    activation_bytes_per_token: Any
    tp: Any
    kv: mem.KvLayout
    cost: StepCost


@dataclass(frozen=True)
class Side:
    """One model of the deployment at its precision, as held by one GPU."""

    model: ModelSpec
    fmt: WeightFormat
    counts: ParamCounts
    weights: mem.WeightBytes  # per GPU
    numbers: SideNumbers
    weights_from_files: bool = False  # exact bytes read from the checkpoint's headers

    @property
    def tp(self) -> int:
        return int(self.numbers.tp)


def prepare_side(
    model: ModelSpec,
    fmt: WeightFormat,
    kv_dtype: KvDtype,
    gpu: GpuSpec,
    tp: int = 1,
    exact: mem.WeightBytes | None = None,
) -> Side:
    """`exact`: the whole model's weight bytes read from its files, used instead of the
    format's bits per weight (split over TP ranks like the formula)."""
    mem.check_tp(model, tp)
    counts = param_counts(model)
    weights = mem.weight_bytes(counts, fmt, tp) if exact is None else mem.split_weights(exact, tp)
    kv = mem.kv_layout(model, kv_dtype, tp)
    numbers = SideNumbers(
        weights_bytes=weights.total,
        vocab_size=model.vocab_size,
        activation_bytes_per_token=mem.activation_bytes_per_token(model, tp),
        tp=tp,
        kv=kv,
        cost=step_cost(model, counts, weights, fmt, kv, gpu, tp),
    )
    return Side(model, fmt, counts, weights, numbers, exact is not None)


def stack(items: Sequence[T], ndim: int) -> T:
    """One dataclass like items[0] whose numeric fields are arrays of shape (len(items), 1, ...),
    `ndim` dimensions in all, so they broadcast against the grid axes that follow."""
    first = items[0]
    values = {}
    for f in dataclasses.fields(first):  # type: ignore[arg-type]
        column = [getattr(item, f.name) for item in items]
        if dataclasses.is_dataclass(column[0]):
            values[f.name] = stack(column, ndim)
        else:
            values[f.name] = np.asarray(column, dtype=np.float64).reshape((-1,) + (1,) * (ndim - 1))
    return type(first)(**values)


@dataclass(frozen=True)
class Memory:
    """Bytes per GPU (rank 0 holds the target shard and the whole draft). Arrays broadcast
    over the inputs of deployment_memory."""

    target_kv: FloatArray
    target_workspace: FloatArray
    draft_kv: FloatArray
    draft_workspace: FloatArray
    overhead: FloatArray
    combined: FloatArray
    budget: FloatArray  # what the engine may use: the device memory, or U · memory for vLLM
    kv_pool: FloatArray | None  # vLLM: the KV pool per GPU after weights and activations
    max_concurrent_sequences: FloatArray | None

    @property
    def share(self) -> FloatArray:
        return self.combined / self.budget

    @property
    def fits(self) -> NDArray[np.bool_]:
        return self.share <= 1.0

    @property
    def verdict(self) -> NDArray[np.str_]:
        return mem.verdict(self.share)


def deployment_memory(
    target: SideNumbers,
    draft: SideNumbers | None,
    memory_bytes: ArrayLike,
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
    t_ws = mem.workspace_bytes(
        target.vocab_size,
        target.activation_bytes_per_token,
        batch,
        spec_k + 1,
        batch * (spec_k + 1),
    )
    weights = target.weights_bytes
    d_kv = d_ws = np.zeros_like(t_kv)
    if draft is not None:
        weights = weights + draft.weights_bytes
        d_kv = mem.kv_cache_bytes(draft.kv, tokens, batch)
        d_ws = mem.workspace_bytes(
            draft.vocab_size, draft.activation_bytes_per_token, batch, spec_k, batch
        )
    overhead = mem.overhead_bytes(engine, target.tp)
    memory_bytes = np.asarray(memory_bytes, dtype=np.float64)
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
        budget = engine.gpu_memory_utilization * memory_bytes
        pool = budget - weights - t_ws - d_ws - overhead
        per_seq = mem.kv_cache_bytes(target.kv, tokens, 1)
        if draft is not None:
            per_seq = per_seq + mem.kv_cache_bytes(draft.kv, tokens, 1)
        concurrency = np.maximum(pool, 0.0) / per_seq
    else:
        budget = memory_bytes
    combined = weights + t_kv + t_ws + d_kv + d_ws + overhead
    return Memory(t_kv, t_ws, d_kv, d_ws, overhead, combined, budget, pool, concurrency)


@dataclass(frozen=True)
class Speed:
    latency_ratio: FloatArray  # γ = T_target(B,1) / T_draft(B,1) unless given
    speedup: FloatArray
    step_cost: FloatArray  # speculative step time / target decode step (S = E / step_cost)
    t_target_s: FloatArray
    t_draft_s: FloatArray
    t_verify_s: FloatArray


def deployment_speed(
    target: SideNumbers,
    draft: SideNumbers,
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
    t_verify = step_time_s(target.cost, engine, batch, k + 1, context)
    if latency_ratio is None:
        t_draft = step_time_s(draft.cost, engine, batch, 1, context)
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
    return Speed(gamma, speedup, cost, t_target, t_draft, t_verify)


CROSSOVER_BATCHES = 2.0 ** np.arange(12)  # 1, 2, 4, ..., 2048


def crossover_batch(
    target: SideNumbers,
    draft: SideNumbers,
    engine: Engine,
    context: ArrayLike,
    alpha: ArrayLike,
    k: ArrayLike,
) -> FloatArray:
    """Smallest batch (1, 2, 4, ... 2048) at which the roofline speedup at this α and K drops
    below 1: verification turns compute-bound and speculation stops paying. NaN if it never
    does within 2048. Broadcasts over the inputs; the batch ladder is a new last axis."""
    ladder = CROSSOVER_BATCHES
    speedup = deployment_speed(
        target,
        draft,
        engine,
        np.asarray(context)[..., None],
        ladder,
        np.asarray(alpha)[..., None],
        np.asarray(k)[..., None],
        "roofline",
    ).speedup
    below = speedup < 1.0
    first = np.argmax(below, axis=-1)
    return np.where(below.any(axis=-1), ladder[first], np.nan)
