"""vLLM V1's pool rules against the lines real vLLM start-ups printed (each quoted with its
source; the full rows, with the configuration behind them, are in tests/data/measurements.csv).

Here the pool in GiB is taken from the log's own "Available KV cache memory" line, so each test
checks one rule of core/vllm_pool.py (blocks, hybrid groups, a draft's layers in the pool, KV
heads under tensor parallel) apart from the memory budget. vLLM prints the pool rounded to
0.01 GiB, so a prediction may differ from the logged tokens by what 0.005 GiB holds."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from infersize.core.engines import get_engine
from infersize.core.fit import _pool_side
from infersize.core.memory import GIB, kv_layout, pool_layout
from infersize.core.vllm_pool import (
    BLOCK_TOKENS,
    Profile,
    activation_peak,
    capture_sizes,
    default_profile,
    pool_capacity,
)
from infersize.service.resolve import DeploymentRequest, resolve_deployment

SERVE_H100 = Profile(8192, 1024)


def _capacity(
    catalog,
    model_id,
    pool_gib,
    context,
    tp=1,
    draft_id=None,
    engine="vllm-0.15",
    profile=SERVE_H100,
):
    kv16 = catalog.kv_dtype("bf16")
    layout = kv_layout(catalog.model(model_id), kv16, tp)
    if draft_id is not None:
        layout = pool_layout(layout, kv_layout(catalog.model(draft_id), kv16, tp))
    return pool_capacity(pool_gib * GIB, layout, context, profile, get_engine(engine)), layout


def _rounding_tokens(layout, pool_gib):
    """Tokens that 0.005 GiB (half the log's last digit) holds, in whole blocks."""
    block = layout.bytes_per_token * BLOCK_TOKENS
    return (math.ceil(0.005 * GIB / block) + 1) * BLOCK_TOKENS


def test_dense_tp1_tokens_and_concurrency(catalog):
    """ilseokoh/vllm-gce README (vLLM 0.15.1, A100-40GB, Llama-3.1-8B-Instruct, max_model_len
    131072): 'Available KV cache memory: 19.28 GiB' / 'GPU KV cache size: 157,936 tokens' /
    'Maximum concurrency for 131,072 tokens per request: 1.20x'. 32 layers · 2 · 8 heads · 128
    · 2 B = 128 KiB a token; blocks of 16 tokens."""
    cap, layout = _capacity(catalog, "llama-3.1-8b", 19.28, 131072)
    assert layout.bytes_per_token == 131072
    assert abs(float(cap.tokens) - 157_936) <= _rounding_tokens(layout, 19.28)
    assert round(float(cap.concurrency), 2) == 1.20


def test_tp_splits_kv_heads_per_rank(catalog):
    """Seed-OSS-36B on 2x A100-80GB, TP2 (xuchu0726/ai-inference-service@781dc09ec277e52ff067d
    496ae642b874e31ad21:docs/week2/seed_oss_128k_context_boundary_review.md): 'Available KV
    cache memory 35.99 GiB' / 'GPU KV cache size 294,816 tokens' / 'Maximum concurrency for
    131,072 tokens/request 2.25x'. vLLM logs per rank: 8 KV heads / 2 ranks = 4 heads."""
    cap, layout = _capacity(catalog, "seed-oss-36b", 35.99, 131072, tp=2)
    assert layout.bytes_per_token == 64 * 2 * 4 * 128 * 2
    assert abs(float(cap.tokens) - 294_816) <= _rounding_tokens(layout, 35.99)
    assert round(float(cap.concurrency), 2) == 2.25


def test_draft_layers_share_the_pool(catalog):
    """vllm-project/vllm#19996 (v0.9.1, H100, Llama-3.1-8B-Instruct + EAGLE head
    yuhuili/EAGLE-LLaMA3.1-Instruct-8B): 'Available KV cache memory: 51.63 GiB' / 'GPU KV cache
    size: 410,128 tokens' / 'Maximum concurrency for 131,072 tokens per request: 3.13x'. The
    head's one layer draws from the same pool: 33 layers' pages a token, not 32."""
    cap, layout = _capacity(catalog, "llama-3.1-8b", 51.63, 131072, draft_id="eagle-llama3.1-8b")
    assert layout.bytes_per_token == 33 * 4096
    assert abs(float(cap.tokens) - 410_128) <= _rounding_tokens(layout, 51.63)
    assert round(float(cap.concurrency), 2) == 3.13
    alone, _ = _capacity(catalog, "llama-3.1-8b", 51.63, 131072)
    assert float(alone.tokens) > 420_000  # what the target alone would have logged


def test_hybrid_groups_log_tokens_as_full_attention_pages(catalog):
    """TaintsAndTokenizersInc/vllm_multimodal_rocm_examples example_logs.md (vLLM 0.11.0rc2,
    gemma-3-27b-it, max_model_len 4096, MNBT 8192): 'Available KV cache memory: 109.86 GiB' /
    'Add 8 padding layers, may waste at most 15.38% KV cache memory' / 'GPU KV cache size:
    205,696 tokens' / 'Maximum concurrency for 4,096 tokens per request: 50.05x'. 10 full and 52
    sliding layers: groups of 10 layers, 1 full and 6 sliding groups (8 padding layers = 60 - 52);
    the token line divides blocks by 7 groups, the concurrency credits the 1024-token windows."""
    cap, _ = _capacity(catalog, "gemma-3-27b", 109.86, 4096)
    assert round(float(cap.concurrency), 2) == 50.05
    assert float(cap.tokens) == pytest.approx(205_696, abs=7 * BLOCK_TOKENS * 3)


def test_from_vllm_021_the_token_line_credits_the_windows(catalog):
    """vLLM 0.21+ (kv_cache_utils.get_kv_cache_capacity) logs tokens as concurrency · context,
    so at a context well past the window a sliding-window model's token figure exceeds the
    full-attention-page count that earlier releases logged."""
    cap, _ = _capacity(catalog, "gemma-3-27b", 109.86, 131072, engine="vllm")
    assert float(cap.tokens) == math.floor(float(cap.concurrency) * 131072)
    early, _ = _capacity(catalog, "gemma-3-27b", 109.86, 131072)
    assert float(cap.tokens) > 3 * float(early.tokens)


def test_the_profiling_pass_peak_is_the_forward_pass_at_many_tokens(catalog):
    """llava-v1.6-mistral-7b on an 80 GB GPU (vLLM 0.10.2; 16384 tokens, 1024 sequences,
    vocabulary 32064; 6204-Adv-Topics-in-Systems/VLM_vLLM@4a8e349a1d28864122bbdfa47d00c5a7f0f671ab
    :vllm_legacy/sample_output.md): 'Actual usage is 14.08 GiB for weight, 1.97 GiB for peak
    activation, 0.07 GiB for non-torch memory': the forward pass over 16384 tokens sets the
    peak, not the sampler's 1024 rows of logits. The activation factor is fitted to other logs
    (a1, d1, e1: docs/calibration.md), which put this peak 39% high (2.74 GiB); on the 55 GiB
    pool that is the 1.4% the calibration table reports."""
    engine = get_engine("vllm-0.15")
    sampler_only = dataclasses.replace(engine, activation_factor=0.0)
    request = DeploymentRequest(target="llava-v1.6-mistral-7b", gpu="h100", target_quant="fp16")
    side = _pool_side(resolve_deployment(request, catalog, engine).numbers.target)
    profile = Profile(16384, 1024)
    peak = float(activation_peak(side, profile, engine)) / GIB
    sampler = float(activation_peak(side, profile, sampler_only)) / GIB
    assert peak == pytest.approx(1.97 * 1.39, rel=0.01)
    assert sampler < peak / 2


def test_draft_runs_at_the_target_tp_under_vllm(catalog):
    """SpeculativeConfig._verify_and_get_draft_tp (vllm/config/speculative.py, 0.33.0): an unset
    draft_tensor_parallel_size takes the target's, so a 1B draft at TP2 holds half its weights on
    each GPU, not all of them on rank 0 as under V0."""
    req = DeploymentRequest(
        target="llama-3.3-70b", gpu="h100", target_quant="fp8", draft="llama-3.2-1b", tp=2
    )
    v1 = resolve_deployment(req, catalog, get_engine("vllm"))
    plain = resolve_deployment(req, catalog, get_engine("plain"))
    assert v1.draft is not None and plain.draft is not None
    assert v1.draft.tp == 2 and plain.draft.tp == 1
    assert v1.draft.weights.total == pytest.approx(plain.draft.weights.total / 2, rel=0.01)


def test_default_profile_follows_the_gpu_tier():
    """EngineArgs.get_batch_defaults (0.33.0): 16384/1024 from 160 GiB, 8192/1024 from 70 GiB
    except A100s, else 2048/256; the log lines 'Chunked prefill is enabled with
    max_num_batched_tokens=8192' (H100, https://github.com/vllm-project/vllm/issues/21524)."""
    vllm = get_engine("vllm")
    assert default_profile(vllm, 79.19 * GIB, "NVIDIA H100 SXM") == Profile(8192, 1024)
    assert default_profile(vllm, 44.42 * GIB, "NVIDIA L40S") == Profile(2048, 256)
    assert default_profile(vllm, 79.15 * GIB, "NVIDIA A100 80GB") == Profile(2048, 256)
    assert default_profile(vllm, 139.8 * GIB, "NVIDIA H200") == Profile(8192, 1024)
    assert default_profile(vllm, 178.0 * GIB, "NVIDIA B200") == Profile(16384, 1024)


def test_capture_sizes_follow_vllm_rule():
    """VllmConfig._set_cudagraph_sizes: 1, 2, 4, multiples of 8 below 256, of 16 from 256, up to
    min(2 · max_num_seqs · (1 + K), 512, max_num_batched_tokens)."""
    sizes = capture_sizes(
        np.array([256, 8, 1024, 4]), np.array([2048, 8192, 8192, 8192]), np.array([1, 1, 1, 5])
    )
    # 512: 3 + 31 + 17; 16: 1, 2, 4, 8, 16; 40: 1, 2, 4, 8, ..., 40
    assert sizes.tolist() == [51, 5, 51, 8]
