"""Fused all-reduces: where an engine runs a tensor-parallel all-reduce, the residual add and the
RMSNorm after it as one one-shot kernel, and what that all-reduce costs.

Under tensor parallelism each decoder layer all-reduces twice (after attention, after the MLP).
Engines built on FlashInfer's or TensorRT-LLM's communication kernels fuse each all-reduce with
the residual add and the next RMSNorm into one one-shot (Lamport) kernel, for some model
architectures on some GPUs:

- SGLang 0.5.6 sets `enable_flashinfer_allreduce_fusion` on Blackwell (sm100) for
  DeepseekV3ForCausalLM (DeepSeek-V3/R1, and Kimi-K2, whose config names the same class) and
  GptOssForCausalLM, single node, without DP attention; an NSA model (DeepSeek-V3.2) turns DP
  attention on first, so not for it (`ServerArgs._handle_model_specific_adjustments`,
  sgl-project/sglang@7ae368efde14f0b2abe769a5fbb99b8154b2a9b7:python/sglang/srt/server_args.py).
  A layer fuses while the pass holds at most 2,048 tokens (`FUSE_ALLREDUCE_MAX_BATCH_SIZE`,
  python/sglang/srt/layers/communicator.py at the same commit). The last layer's all-reduce
  after its MLP has no next norm to fuse with, nor has the MTP (NextN) layer's (a DeepSeek
  decoder layer run as a last layer, python/sglang/srt/models/deepseek_v2.py): one all-reduce
  of a pass, or one of the NextN pass's two, priced as fused all the same.
- SGLang 0.5.9 (the main of 2026-02-16) fuses by default for DeepseekV3ForCausalLM,
  GptOssForCausalLM, Glm4MoeForCausalLM, Glm4MoeLiteForCausalLM, Qwen3MoeForCausalLM and
  KimiK25ForConditionalGeneration on Hopper (sm90, H20 aside) and Blackwell (sm100), under the
  same conditions (sgl-project/sglang@f9c3def7fe464a19d8321474a4e149a3a8d3dcc4:
  python/sglang/srt/server_args.py).
- TensorRT-LLM's PyTorch backend runs DeepSeek-R1 on B200 with "oneshotAllReduce, Add_RMSNorm,
  and DynamicQuant (BF16->NVFP4) in a single kernel" after attention and "localReduction,
  oneshotAllReduce, and Add_RMSNorm" after the experts, its MTP layers alike (tech blog 1,
  NVIDIA/TensorRT-LLM@01c4ece911eb569e72cf4177f83238a0520641c2:docs/source/blogs/tech_blog/
  blog1_Pushing_Latency_Boundaries_Optimizing_DeepSeek-R1_Performance_on_NVIDIA_B200_GPUs.md).

The fused all-reduce's latency is the one SGLang measured when it adopted the kernel: 8.7 µs
against 13.5 µs for its unfused all-reduce and add-RMSNorm, DeepSeek-R1 at TP 8 on B200
(https://github.com/sgl-project/sglang/pull/7621, "13.5us->8.7us"). It replaces the engine's
per-all-reduce latency (core/latency.allreduce_latency_s); the bytes still cross the links.
This module holds no numpy: engine presets import it on `spec`'s light path.
"""

from __future__ import annotations

from infersize.record import record

FUSED_ALLREDUCE_LATENCY_S = 8.7e-6  # sglang PR 7621: one-shot all-reduce + add-RMSNorm, 8 x B200
FUSED_ALLREDUCE_MAX_TOKENS = 2048  # SGLang's FUSE_ALLREDUCE_MAX_BATCH_SIZE


@record
class AllReduceFusion:
    """The model and GPU architectures (the catalog's names) an engine fuses all-reduces on."""

    models: tuple[str, ...]  # the target's architecture; a drafter fuses if its own is listed too
    gpus: tuple[str, ...]
    latency_s: float = FUSED_ALLREDUCE_LATENCY_S
    max_tokens: int = FUSED_ALLREDUCE_MAX_TOKENS

    def fuses(self, target_architecture: str, side_architecture: str, gpu: str) -> bool:
        """Whether a pass of the side (the target, or its drafter) fuses its all-reduces: the
        engine turns the fusion on for the target's architecture, and the side's layers are
        ones that take it."""
        return (
            gpu in self.gpus
            and target_architecture in self.models
            and side_architecture in self.models
        )


SGLANG_056_FUSION = AllReduceFusion(
    models=("deepseek_v3", "kimi_k2", "deepseek_mtp", "gpt_oss"), gpus=("blackwell",)
)
SGLANG_059_FUSION = AllReduceFusion(
    models=(
        *("deepseek_v3", "kimi_k2", "deepseek_mtp", "gpt_oss"),
        *("glm4_moe", "qwen3_moe", "kimi_k25"),
    ),
    gpus=("hopper", "blackwell"),
)
# TensorRT-LLM's own limit on a fused pass's tokens is not read: SGLang's 2,048 stands for it
TRTLLM_FUSION = AllReduceFusion(models=("deepseek_v3", "deepseek_mtp"), gpus=("blackwell",))
