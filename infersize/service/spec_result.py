"""The typed result of `infersize spec`: its fields are the stable keys of `spec --json`, in
order; the terminal panel reads the same object."""

from __future__ import annotations

from dataclasses import dataclass

from infersize.core.arrays import FloatArray
from infersize.core.deployment import Side


@dataclass(frozen=True)
class SideResult:
    """One model of the deployment, per GPU, in bytes."""

    model: str
    quant: str
    params: int
    active_params: int
    weights_bytes: int
    weights_from_files: bool
    kv_cache_bytes: int
    workspace_bytes: int
    total_bytes: int
    tp: int


def side_result(side: Side, kv: FloatArray, workspace: FloatArray) -> SideResult:
    weights = side.weights.total
    return SideResult(
        model=side.model.id,
        quant=side.fmt.id,
        params=side.counts.total,
        active_params=side.counts.active,
        weights_bytes=weights,
        weights_from_files=side.weights_from_files,
        kv_cache_bytes=int(kv),
        workspace_bytes=int(workspace),
        total_bytes=int(weights + kv + workspace),
        tp=side.tp,
    )


@dataclass(frozen=True)
class GpuResult:
    id: str
    name: str
    memory_bytes: int
    count: int  # GPUs of the deployment (the target's tensor parallelism)


@dataclass(frozen=True, kw_only=True)
class SpecResult:
    target: SideResult
    draft: SideResult | None  # None: the target alone
    overhead_bytes: int
    combined_bytes: int
    gpu: GpuResult
    engine: str
    budget_bytes: int
    utilization: float  # combined / device memory
    fits: bool
    verdict: str
    gpu_memory_utilization: float | None = None  # vllm: the pool's share of the device
    kv_pool_bytes: int | None = None  # vllm: per GPU, as vLLM logs it
    kv_pool_tokens: int | None = None
    max_concurrent_sequences: float | None = None
    context_length: int
    batch_size: int
    kv_dtype: str
    acceptance_rate: float
    draft_k: int | None
    speedup_model: str
    latency_ratio: float | None = None
    latency_ratio_source: str | None = None  # "given" or "roofline"
    expected_tokens_per_step: float
    speedup: float
    optimal_k: int | None = None
    speedup_at_optimal_k: float | None = None
    break_even_acceptance_rate: float | None = None
    crossover_batch_size: int | None = None
    max_fitting_batch_size: int | None = None
    baseline_tokens_per_s: float
    speculative_tokens_per_s: float
    baseline_ms_per_token: float
    speculative_ms_per_token: float
    price_usd_per_hour: float | None
    usd_per_mtok: float | None
    notes: tuple[str, ...] = ()
