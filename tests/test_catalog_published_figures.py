"""Catalog entries against the figures their sources publish: Qwen3.5 (hybrid Gated DeltaNet,
vision tower, MTP module), GLM-4.7/GLM-5, Kimi-K2-Thinking/K2.5 and MiniMax-M2/M2.5 counted to
their Hub totals and the parts those totals split into; their MTP modules and the EAGLE-3 heads
resolving against their targets in `spec`; B300, GB200 and MI355X sized as their datasheets and
runtimes say, MI355X's kernels looked up under its own architecture (cdna4).

Every expected number is written here with where it comes from (the entries' sources in
configs/models.yaml and configs/gpus.yaml)."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from infersize.cli import app
from infersize.core.memory import kv_layout
from infersize.core.params import checkpoint_params, param_counts

# Hub totals (HUB_Q35, HUB_MOE_2026: the Hugging Face API's safetensors.total)
HUB_TOTALS = {
    "qwen3.5-0.8b": 873_438_784,
    "qwen3.5-4b": 4_659_865_088,
    "qwen3.5-9b": 9_653_104_368,
    "qwen3.5-35b-a3b": 35_951_822_704,
    "qwen3.5-122b-a10b": 125_086_490_096 + 6_912,  # BF16 + F32 parameters
    "qwen3.5-397b-a17b": 403_397_928_944,
    "glm-4.7": 358_337_791_296,
    "glm-5": 753_864_139_008,
    "minimax-m2": 228_689_764_864,
}


@pytest.mark.parametrize("name", sorted(HUB_TOTALS))
def test_count_equals_the_hub_total(catalog, name):
    model = catalog.model(name)
    assert param_counts(model).total == HUB_TOTALS[name] == model.published_params


@pytest.mark.parametrize(
    ("name", "language", "vision", "mtp"),
    [
        # Qwen/Qwen3.5-4B at revision 851bf6e8, counted from its safetensors headers
        ("qwen3.5-4b", 4_205_751_296, 333_514_240, 120_599_552),
        # Qwen/Qwen3.5-397B-A17B at revision 84726181, its header audit
        ("qwen3.5-397b-a17b", 396_346_350_336, 456_010_480, 6_595_568_128),
    ],
)
def test_qwen3_5_counts_split_as_the_checkpoint_headers(catalog, name, language, vision, mtp):
    """The language model, the vision tower (extra_params) and the mtp.* module each equal
    their part of the checkpoint; the MTP head entry is that module."""
    model = catalog.model(name)
    counts = param_counts(model)
    assert counts.total - counts.mtp - model.extra_params == language
    assert model.extra_params == vision
    assert counts.mtp == mtp == checkpoint_params(catalog.model(f"{name}-mtp"))


# keras-hub@48b75967 qwen3_5_presets.py 'params': the decoder and its vision tower, no MTP module
KERAS = {
    "qwen3.5-0.8b": 852_985_920,
    "qwen3.5-4b": 4_539_265_536,
    "qwen3.5-9b": 9_409_813_744,
    "qwen3.5-27b": 27_356_728_560,
}


@pytest.mark.parametrize("name", sorted(KERAS))
def test_qwen3_5_keras_counts_are_the_total_without_the_mtp_module(catalog, name):
    counts = param_counts(catalog.model(name))
    assert counts.total - counts.mtp == KERAS[name]


def test_qwen3_5_27b_is_within_its_rounded_hub_figure(catalog):
    """Only 27.78B is published for Qwen/Qwen3.5-27B (rounded to 0.01B: within 0.005B), so
    the entry has no published_params; Qwen3.6-27B and Qwen3.8-27B, the same shapes, publish
    27,781,427,952 exactly, and so does the count."""
    model = catalog.model("qwen3.5-27b")
    total = param_counts(model).total
    assert abs(total - 27.78e9) <= 0.005e9
    assert total == 27_781_427_952
    assert model.published_params is None


def test_qwen3_5_caches_every_fourth_layer_and_holds_a_state_in_the_others(catalog):
    """397B-A17B: 15 gated full-attention layers of 2 KV heads of 256 cache each token; the 45
    Gated DeltaNet layers hold a conv window of (2 x 16 x 128 + 64 x 128) x 3 and 64 value
    heads' 128 x 128 matrix per sequence, at 16 bit."""
    layout = kv_layout(catalog.model("qwen3.5-397b-a17b"), catalog.kv_dtype("bf16"), 1)
    assert layout.full_bytes_per_token == 15 * 2 * 2 * 256 * 2
    assert layout.state_bytes_per_sequence == 45 * ((2 * 2048 + 8192) * 3 + 64 * 128 * 128) * 2


def test_glm_4_7_keeps_its_mtp_layers_own_embedding_and_head_copies(catalog):
    """GLM-4.7's Hub total is GLM-4.5's to the parameter (main model 352,797,829,024 and an MTP
    layer stored with its own 151,552 x 5,120 embedding and head), GLM-4.6's plus both copies."""
    glm47, glm46 = (param_counts(catalog.model(n)).total for n in ("glm-4.7", "glm-4.6"))
    assert glm47 == param_counts(catalog.model("glm-4.5")).total
    assert glm47 - glm46 == 2 * 151_552 * 5_120
    mtp = catalog.model("glm-4.7-mtp")
    assert glm47 - checkpoint_params(mtp) == 352_797_829_024
    assert param_counts(mtp).total == 3_988_069_792  # what vLLM keeps: the copies are shared


def test_glm_5_is_a_deepseek_v3_2_structure_with_one_mtp_layer(catalog):
    """GLM-5's lightning indexer: wq_b from the 2,048 query latent to 32 heads of 128, wk
    6,144 -> 128, weights_proj 6,144 -> 32, a LayerNorm of 128 with bias; in each of 78 layers.
    Its MTP layer shares embedding and head in the files: main 743,911,218,432 + 9,952,920,576."""
    indexer = 2048 * 32 * 128 + 6144 * 128 + 6144 * 32 + 2 * 128
    glm5 = catalog.model("glm-5")
    no_indexer = param_counts(dataclasses.replace(glm5, index_n_heads=None, index_head_dim=None))
    assert param_counts(glm5).total - no_indexer.total == 79 * indexer  # 78 layers + MTP layer
    mtp = catalog.model("glm-5-mtp")
    assert checkpoint_params(mtp) == param_counts(mtp).total == 9_952_920_576
    assert param_counts(glm5).total - param_counts(mtp).total == 743_911_218_432
    assert kv_layout(glm5, catalog.kv_dtype("bf16")).bytes_per_token == 78 * (576 * 2 + 132)


def test_minimax_m2_5_hub_total_adds_fp8_block_scales_to_m2s_weights(catalog):
    """M2.5 has M2's weights; its Hub total is 13,880,064 more: one scale per 128 x 128 block of
    q (3072 -> 6144), k and v (-> 1024 each), o (6144 -> 3072) and 256 experts' three 3072 x
    1536 matrices, in 62 layers. M2's per-layer q/k norms (48 x 128 + 8 x 128) are extra_params."""
    blocks = 48 * 24 + 2 * (8 * 24) + 24 * 48 + 256 * 3 * (12 * 24)
    m2, m25 = (catalog.model(n) for n in ("minimax-m2", "minimax-m2.5"))
    assert param_counts(m25) == param_counts(m2)
    assert 228_703_644_928 - param_counts(m25).total == 62 * blocks == 13_880_064
    assert m2.extra_params == 62 * (48 * 128 + 8 * 128)
    assert m25.published_params is None


@pytest.mark.parametrize("name", ["kimi-k2-thinking", "kimi-k2.5"])
def test_kimi_k2_thinking_and_k2_5_count_their_text_model(catalog, name):
    """Kimi-K2's architecture: 1,026,408,232,448 from the config. Kimi-K2-Thinking's Hub figure,
    1,026,408,240,256, is 61 x 128 more, which no tensor of the architecture explains (as
    Kimi-K2-Instruct's 61 x 56), so neither entry claims a published total."""
    model = catalog.model(name)
    assert param_counts(model).total == param_counts(catalog.model("kimi-k2")).total
    assert 1_026_408_240_256 - param_counts(model).total == 61 * 128
    assert model.published_params is None and model.max_position_embeddings == 262_144


FP8_TP4 = ["--target-quant", "fp8", "--tp", "4"]
# (target, head, GPU, extra spec arguments): each head resolves against its target and the pair
# fits the GPU named
HEADS = [
    ("qwen3-8b", "eagle3-qwen3-8b", "h100", []),
    ("qwen3-30b-a3b", "eagle3-qwen3-30b-a3b", "h100", []),
    ("qwen3-32b", "eagle3-qwen3-32b", "h100", []),
    ("qwen3-235b-a22b", "eagle3-qwen3-235b-a22b", "h200", FP8_TP4),
    ("gpt-oss-20b", "eagle3-gpt-oss-20b", "h100", []),
    ("gpt-oss-120b", "eagle3-gpt-oss-120b", "h200", []),
    ("llama-4-scout", "eagle3-llama4-scout", "b300", []),
    ("qwen3.5-0.8b", "qwen3.5-0.8b-mtp", "h100", []),
    ("qwen3.5-4b", "qwen3.5-4b-mtp", "h100", []),
    ("qwen3.5-9b", "qwen3.5-9b-mtp", "h100", []),
    ("qwen3.5-27b", "qwen3.5-27b-mtp", "h100", []),
    ("qwen3.5-35b-a3b", "qwen3.5-35b-a3b-mtp", "h100", []),
    ("qwen3.5-122b-a10b", "qwen3.5-122b-a10b-mtp", "b300", []),
    ("qwen3.5-397b-a17b", "qwen3.5-397b-a17b-mtp", "mi355x", FP8_TP4),
    ("glm-4.7", "glm-4.7-mtp", "h200", FP8_TP4),
    ("glm-5", "glm-5-mtp", "gb200", ["--target-quant", "fp8", "--tp", "8"]),
]


def spec_json(runner, *args: str) -> dict:
    result = runner.invoke(app, ["spec", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize(("target", "head", "gpu", "extra"), HEADS, ids=[h[1] for h in HEADS])
def test_method_picks_the_head_and_spec_gives_a_finite_speedup(
    catalog, runner, target, head, gpu, extra
):
    method = catalog.model(head).speculator
    assert method in ("eagle3", "mtp")
    picked = spec_json(runner, "--target", target, "--method", method, "--gpu", gpu, *extra)
    given = spec_json(runner, "--target", target, "--draft", head, "--gpu", gpu, *extra)
    for out in (picked, given):
        assert out["draft"]["model"] == head
        assert out["verdict"] == "safe" and out["fits"] is True
        assert math.isfinite(out["speedup"]) and out["speedup"] > 0
    assert picked["speedup"] == given["speedup"]


def test_a_head_does_not_draft_for_another_target(runner):
    """A Qwen3 head drafts over Qwen3's 151,936-token vocabulary: Qwen3.5-9B, as wide (4,096),
    has 248,320 tokens."""
    result = runner.invoke(
        app, ["spec", "--target", "qwen3.5-9b", "--draft", "eagle3-qwen3-8b", "--gpu", "h100"]
    )
    assert result.exit_code == 2
    assert "speculator head eagle3-qwen3-8b (hidden 4096, vocabulary 151936) does not fit" in (
        result.output
    )


# (memory bytes as the runtime reports them, datasheet bandwidth GB/s, marketed GB)
GPUS = {
    # vLLM/PyTorch total 267.69 GiB -> round(267.69 x 1024) MiB; HGX B300: 8 TB/s per GPU
    "b300": (274_115 * 2**20, 8000, 288),
    # PyTorch total 184.31 GiB -> 188,733 MiB; GB200 NVL72: 576 TB/s over 72 GPUs
    "gb200": (188_733 * 2**20, 8000, 186),
    # torch total_memory and rocm-smi: 309,220,868,096 B; AMD: 8 TB/s
    "mi355x": (309_220_868_096, 8000, 288),
}


@pytest.mark.parametrize("gpu_id", sorted(GPUS))
def test_gpu_memory_and_bandwidth_are_the_sources(catalog, gpu_id):
    memory, bandwidth, marketed = GPUS[gpu_id]
    gpu = catalog.gpu(gpu_id)
    assert (gpu.memory_bytes, gpu.bandwidth_gb_per_s, gpu.marketed_memory_gb) == (
        memory,
        bandwidth,
        marketed,
    )
    assert gpu.memory_bytes < marketed * 2**30


def test_b300_leaves_out_the_rates_its_sources_disagree_on(catalog):
    """INT8 (4,500 vs 150 TOPS) and dense FP4 (12.6-15 PF) are not given: an FP4 step is priced
    at the FP8 peak, an INT8 one at the 16-bit peak, never at a guess."""
    b300 = catalog.gpu("b300")
    assert b300.int8_tops is None and b300.fp4_tflops is None
    assert b300.peak_flops("fp4") == b300.peak_flops("fp8") == 4500e12
    assert b300.peak_flops("int8") == 2250e12


@pytest.mark.parametrize(
    ("precision", "family", "level"),
    [
        ("bf16", "vllm", "native"),  # gfx950 -> CC 9.5 passes the bf16 check
        ("fp8", "vllm", "native"),  # OCP e4m3fn on gfx950
        ("mxfp4", "vllm", "native"),  # supports_mx on gfx95x
        ("nvfp4", "vllm", "unsupported"),  # emulation only on ROCm
        ("int4", "vllm", "weight-only"),
        ("q4_k_m", "llama.cpp", "weight-only"),
        ("fp8", "llama.cpp", "unsupported"),  # llama.cpp serves GGUF types
    ],
)
def test_mi355x_resolves_its_kernel_support_as_cdna4(catalog, precision, family, level):
    mi355x = catalog.gpu("mi355x")
    assert mi355x.architecture == "cdna4"
    support = catalog.support(precision, mi355x, family)
    assert support.level == level
    assert "no support rule" not in support.reason and "no " + family not in support.reason


def test_mi355x_runs_fp8_where_mi300x_needs_fnuz_and_mxfp4_natively(catalog):
    mi355x, mi300x = catalog.gpu("mi355x"), catalog.gpu("mi300x")
    assert catalog.support("mxfp4", mi300x, "vllm").level == "weight-only"
    assert catalog.support("mxfp4", mi355x, "vllm").level == "native"
    assert "e4m3fn" in catalog.support("fp8", mi355x, "vllm").reason
