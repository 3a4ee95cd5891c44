"""Engine presets: the memory rules and the constants that differ between serving engines.

`plain` sums the parts against the device memory. `vllm` follows vLLM V1's pool rules as of
release 0.33.0 (core/vllm_pool.py); `vllm-0.15` the rules of the V1 releases 0.11 to 0.17, which
did not subtract CUDA graphs before sizing the pool and logged the pool's tokens without
crediting sliding windows. Their pool constants are fitted to public vLLM start-up logs.
`sglang` sizes SGLang's pools as release 0.5.6 does, `sglang-0.4` as the 0.4.x releases did
(core/sglang_pool.py); `trtllm` the KV cache of TensorRT-LLM's PyTorch backend
(core/trtllm_pool.py). Each preset's `memory_rule` names the rule core/fit.py applies.

Every fitted constant comes from benchmarks/fit_engine_constants.py, which minimises the worst
error relative to its bound over the `fit` rows of tests/data/measurements.csv (each row
quoted with its source; the `check` rows are never fitted to, and docs/calibration.md gives the
errors on both): `plain` holds the set shared by the CUDA-graph engines (fitted to gpt-fast and
LMDeploy; checked on SGLang, NIM, TensorRT-LLM, AutoAWQ); the vLLM presets their own; llama.cpp
a third, whose kernels are launched per layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from infersize.core.knobs import ENGINE_KNOBS
from infersize.defaults import DEFAULTS
from infersize.errors import UnknownNameError, ValueRangeError

MIB = 2**20
# vLLM V1's fixed cost per engine step, fitted (benchmarks/fit_engine_constants.py) to the vLLM
# blog's batch-1 rows; each drafter forward is held at the same cost (VLLM_V1)
VLLM_STEP_OVERHEAD_S = 8.0e-4
# Any speculative method (draft model, EAGLE, EAGLE-3, MTP, n-gram, Medusa) adds the rejection
# sampler's dry run to V1's profiling pass: gpu_model_runner._dummy_sampler_run, `if
# self.speculative_config:`, draws bf16 logits for num_reqs drafts + num_reqs bonus tokens and
# runs RejectionSampler.forward on them (vllm-project/vllm@e1a34c3a5d9273431ee182253750d39b546d37a1:
# vllm/v1/worker/gpu_model_runner.py lines 4606-4629; the same at
# vllm-project/vllm@48ebd6f2f164057043edb8301771a17dcaebd61d: lines 6291-6321). Since
# https://github.com/vllm-project/vllm/pull/26060 (merged 2025-10-22)
# RejectionSampler.forward keeps, beside those logits, a copy of the bonus rows, their raw fp32
# logits, the targets' fp32 logits and a clone of them through top-k/top-p, softmax and the
# recovered-token noise (vllm/v1/sample/rejection_sampler.py lines 100-140 at e1a34c3a).
# Re-stated tensor by tensor,
# its peak exceeds the plain sampler's by 12 bytes per row and vocabulary entry of the target,
# with a sort-based top-k/top-p or an in-place one alike. Read from the source, not fitted. It
# counts only where the sampler phase is the profile's largest.
REJECTION_SAMPLER_BYTES_PER_LOGIT = 12.0
# vLLM's entry points (vllm/usage/usage_lib.py UsageContext): `vllm serve` is OPENAI_API_SERVER,
# `LLM(...)` in Python is LLM_CLASS; EngineArgs.get_batch_defaults sizes the profiling pass by it
VLLM_ENTRYPOINTS: dict[str, str] = {"serve": "`vllm serve`", "offline": "LLM(...)"}


# Bytes per fp32 logit of the [min(max_num_seqs, max_num_batched_tokens), vocab] dummy batch at
# the peak of vLLM's profiling sampler run (gpu_model_runner._dummy_sampler_run), by sampler
# (ops/topk_topp_sampler.py), from start-up logs that print the profiling peak:
SAMPLER_BYTES_PER_LOGIT: dict[str, float] = {
    # Triton top-k/top-p (apply_top_k_top_p_triton): the default from 0.17 on. Logs q1-q4 (their
    # sum with the CUDA graph estimate; the split between the two is not identified).
    "triton": 12.0,
    # PyTorch sort-based top-k/top-p (apply_top_k_top_p): the default from 0.11 to 0.16 and on
    # ROCm; sorted logits, int64 indices, probabilities and masks. A vLLM 0.10.2 log of
    # Qwen3-235B-A22B FP8 at TP 8 on L40S printed a 1.4 GiB peak for 256 rows of 151,936 logits
    # (its public source is to be found again: the row left tests/data/measurements.csv).
    "pytorch": 38.6,
    # FlashInfer's fused kernels (VLLM_USE_FLASHINFER_SAMPLER=1; on by default in 0.9-0.10 where
    # FlashInfer is installed). https://github.com/vllm-project/vllm/issues/21524 prints 2.4 GiB
    # for 1024 rows of 151,936.
    "flashinfer": 16.6,
}


@dataclass(frozen=True, kw_only=True)
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
    allreduce_latency_s: float = 2.5e-5  # per all-reduce under tensor parallel (NCCL small msg)
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
    schedule_policy: str = "fcfs"  # waiting requests in arrival order (SGLang, TensorRT-LLM)
    # TensorRT-LLM's PyTorch backend (core/trtllm_pool.py)
    free_gpu_memory_fraction: float = 0.9  # KvCacheConfig.free_gpu_memory_fraction
    max_num_tokens: int | None = None  # None: 8192 (BuildConfig)
    max_batch_size: int | None = None  # None: 2048 (BuildConfig)
    tokens_per_block: int = 32
    drafts_trees: bool = False  # takes a draft tree (top-k > 1): SGLang, TensorRT-LLM


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
)

# SGLang and TensorRT-LLM keep the default latency constants: `plain`'s, the set of the
# CUDA-graph engines, checked on SGLang's and TensorRT-LLM's decode rows (docs/calibration.md)
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
    drafts_trees=True,
)
SGLANG_04 = replace(
    SGLANG,
    name="sglang-0.4",
    description="SGLang as released from 0.4.0 to 0.4.5: mem_fraction_static by tensor "
    "parallelism (0.88 at TP 1), chunked prefill 8192 tokens",
    release="0.4.4",
    mem_fraction_rule="tp",
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
)

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


@dataclass(frozen=True, init=False)
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
        if knob.name in given and knob.strict_owner and engine.memory_rule != knob.owner:
            raise ValueRangeError(
                knob.name,
                f"is a setting of {knob.owner}: it does not apply to engine {engine.name}",
            )
        knob.check(value)
        changes[knob.engine_field] = value
    return replace(engine, **changes)
