"""Engine presets: the memory rules and the constants that differ between serving engines.

`plain` sums the parts against the device memory; `vllm` follows vLLM V1's pool rules as of
0.33.0, `vllm-0.15` those of 0.11-0.17 (core/vllm_pool.py); `sglang` (0.5.6), `sglang-0.4` and
`sglang-0.5.9` size SGLang's pools (core/sglang_pool.py), `trtllm` TensorRT-LLM's PyTorch
backend's KV cache (core/trtllm_pool.py). Each preset's `memory_rule` names the rule core/fit.py
applies.
Decode and pool constants come from benchmarks/fit_engine_constants.py (the worst error relative
to its bound over the `fit` rows of tests/data/measurements.csv), the serving constants of the
CUDA-graph engines from benchmarks/fit_serving_constants.py (tests/data/serving_measurements.csv);
`check` rows are never fitted to, and docs/calibration.md gives the errors on both. `plain` holds
the set shared by the CUDA-graph engines, the vLLM presets their own, llama.cpp a third.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from infersize.core.allreduce import (
    SGLANG_056_FUSION,
    SGLANG_059_FUSION,
    TRTLLM_FUSION,
    AllReduceFusion,
)
from infersize.core.engine_constants import (
    MIB,
    REJECTION_SAMPLER_BYTES_PER_LOGIT,
    SERVING,
    SGLANG_MOE_LAYER_BY_ARCHITECTURE,
    SGLANG_SPEC_HOST_S,
    SHARED_LAYER_COSTS,
    VLLM_STEP_OVERHEAD_S,
)
from infersize.core.knobs import ENGINE_KNOBS
from infersize.defaults import DEFAULTS
from infersize.errors import UnknownNameError, ValueRangeError
from infersize.record import record


@record
class Engine:
    """One serving engine's memory rules and latency constants: one registry entry."""

    name: str
    description: str
    overhead_gib: float  # per GPU, inside the budget, besides weights, KV cache and workspace
    tp_overhead_gib: float  # plain: added per GPU when tensor parallel >= 2
    # Roofline constants (core/latency.py), shared by every model and GPU:
    mbu: float = 0.74  # achieved / datasheet memory bandwidth in decode
    kv_mbu: float | None = None  # the same for the KV cache reads (None: mbu)
    mfu: float = 0.50  # achieved / datasheet dense tensor peak in compute-bound steps
    # The launch floor that keeps tiny drafts from looking free (the 7B-70B decode rows the rest
    # is fitted on cannot see it): per forward pass, and per layer per pass
    step_overhead_s: float = 2.0e-4  # scheduling, sampling, graph launch not overlapped
    layer_overhead_s: float = 1.0e-5  # kernel launch gaps and tails
    # a pass's fixed cost per MoE layer (router, permutation, grouped GEMMs), pooled and by
    # architecture where the fit rows price one's own; per MLA layer,
    moe_layer_overhead_s: float = 0.0
    moe_layer_overhead_by_architecture: tuple[tuple[str, float], ...] = ()
    mla_layer_overhead_s: float = 0.0
    dsa_layer_overhead_s: float = 0.0  # and a layer's lightning indexer (DeepSeek Sparse Attention)
    # a pass outside CUDA graphs (prefills: eager_prefill; decodes above the limit), a layer:
    eager_layer_overhead_s: float = 0.0
    eager_moe_layer_overhead_s: float = 0.0  # and this much more a MoE layer, an MLA layer
    eager_mla_layer_overhead_s: float = 0.0
    eager_linear_layer_overhead_s: float = 0.0  # and a linear-attention layer's chunked kernels
    eager_prefill: bool = False
    cuda_graph_max_bs: int | None = None  # None: every decode batch runs in a graph
    # the compute share: mfu (mfu_fp8, mfu_fp4 for narrower inputs; None: the wider one's),
    # times T / (T + mfu_half_tokens) for a pass of T tokens (0: flat; latency.py)
    mfu_half_tokens: float = 0.0
    mfu_fp8: float | None = None
    mfu_fp4: float | None = None
    # routed experts over `ep` groups of ranks (1: split over all); attention data parallel
    ep: int = 1
    dp_attention: bool = False
    # per all-reduce under tensor parallel, beside its bytes over Gpu.allreduce_bus_gb_per_s:
    # 8 x H100 NCCL 19-25 us up to 512 KB, 25.5 us at 0 bytes of the 1-16 MiB line
    # (ByteDance-Seed/Triton-distributed#57)
    allreduce_latency_s: float = 2.5e-5
    allreduce_fusion: AllReduceFusion | None = None  # where it fuses them (core/allreduce.py)
    support_family: str = "vllm"  # whose kernels decide what runs where (configs/support.yaml)
    memory_rule: str = "sum"  # sum | vllm | sglang | trtllm: how core/fit.py sizes memory
    release: str = ""  # the engine release whose rules the preset follows
    # vLLM V1's pre-allocated KV pool (core/vllm_pool.py):
    gpu_memory_utilization: float = 1.0
    max_num_batched_tokens: int | None = None  # None: vLLM's default for the GPU
    max_num_seqs: int | None = None
    large_gpu_gib: float = math.inf  # from this size vLLM profiles 16384 tokens, 1024 seqs
    activation_factor: float = 1.0  # measured forward-pass peak / our activation bytes per token
    sampler: str = "triton"  # vLLM's top-k/top-p sampler (core/vllm_pool.SAMPLER_BYTES_PER_LOGIT)
    estimates_cuda_graphs: bool = False  # vLLM 0.21+: graphs are subtracted before the pool
    graph_bytes_per_layer: float = 0.0  # CUDA graph memory per decoder layer and capture size
    graph_moe_extra: float = 0.0  # a MoE layer's graphs hold this share more
    credits_windows_in_tokens: bool = False  # vLLM 0.21+: logged tokens credit sliding windows
    steps_in_flight: float = 1.0  # scheduling steps a sliding window must also hold
    draft_shares_tp: bool = False  # vLLM V1, SGLang: the drafter runs at the target's TP
    # The fixed cost of each drafter forward pass in place of step_overhead_s (None: the same):
    # launches, the proposer's bookkeeping between its passes, its share of rejection sampling
    draft_forward_overhead_s: float | None = None
    spec_host_s: float = 0.0  # host work a speculative step adds, not overlapped with the GPU
    # Any drafter adds the rejection sampler's dry run to the sampler phase of the profiling
    # pass: bytes per row of the dummy batch and vocabulary entry of the target
    rejection_sampler_bytes_per_logit: float = 0.0
    entrypoint: str = DEFAULTS.vllm_entrypoint  # whose batch defaults size the profiling pass
    # SGLang (core/sglang_pool.py); None: SGLang's default for the GPU
    mem_fraction_static: float | None = None
    mem_fraction_rule: str = ""  # how that default is set: "tp" (0.4.x) or "reserve" (0.5.3+)
    chunked_prefill_size: int | None = None
    max_running_requests: int | None = None  # None: from the pool (48 when speculating)
    speculative_headroom: bool = False  # 0.4.3.post3-0.5.6: pools grow by R·d·k + R·n + 100
    # linear-attention (Gated DeltaNet) layers: the dtype of their recurrent state (SGLang's
    # --mamba-ssm-dtype; None: the model's, as vLLM's mamba_cache_dtype "auto"), and the
    # memory of a state pool of its own beside the KV pool, as a ratio to the KV pool's (SGLang's
    # --mamba-full-memory-ratio; None: the states share the KV pool, as in vLLM)
    mamba_ssm_dtype: str | None = None
    mamba_full_memory_ratio: float | None = None
    # where that pool keeps the verify pass's intermediate states, and how many of its slots run
    # (core/sglang_pool.py): "per-slot" (0.5.6: in every slot; a third of the slots run) or
    # "reserved" (0.5.9: apart, for max_running_requests; a drafter turns the radix cache off,
    # so the pool holds one slot per running request)
    mamba_pool_rule: str = "per-slot"
    schedule_policy: str = "fcfs"  # waiting requests in arrival order (SGLang, TensorRT-LLM)
    mixed_prefill: bool = True  # prompts' chunks beside the decodes (False: steps of their own)
    # admit a request when its first chunk fits ("first-chunk": a full pool preempts), or when
    # its whole answer fits beside the running requests' ("whole-request": never preempts)
    admission: str = "first-chunk"
    # the scheduler chooses the next step while the GPU runs this one, so a request that arrives
    # during a step waits for the one after the next (core/serving/kernel.py)
    schedules_ahead: bool = False
    # TensorRT-LLM's PyTorch backend (core/trtllm_pool.py)
    free_gpu_memory_fraction: float = 0.9  # KvCacheConfig.free_gpu_memory_fraction
    max_num_tokens: int | None = None  # None: 8192 (BuildConfig)
    max_batch_size: int | None = None  # None: 2048 (BuildConfig)
    tokens_per_block: int = 32
    drafts_trees: bool = False  # takes a draft tree (top-k > 1): SGLang, TensorRT-LLM

    def moe_layer_cost_s(self, architecture: str) -> float:
        """A MoE layer's fixed cost a pass: `architecture`'s own where fitted, else pooled."""
        own = dict(self.moe_layer_overhead_by_architecture)
        return own.get(architecture, self.moe_layer_overhead_s)


VLLM_V1 = Engine(
    name="vllm",
    description="vLLM V1 (rules of release 0.33.0): pre-grabs gpu_memory_utilization of the "
    "device for weights, activations, CUDA graphs and one KV pool shared by target and draft",
    # non-torch memory after the snapshot: 0.07 GiB at TP 1, as the llava-v1.6 log (row f1 of
    # tests/data/measurements.csv, with its source) prints it
    overhead_gib=0.07,
    tp_overhead_gib=0.14,  # 0.21 GiB at TP 8, the vLLM 0.10.2 L40S log above (custom all-reduce)
    memory_rule="vllm",
    release="0.33.0",
    # fitted (benchmarks/fit_engine_constants.py) to vLLM V1 batch-1 decode: the vLLM blog's
    # Llama-3.1-8B on H100 (0.19.1; zero and 100k context); the per-layer launch cost is the
    # shared one. Checked on a 0.28.0 A100 run, which it over-predicts by 27%
    mbu=0.85,
    kv_mbu=0.90,  # the blog's slope: 128 KiB of KV per token read at 3.0 TB/s
    step_overhead_s=VLLM_STEP_OVERHEAD_S,
    gpu_memory_utilization=0.9,
    large_gpu_gib=160.0,  # EngineArgs.get_batch_defaults, 0.33.0
    activation_factor=2.5,  # fitted: benchmarks/fit_engine_constants.py (blog log q3 sets it)
    sampler="triton",  # apply_top_k_top_p_triton, the default from 0.17
    estimates_cuda_graphs=True,  # VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, default since 0.21
    graph_bytes_per_layer=0.125
    * MIB,  # fitted: benchmarks/fit_engine_constants.py (blog logs q1, q2, q4)
    graph_moe_extra=0.9,
    credits_windows_in_tokens=True,  # kv_cache_utils.get_kv_cache_capacity, 0.21+
    steps_in_flight=2.0,  # async scheduling keeps two batches in flight (0.33 default)
    # ...its scheduler "one step ahead of the current execution"
    # (https://github.com/vllm-project/vllm/pull/19970): a request arriving during a step
    # joins the one after the next
    schedules_ahead=True,
    draft_shares_tp=True,  # DraftModelProposer: draft TP must equal the target's
    # The drafter's loop (vllm-project/vllm@82720b1ed4712ddebb597acdbcff752db48a76c1:
    # vllm/v1/spec_decode/llm_base_proposer.py, SpecDecodeBaseProposer.propose): each of its K
    # passes rebuilds the attention metadata on the host, updates positions and slot mappings,
    # replays piecewise CUDA graphs only (initialize_cudagraph_keys: attention runs between
    # the graph's pieces) and samples by argmax outside them; async scheduling overlaps the
    # target step's host work, not this loop. Held at the engine step's cost, not fitted:
    # docs/calibration.md checks it on batch-1 speedups of a separate draft
    draft_forward_overhead_s=VLLM_STEP_OVERHEAD_S,
    rejection_sampler_bytes_per_logit=REJECTION_SAMPLER_BYTES_PER_LOGIT,
    # SGLang's MoE, MLA and indexer layer costs, held (the same kernels; not fitted on vLLM)
    **{name: SERVING[name] for name in SHARED_LAYER_COSTS},
)
VLLM_V1_EARLY = replace(
    VLLM_V1,
    name="vllm-0.15",
    description="vLLM V1 as released from 0.11 to 0.17: CUDA graphs come on top of the pool, "
    "the logged tokens do not credit sliding windows",
    release="0.15.0",
    large_gpu_gib=math.inf,
    activation_factor=2.0,  # fitted: benchmarks/fit_engine_constants.py (logs a1, d1, e1)
    sampler="pytorch",  # sort-based apply_top_k_top_p: FlashInfer's was opt-in
    estimates_cuda_graphs=False,
    credits_windows_in_tokens=False,
    steps_in_flight=1.0,
    schedules_ahead=False,
)

# SGLang's linear-attention state dtype: ServerArgs' default to 0.5.6, and from 0.5.9 what
# holds where neither --mamba-ssm-dtype nor the model's config names one (SGLANG_059 below)
SGLANG_SSM_DTYPE = "float32"
SGLANG = Engine(
    name="sglang",
    description="SGLang (rules of release 0.5.6): mem_fraction_static of the free memory holds "
    "the weights and one KV pool; a draft keeps a pool of the same tokens out of the rest",
    # the memory not yet free when SGLang measures: the CUDA context at TP 1, and what NCCL
    # adds under tensor parallel (both fitted: benchmarks/fit_engine_constants.py, on the
    # sglang-0.4 and sglang fit rows of tests/data/measurements.csv)
    overhead_gib=0.55,
    tp_overhead_gib=1.7,
    memory_rule="sglang",
    release="0.5.6",
    # the drafter's TpModelWorker runs a ModelRunner at tp_size=server_args.tp_size with the
    # target's tp_rank (sgl-project/sglang@5c8bd8b51b53b9b39eb1edec582ee43b21002106:
    # python/sglang/srt/speculative/eagle_worker.py lines 140-151, StandaloneWorker the same;
    # python/sglang/srt/managers/tp_worker.py lines 221-253): a head or a draft model is split
    # over the target's GPUs, not held whole on each
    draft_shares_tp=True,
    mem_fraction_rule="reserve",
    speculative_headroom=True,
    # ServerArgs' defaults (sgl-project/sglang@5c8bd8b51b53b9b39eb1edec582ee43b21002106:
    # python/sglang/srt/server_args.py): mamba_ssm_dtype "float32", mamba_full_memory_ratio 0.9
    # (core/sglang_pool.py: how the state pool is sized, and what it bounds)
    mamba_ssm_dtype=SGLANG_SSM_DTYPE,
    mamba_full_memory_ratio=0.9,
    drafts_trees=True,
    # get_new_batch_prefill runs prompts in a batch of their own, the decodes waiting, unless
    # is_mixed_chunk (sgl-project/sglang@d51c1c21d1ac07cd5d1de9ead6c99087d8428e79:
    # python/sglang/srt/managers/scheduler.py); graphs capture decode batches only
    mixed_prefill=False,
    eager_prefill=True,
    # its overlap scheduler also runs one step ahead (event_loop_overlap, the default), but its
    # fit rows are served better with a request joining the step after the one it arrives in
    # (docs/calibration.md): held at that until a row tells the two apart. For hybrid
    # linear-attention models SGLang turns it off itself: MambaRadixCache, the default radix
    # cache, "is not compatible with overlap schedule" (Qwen3NextForCausalLM in
    # ServerArgs._handle_model_specific_adjustments, at the commit above)
    schedules_ahead=False,
    allreduce_fusion=SGLANG_056_FUSION,
    spec_host_s=SGLANG_SPEC_HOST_S,
    moe_layer_overhead_by_architecture=SGLANG_MOE_LAYER_BY_ARCHITECTURE,
)
SGLANG = replace(SGLANG, **SERVING)
SGLANG_04 = replace(
    SGLANG,
    name="sglang-0.4",
    description="SGLang as released from 0.4.0 to 0.4.5: mem_fraction_static by tensor "
    "parallelism (0.88 at TP 1), chunked prefill 8192 tokens",
    release="0.4.4",
    mem_fraction_rule="tp",
    allreduce_fusion=None,  # the fused kernel came after 0.4.5 (sglang PR 7621, 2025-06)
)
# SGLang 0.5.9 (PyPI, February 2026), whose rules the main of 2026-02-16 already had: each file
# cited below is release 0.5.9's but for lines these rules do not read. Its mem_fraction_static
# reserve, chunked prefill and CUDA-graph defaults and its 48 are 0.5.6's (core/sglang_pool.py).
# The latency constants stay those fitted on 0.5.6 runs.
SGLANG_059 = replace(
    SGLANG,
    name="sglang-0.5.9",
    description="SGLang 0.5.9, the first release to serve Qwen3.5: no speculative headroom in "
    "the pools; a hybrid model's drafter gets one state slot and its verify states per running "
    "request, and all of them run (48 by default). Latency constants as fitted on 0.5.6 runs",
    release="0.5.9",
    # init_memory_pool sets draft_runner_cache_size to the target's max_total_num_tokens, with
    # no R · d · k + R · n + 100 (since 0.5.7;
    # sgl-project/sglang@f9c3def7fe464a19d8321474a4e149a3a8d3dcc4:
    # python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py)
    speculative_headroom=False,
    # handle_max_mamba_cache (the same file) reserves mamba_cache_per_req · max_running_requests
    # · speculative_num_draft_tokens first and, the radix cache off, sizes the pool at
    # max_running_requests; init_memory_pool's ratio is then 1. ServerArgs turns
    # mamba_scheduler_strategy "auto" into "no_buffer", under which _handle_mamba_radix_cache
    # turns the radix cache off for Qwen3-Next and Qwen3.5 when speculating
    # (sgl-project/sglang@f9c3def7fe464a19d8321474a4e149a3a8d3dcc4:python/sglang/srt/server_args.py)
    mamba_pool_rule="reserved",
    # mamba_ssm_dtype defaults to None there: mamba2_state_dtype takes the model config's
    # (text_config's) mamba_ssm_dtype, else float32
    # (sgl-project/sglang@f9c3def7fe464a19d8321474a4e149a3a8d3dcc4:
    # python/sglang/srt/configs/mamba_utils.py; service/resolve.ssm_dtype_name). Qwen3.5's
    # configs name float32 (Qwen3.5-0.8B's, configs/models.yaml) or none, Qwen3-Next's none:
    # float32 for every hybrid model the catalog holds, a config's own where a user's names one
    mamba_ssm_dtype=None,
    allreduce_fusion=SGLANG_059_FUSION,
)
TRTLLM = Engine(
    name="trtllm",
    description="TensorRT-LLM's PyTorch backend (KvCacheCreator): free_gpu_memory_fraction of "
    "the memory left after a profiled prefill of max_num_tokens; a draft's pool holds as many "
    "tokens",
    # not fitted (one public log, tests/data/measurements.csv): the CUDA context and graphs
    # outside torch, and vLLM's activation factor for the same PyTorch prefill
    overhead_gib=0.6,
    tp_overhead_gib=1.7,  # NCCL, as fitted for SGLang above
    activation_factor=2.5,
    memory_rule="trtllm",
    release="1.0",  # KvCacheCreator's budget by memory; the same formula since 0.19
    drafts_trees=True,
    # SchedulerConfig's default GUARANTEED_NO_EVICT schedules a request when its whole answer's
    # blocks are free, never evicting (NVIDIA/TensorRT-LLM@fcd3f31682808ae56118ae43c1d7864a3a945e6f:
    # tensorrt_llm/llmapi/llm_args.py); graphs capture generation-only batches
    admission="whole-request",
    eager_prefill=True,
    allreduce_fusion=TRTLLM_FUSION,
)
TRTLLM = replace(TRTLLM, **SERVING)

ENGINES: dict[str, Engine] = {
    "plain": Engine(
        name="plain",
        description="sum of the parts against the device memory; kernel support as in vLLM",
        overhead_gib=1.04,
        tp_overhead_gib=0.74,
    ),
    "vllm": VLLM_V1,
    "vllm-0.15": VLLM_V1_EARLY,
    "llama.cpp": Engine(
        name="llama.cpp",
        description="llama.cpp (GGUF, CUDA graphs, 2025 builds): sum of the parts like plain; "
        "a launch cost per layer",
        overhead_gib=1.04,  # not calibrated separately: plain's
        tp_overhead_gib=0.74,
        # fitted (benchmarks/fit_engine_constants.py) to 2025 builds: the CUDA scoreboard of
        # https://github.com/ggml-org/llama.cpp/discussions/15013 (Llama-2-7B Q4_0, six GPUs);
        # checked on three other llama.cpp threads (docs/calibration.md)
        mbu=0.775,
        mfu=0.60,
        step_overhead_s=2.5e-4,
        layer_overhead_s=1.0e-5,
        support_family="llama.cpp",
    ),
    "sglang": SGLANG,
    "sglang-0.4": SGLANG_04,
    "sglang-0.5.9": SGLANG_059,
    "trtllm": TRTLLM,
}


def register_engine(engine: Engine) -> Engine:
    """Add an engine preset: `--engine`, the sweep schema's `engine:` and the help list it."""
    ENGINES[engine.name] = engine
    return engine


def get_engine(name: str) -> Engine:
    """The preset registered under `name`, as registered."""
    engine = ENGINES.get(name.strip().lower())
    if engine is None:
        raise UnknownNameError("engine", name, ENGINES, hint=f"choose {', '.join(ENGINES)}")
    return engine


@record(kw_only=False)
class EngineSettings:
    """An engine preset by name and the user's settings of it (core/knobs.py; a setting not
    given is the preset's, or the setting's own default)."""

    engine: str
    given: tuple[tuple[str, Any], ...]  # (setting, value), by setting name

    def __init__(self, engine: str = DEFAULTS.engine, **values: Any) -> None:
        unknown = sorted(set(values) - set(ENGINE_KNOBS))
        if unknown:
            raise TypeError(f"not an engine setting: {', '.join(unknown)}")
        given = tuple(sorted((k, v) for k, v in values.items() if v is not None))
        object.__setattr__(self, "engine", engine)
        object.__setattr__(self, "given", given)

    def get(self, name: str) -> Any:
        """The value given for a setting, else its declared default (None: the preset's)."""
        return dict(self.given).get(name, ENGINE_KNOBS[name].default)

    def as_dict(self) -> dict[str, Any]:
        """The engine and every setting (given or default), as manifests record them."""
        return {"engine": self.engine} | {name: self.get(name) for name in ENGINE_KNOBS}


def configure_engine(settings: EngineSettings) -> Engine:
    """The preset with the user's settings applied, each checked against its declaration: a
    setting of SGLang or TensorRT-LLM with another engine is refused, a value outside its range
    or choices is refused, and each sets the Engine field it names."""
    engine = get_engine(settings.engine)
    changes = {}
    given = dict(settings.given)
    for knob in ENGINE_KNOBS.values():
        value = settings.get(knob.name)
        if value is None:
            continue
        if knob.name in given and knob.strict_owner and not knob.applies_to(engine.memory_rule):
            raise ValueRangeError(
                knob.name,
                f"is a setting of {knob.owner_text}: it does not apply to engine {engine.name}",
            )
        knob.check(value)
        changes[knob.engine_field] = value
    return replace(engine, **changes)
