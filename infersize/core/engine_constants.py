"""Constants the engine presets (core/engines.py) read: the serving constants the CUDA-graph
engines share, and vLLM V1's that its pool rules (core/vllm_pool.py) read too (the step's fixed
cost, the sampler's profiling bytes, its entry points). Kept apart from the presets so that each
stays one screen of declarations."""

from __future__ import annotations

from typing import Any

from infersize.record import record

MIB = 2**20
# SGLang and TensorRT-LLM keep `plain`'s bandwidth share and launch floor (checked on their
# decode rows, docs/calibration.md) and share the serving constants fitted to the `fit` rows
# of tests/data/serving_measurements.csv (benchmarks/fit_serving_constants.py)
SERVING: dict[str, Any] = {
    # pooled over the MoE fit pages of SGLANG_MOE_POOLED_OVER: fitted to the three at once
    "moe_layer_overhead_s": 6.5e-5,
    "mla_layer_overhead_s": 4e-5,
    # a lightning indexer's kernels (its rotation, FP8 key cache, paged logits and top-2048
    # selection), fitted to GLM-5's one-client rows without speculation on 8 x B200
    "dsa_layer_overhead_s": 7.5e-5,
    "eager_layer_overhead_s": 3.5e-4,
    "eager_moe_layer_overhead_s": 5e-4,
    "eager_mla_layer_overhead_s": 1e-3,
    # a Gated DeltaNet layer's chunked prefill kernels (Triton, launched from the host), fitted
    # to Qwen3-Next's SGLang rows on 8 x B200
    "eager_linear_layer_overhead_s": 2e-3,
    # the 16-bit share: TensorRT-LLM 0.14's FP16 columns (H100 and A100) are the fit rows
    # that set it
    "mfu": 0.65,
    "mfu_fp8": 0.65,
    "mfu_fp4": 0.4,
}


# SGLang's MoE layer cost for each architecture with fit rows of its own, each fitted to its
# own rows alone, with the runs that set it: the sgl-cookbook's pages of DeepSeek-R1, GLM-4.6
# and Qwen3-235B on 8 x B200 (SGLang 0.5.6), and LMSYS's batch-1 decode rates of gpt-oss-120b
# (https://lmsys.org/blog/2025-08-27-gpt-oss, SGLang 0.5.1.post3). Its path for each model
# class, which the other presets do not take (vLLM's Qwen3-30B-A3B on A100 at batch 1 is already
# slower than the pooled cost prices, docs/calibration.md)
@record
class MoeLayerFit:
    """One architecture's own MoE layer cost and the runs it was fitted to."""

    architecture: str
    cost_s: float
    fitted_on: str


COOKBOOK_RUNS = "SGLang's public runs of it on 8 x B200"
SGLANG_MOE_LAYER_FITS = (
    MoeLayerFit(architecture="deepseek_v3", cost_s=7e-5, fitted_on=COOKBOOK_RUNS),
    MoeLayerFit(architecture="glm4_moe", cost_s=8.5e-5, fitted_on=COOKBOOK_RUNS),
    MoeLayerFit(
        architecture="gpt_oss",
        cost_s=3e-5,
        fitted_on="SGLang's public runs of it one request at a time on 4 x B200 and 8 x H100",
    ),
    MoeLayerFit(architecture="qwen3_moe", cost_s=3.5e-5, fitted_on=COOKBOOK_RUNS),
)
SGLANG_MOE_LAYER_BY_ARCHITECTURE = tuple((f.architecture, f.cost_s) for f in SGLANG_MOE_LAYER_FITS)
SGLANG_MOE_LAYER_FITTED_ON = {f.architecture: f.fitted_on for f in SGLANG_MOE_LAYER_FITS}
# the fit pages' architectures the pooled cost (SERVING's) was fitted to at once, on 8 x B200
SGLANG_MOE_POOLED_OVER = ("deepseek_v3", "glm4_moe", "qwen3_moe")
# SGLang's EAGLE worker (MTP and n-gram too) runs without the overlap scheduler unless
# SGLANG_ENABLE_SPEC_V2 is set (ServerArgs._handle_speculative_decoding,
# sgl-project/sglang@7ae368efde14f0b2abe769a5fbb99b8154b2a9b7: python/sglang/srt/server_args.py;
# the same at f9c3def7): a step's host work runs between its passes. Overlapping it made a step
# of Llama-3.1-8B with a 5-token EAGLE chain 1.1 ms shorter at one client (2.99 tokens a step at
# 246.80 tokens/s without, 3.01 at 273.43 with: https://github.com/sgl-project/sglang/pull/11398)
SGLANG_SPEC_HOST_S = 1.1e-3
# the layer costs of kernels every engine runs alike, which the vLLM presets hold at SERVING's
SHARED_LAYER_COSTS = ("moe_layer_overhead_s", "mla_layer_overhead_s", "dsa_layer_overhead_s")
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
