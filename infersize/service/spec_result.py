"""The typed result of `infersize spec`: its fields are the stable keys of `spec --json`, in
order; the terminal panel reads the same object."""

from __future__ import annotations

from infersize.core.arrays import FloatArray
from infersize.core.deployment import Side
from infersize.record import record


@record
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


@record(kw_only=False)
class GpuResult:
    id: str
    name: str
    memory_bytes: int
    count: int  # GPUs of the deployment (the target's tensor parallelism)


@record
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
    verdict: str  # safe, tight, OOM, or unsupported (a precision the GPU cannot run)
    support: str  # native, weight-only (dequantising kernels, priced) or unsupported
    support_reason: str | None  # why, unless native
    engine_release: str | None = None  # pooled engines: the release whose rules sized the pool
    gpu_memory_utilization: float | None = None  # vllm: the pool's share of the device
    vllm_release: str | None = None  # vllm: the release whose rules sized the pool
    kv_pool_bytes: int | None = None  # per GPU, target and draft (vllm: "Available KV cache")
    kv_pool_tokens: int | None = None  # vllm: "GPU KV cache size: N tokens"; else as below
    max_concurrent_sequences: float | None = None  # vllm: "Maximum concurrency" at the context
    activation_peak_bytes: int | None = None  # the profiling pass's peak (SGLang: a chunk's)
    non_torch_bytes: int | None = None  # SGLang: not free when it measures (CUDA context)
    cuda_graph_bytes: int | None = None  # subtracted before the pool (vLLM 0.20+)
    # vllm: what the drafter adds to the activation peak (the rejection sampler's dry run)
    speculative_peak_bytes: int | None = None
    vllm_entrypoint: str | None = None  # vllm: serve or offline, whose defaults it profiles
    max_num_batched_tokens: int | None = None  # vllm: the profiling pass's size
    max_num_seqs: int | None = None
    vllm_sampler: str | None = None  # vllm: the sampler its profiling pass ran
    max_total_num_tokens: int | None = None  # sglang: "KV Cache is allocated. #tokens: N"
    mem_fraction_static: float | None = None  # sglang: as applied (its default for the GPU)
    chunked_prefill_size: int | None = None  # sglang: tokens per step
    max_running_requests: int | None = None  # sglang: most sequences at once
    # sglang, hybrid models: "Mamba Cache is allocated. max_mamba_cache_size: N", the state
    # pool's bytes per GPU and the dtype of its recurrent states
    max_mamba_cache_size: int | None = None
    mamba_pool_bytes: int | None = None
    mamba_ssm_dtype: str | None = None
    max_tokens_in_paged_kv_cache: int | None = None  # trtllm: "... paged KV cache (N)"
    kv_cache_free_gpu_memory_fraction: float | None = None  # trtllm
    max_num_tokens: int | None = None  # trtllm: tokens per step and of its profiled prefill
    max_batch_size: int | None = None  # trtllm: most sequences at once
    context_length: int  # tokens in each sequence's KV cache at decode
    batch_size: int
    input_tokens: int | None = None  # the prompt and answer the context came from, when given
    output_tokens: int | None = None
    kv_dtype: str
    acceptance_rate: float | None
    acceptance_source: str  # given, published (for this pair) or prior (fitted to published)
    # per-position acceptance r_1, r_2, … as given (vLLM's "Per-position acceptance rate");
    # acceptance_rate is then the i.i.d. α with the same mean acceptance length at draft_k
    acceptance_rates: tuple[float, ...] | None = None
    # the positions a published figure speaks for (its measured K): none is credited past
    # them, so optimal_k is at most this; None: α extrapolated i.i.d. to every position
    acceptance_positions: int | None = None
    draft_k: int | None
    eagle_topk: int | None = None  # draft candidates per node: 1 a chain, more a tree
    num_draft_tokens: int | None = None  # tokens verified per sequence (a chain: K + 1)
    speedup_model: str
    method: str | None = None  # speculative method (vLLM's name): draft, eagle3, mtp, ngram ...
    latency_ratio: float | None = None
    latency_ratio_source: str | None = None  # "given" or "roofline"
    expected_tokens_per_step: float
    speedup: float | None  # None when the deployment does not fit
    optimal_k: int | None = None  # the best K that fits; None when none does
    speedup_at_optimal_k: float | None = None
    break_even_acceptance_rate: float | None = None  # at the K asked
    break_even_expected_tokens_per_step: float | None = None  # E where S = 1, at the K asked
    min_break_even_acceptance_rate: float | None = None  # least over K = 1..max_k
    min_break_even_draft_k: int | None = None
    crossover_batch_size: int | None = None
    max_fitting_context_length: int | None = None  # at the batch and K asked
    max_fitting_batch_size: int | None = None  # at the context and K asked (exact)
    min_fitting_tp: int | None = None  # smallest of 1, 2, 4, 8 that fits
    fitting_target_quant: str | None = None  # when it does not fit: the most bits that fit
    fitting_kv_dtype: str | None = None  # when it does not fit: the widest KV dtype that fits
    baseline_tokens_per_s: float | None  # throughput, latency, cost: None when it does not fit
    speculative_tokens_per_s: float | None
    baseline_ms_per_token: float | None
    speculative_ms_per_token: float | None
    price_usd_per_hour: float | None
    usd_per_mtok: float | None
    # how far the speeds can be trusted (core/confidence.py): low for a MoE decode step that
    # selects fewer experts than a layer holds
    confidence: str = "high"
    notes: tuple[str, ...] = ()
