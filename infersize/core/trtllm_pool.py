"""TensorRT-LLM's KV cache (PyTorch backend): how many tokens it allocates, and its defaults.

Rules read from TensorRT-LLM's source (NVIDIA/TensorRT-LLM@0004396720054fd8e205cbf616f21f0b57c6b412:
tensorrt_llm/_torch/pyexecutor/_util.py, class KvCacheCreator): the executor first runs a real
prefill of max_num_tokens tokens (after CUDA-graph warm-up) and measures the peak of torch's
allocations plus what is used outside torch (CUDA context, NCCL, CUDA graphs); then

  KV bytes = (total − peak + temporary KV) · free_gpu_memory_fraction     (_cal_max_memory)
  tokens   = KV bytes // (target's + draft's KV bytes per token), rounded up to whole blocks of
             tokens_per_block (32), as the C++ KVCacheManager logs
             "[MemUsageChange] Allocated X GiB for max tokens in paged KV cache (N)"

The fraction applies to what is left after the measured peak, not to the device (vLLM and
SGLang apply theirs to the device). Here the peak without its temporary KV cache is the weights
of both models, the prefill's activations (engine.activation_factor · max_num_tokens · the
model's activation bytes per token, the larger of target and draft) and engine.overhead_gib
(more under tensor parallel). A separate draft (Eagle3 two-model, draft-target) keeps its own
pool of the same token count (https://github.com/NVIDIA/TensorRT-LLM/pull/3497 added its bytes
per token to the division); one-model EAGLE-3 and MTP add their layers to the target's pool,
the same sum.

Defaults (tensorrt_llm/builder.py BuildConfig @008b2b8d23af95e4e19fa6f354f9c5f6349b2bfc, which
trtllm-serve takes its defaults from, tensorrt_llm/commands/serve.py
@00209af149e7774406881a37283dce303571eb11): free_gpu_memory_fraction 0.9, max_num_tokens 8192,
max_batch_size 2048.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from infersize.core.arrays import FloatArray, floats
from infersize.core.engines import Engine

DEFAULT_MAX_NUM_TOKENS = 8192
DEFAULT_MAX_BATCH_SIZE = 2048


def limits(engine: Engine) -> tuple[int, int]:
    """(max_num_tokens, max_batch_size): the scheduler's token budget and sequence limit."""
    return (
        engine.max_num_tokens or DEFAULT_MAX_NUM_TOKENS,
        engine.max_batch_size or DEFAULT_MAX_BATCH_SIZE,
    )


def kv_bytes(engine: Engine, memory: ArrayLike, peak_without_kv: ArrayLike) -> FloatArray:
    """(total − peak) · free_gpu_memory_fraction, never below 0."""
    left = floats(memory) - floats(peak_without_kv)
    return floats(np.maximum(left, 0.0) * engine.free_gpu_memory_fraction)


def logged_tokens(engine: Engine, pool_bytes: ArrayLike, bytes_per_token: ArrayLike) -> FloatArray:
    """The token count the log prints: ⌊KV bytes / bytes per token⌋ in whole blocks, rounded
    up (86,711 tokens are logged as 86,720)."""
    tokens = np.floor(floats(pool_bytes) / np.maximum(floats(bytes_per_token), 1e-9))
    block = float(engine.tokens_per_block)
    return floats(np.ceil(tokens / block) * block)
