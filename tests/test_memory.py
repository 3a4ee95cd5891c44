"""Memory model: exact bytes where the format is exact, published figures where it is not."""

from __future__ import annotations

import numpy as np
import pytest

from infersize.core import memory as mem
from infersize.core.deployment import deployment_numbers, prepare_side
from infersize.core.fit import deployment_memory
from infersize.core.params import param_counts
from infersize.errors import InfersizeError


def weights(catalog, model, quant, tp=1):
    return mem.weight_bytes(param_counts(catalog.model(model)), catalog.weight_format(quant), tp)


def test_qwen2_5_7b_fp16_weights_are_the_safetensors_total(catalog):
    # Qwen2.5-7B(-Instruct) model.safetensors.index.json total_size 15,231,233,024 (IDX_Q25_7B)
    assert weights(catalog, "qwen2.5-7b", "fp16").total == 15_231_233_024


def test_llama_3_1_8b_bf16_weights_are_the_safetensors_total(catalog):
    # meta-llama/Llama-3.1-8B index total_size 16,060,522,496 (IDX_L31_8B)
    assert weights(catalog, "llama-3.1-8b", "bf16").total == 16_060_522_496


def test_llama_3_1_8b_fp16_kv_is_131072_bytes_per_token(catalog):
    # measurements.md: 2 · 8 kv heads · 128 · 32 layers · 2 B = 131,072 B
    layout = mem.kv_layout(catalog.model("llama-3.1-8b"), catalog.kv_dtype("fp16"))
    assert layout.bytes_per_token == 131_072
    assert mem.kv_cache_bytes(layout, 4096, 3) == 131_072 * 4096 * 3


def test_int4_g128_matches_vllm_awq_70b(catalog):
    # measurements.md: vLLM measured a 70.6B AWQ model at 37.06 GiB of weights
    assert weights(catalog, "llama-3.1-70b", "int4").total / mem.GIB == pytest.approx(
        37.06, abs=0.1
    )


def test_gguf_q4_k_m_file_average_is_about_4_9_bpw(catalog):
    # measurements.md: measured Q4_K_M is about 4.8 bpw; Llama-3.1-8B Q4_K_M files are 4.92 GB
    w = weights(catalog, "llama-3.1-8b", "q4_k_m")
    bpw = w.total * 8 / param_counts(catalog.model("llama-3.1-8b")).total
    assert 4.8 <= bpw <= 5.0


def test_sliding_window_layers_are_capped(catalog):
    gemma = catalog.model("gemma-2-9b")  # 42 layers, half of them with a 4096-token window
    layout = mem.kv_layout(gemma, catalog.kv_dtype("bf16"))
    per_layer = 2 * 8 * 256 * 2
    assert layout.full_bytes_per_token == layout.window_bytes_per_token == 21 * per_layer
    long = mem.kv_cache_bytes(layout, 8192, 1)
    assert long == 21 * per_layer * 8192 + 21 * per_layer * 4096


def test_tensor_parallel_splits_weights_and_kv_heads(catalog):
    full = weights(catalog, "llama-3.1-70b", "bf16")
    half = weights(catalog, "llama-3.1-70b", "bf16", tp=2)
    assert half.linear * 2 == pytest.approx(full.linear, abs=2)
    assert half.small == full.small  # norms replicate
    model, kv = catalog.model("llama-3.1-70b"), catalog.kv_dtype("fp16")
    assert (
        mem.kv_layout(model, kv, 2).bytes_per_token * 2 == mem.kv_layout(model, kv).bytes_per_token
    )
    # 8 KV heads over 16 ranks: each rank still holds one head (replicated)
    assert (
        mem.kv_layout(model, kv, 16).bytes_per_token == mem.kv_layout(model, kv, 8).bytes_per_token
    )


def test_tp_must_divide_attention_heads(catalog):
    with pytest.raises(InfersizeError, match="does not divide its 28 attention heads"):
        mem.check_tp(catalog.model("qwen2.5-7b"), 3)


def test_vllm_kv_pool_for_llama_3_8b_on_a100(catalog, vllm):
    # measurements.md, vLLM real log: Llama-3-8B bf16, A100-80GB, U 0.90: KV pool 55.11 GiB
    a100 = catalog.gpu("a100")
    side = prepare_side(
        catalog.model("llama-3.1-8b"), catalog.weight_format("bf16"), catalog.kv_dtype("bf16"), a100
    )
    memory = deployment_memory(deployment_numbers(side, None, a100, engine=vllm), vllm, 8192, 1, 0)
    assert memory.pool is not None
    assert memory.pool.kv_pool / mem.GIB == pytest.approx(55.11, rel=0.03)
    # the pool does not depend on max_model_len; tokens = pool / 131,072 B, in blocks of 16
    tokens = memory.pool.kv_pool_tokens
    assert tokens == (memory.pool.kv_pool // (131_072 * 16)) * 16


def test_verdict_thresholds():
    assert list(mem.verdict([0.5, 0.9, 0.95, 1.0, 1.01])) == [
        "safe",
        "safe",
        "tight",
        "tight",
        "OOM",
    ]


def test_workspace_grows_with_k_and_batch(catalog):
    model = catalog.model("qwen2.5-7b")
    act = mem.activation_bytes_per_token(model)
    ws = mem.workspace_bytes(model.vocab_size, act, np.array([1, 8]), 5, np.array([5, 40]))
    assert ws[1] > ws[0]
    # fp32 logits of 8 · 5 positions over a 152,064 vocabulary dominate at batch 8
    assert ws[1] >= 8 * 5 * 152_064 * 4


def test_draft_none_holds_only_the_target(catalog, plain):
    gpu = catalog.gpu("h100")
    target = prepare_side(
        catalog.model("qwen2.5-7b"), catalog.weight_format("fp16"), catalog.kv_dtype("fp16"), gpu
    )
    alone = deployment_memory(deployment_numbers(target, None, gpu), plain, 4096, 1, 4)
    assert alone.draft_kv == 0 and alone.draft_workspace == 0
    assert (
        alone.target_kv
        == 4096 * mem.kv_layout(target.model, catalog.kv_dtype("fp16")).bytes_per_token
    )


def test_mla_cache_holds_one_latent_per_layer(catalog):
    # DeepSeek-V3: kv_lora_rank 512 + qk_rope_head_dim 64 = 576 values per layer and token,
    # 61 layers, bf16: 70,272 bytes per token (DeepSeek-V2 paper §2.1.2), the same on every TP rank
    v3, kv = catalog.model("deepseek-v3"), catalog.kv_dtype("bf16")
    assert mem.kv_layout(v3, kv).bytes_per_token == 61 * 576 * 2
    assert mem.kv_layout(v3, kv, tp=8).bytes_per_token == 61 * 576 * 2


def test_gemma3_sliding_layers(catalog):
    # Gemma-3 27B: 5 local layers (1024-token window) to 1 global; 52 of 62 layers slide
    gemma = catalog.model("gemma-3-27b")
    layout = mem.kv_layout(gemma, catalog.kv_dtype("bf16"))
    per_layer = 2 * 16 * 128 * 2
    assert layout.window_bytes_per_token == 52 * per_layer
    assert layout.full_bytes_per_token == 10 * per_layer
    assert layout.window_tokens == 1024
