"""Engine presets: the memory rules and the constants that differ between serving engines.

Calibration source for the memory constants: vLLM real logs quoted in docs/reference/measurements.md
(vLLM 0.28.0, A100-80GB, bf16, gpu_memory_utilization 0.90, Llama-3-8B): KV pool 55.11 GiB,
non-KV overhead 1.82 GiB on one GPU and 2.56 GiB per GPU at tensor-parallel 2.
 - Our profiled activations for that run (memory.vllm_profile_bytes: 8192 tokens · 86,016 B
   + 256 sequences · 128,256 · 4 B logits) are 0.78 GiB, so the rest of the 1.82 GiB, 1.04 GiB,
   is CUDA context, non-torch allocations and CUDA graphs: `overhead_gib`.
 - The pool is total · U − weights − profiled activations − non-torch memory; with the log's
   pool that leaves 79.15 · 0.9 − 14.96 − 0.78 − 55.11 = 0.39 GiB of non-torch memory at sizing
   time: vLLM's `overhead_gib` (CUDA graphs, the other 0.65 GiB, are captured after the pool is
   sized, so nvidia-smi shows more than U · memory).
 - Tensor parallel 2 adds 2.56 − 1.82 = 0.74 GiB per GPU (NCCL buffers, custom all-reduce).

Latency constants (infersize/latency.py) are fitted to the published decode measurements in
tests/data/measurements.csv (sources there): one shared set for the CUDA-graph engines (vLLM,
SGLang, LMDeploy, TensorRT-LLM, gpt-fast, AutoAWQ: 19 points, batch 1-64, A100/H100/L40S/4090,
TP 1-8), minimising the worst error relative to its bound; a second set for llama.cpp (3 points),
whose kernels are not fused into one graph per layer, so each layer costs more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from infersize.errors import UnknownNameError, ValueRangeError


@dataclass(frozen=True)
class Engine:
    """One serving engine's memory rules and latency constants: one registry entry."""

    name: str
    description: str
    overhead_gib: float  # per GPU: what counts against the budget besides weights, KV, workspace
    tp_overhead_gib: float  # added per GPU when tensor parallel >= 2
    pools_kv: bool = False  # pre-allocates a KV pool of gpu_memory_utilization · memory
    gpu_memory_utilization: float = 1.0
    max_num_batched_tokens: int = 0  # tokens in vLLM's profiling forward pass
    max_num_seqs: int = 0
    # Roofline constants (infersize/latency.py), shared by every model and GPU:
    mbu: float = 0.70  # achieved / datasheet memory bandwidth in decode
    mfu: float = 0.60  # achieved / datasheet dense tensor peak in compute-bound steps
    step_overhead_s: float = 2.0e-4  # per forward pass: scheduling, sampling, graph launch
    layer_overhead_s: float = 1.0e-5  # per layer per pass: kernel launch gaps and tails
    allreduce_latency_s: float = 2.5e-5  # per all-reduce under tensor parallel (NCCL small msg)
    support_family: str = "vllm"  # whose kernels decide what runs where (configs/support.yaml)


ENGINES: dict[str, Engine] = {
    "plain": Engine(
        name="plain",
        description="sum of the parts against the device memory; kernel support as in vLLM",
        overhead_gib=1.04,
        tp_overhead_gib=0.74,
    ),
    "vllm": Engine(
        name="vllm",
        description="vLLM V1: pre-grabs gpu_memory_utilization of the device for weights, "
        "activations and a KV cache pool",
        overhead_gib=0.39,
        tp_overhead_gib=0.74,
        pools_kv=True,
        gpu_memory_utilization=0.9,
        max_num_batched_tokens=8192,  # vLLM V1 default for offline LLM on >= 70 GB GPUs
        max_num_seqs=256,  # vLLM default
    ),
    "llama.cpp": Engine(
        name="llama.cpp",
        description="llama.cpp (GGUF, CUDA graphs): sum of the parts like plain; slower layers",
        overhead_gib=1.04,  # not calibrated separately: plain's
        tp_overhead_gib=0.74,
        mbu=0.75,  # fitted: llama.cpp PR #6766 (RTX 4090/3090, Q4_0), issue #6763 (H100-PCIe)
        step_overhead_s=8.0e-4,
        layer_overhead_s=6.0e-5,
        support_family="llama.cpp",
    ),
}


def register_engine(engine: Engine) -> Engine:
    """Add an engine preset: `--engine`, the sweep schema's `engine:` and the help list it."""
    ENGINES[engine.name] = engine
    return engine


def get_engine(
    name: str, gpu_memory_utilization: float | None = None, overhead_gib: float | None = None
) -> Engine:
    engine = ENGINES.get(name.strip().lower())
    if engine is None:
        raise UnknownNameError("engine", name, ENGINES, hint=f"choose {', '.join(ENGINES)}")
    if gpu_memory_utilization is not None:
        if not 0.0 < gpu_memory_utilization <= 1.0:
            raise ValueRangeError(
                "gpu_memory_utilization", f"must be in (0, 1], got {gpu_memory_utilization}"
            )
        engine = replace(engine, gpu_memory_utilization=gpu_memory_utilization)
    if overhead_gib is not None:
        if not (math.isfinite(overhead_gib) and overhead_gib >= 0.0):
            raise ValueRangeError(
                "overhead_gib", f"must be a finite number >= 0, got {overhead_gib}"
            )
        engine = replace(engine, overhead_gib=overhead_gib)
    return engine
