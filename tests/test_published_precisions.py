"""Catalog precisions as published: every catalog entry whose published config.json carries a
quantization_config is sized in that format by `--target-quant auto`. Each case writes a tiny
checkpoint folder with the entry's quantization_config (copied from its source below) and reads
it through the same path a local folder takes, then checks the catalog's checkpoint_dtype."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infersize.catalog.checkpoint import load_folder

# DeepSeek's FP8 release: "quantization_config" of deepseek-ai/DeepSeek-V3's config.json, as
# deepseek-ai/DeepSeek-V3@0b39205aed0d4b1f9a2798e8551e4059c8f94b0c:README_WEIGHTS.md ("FP8
# Weight Documentation") lists it: e4m3 weights with one scale per 128x128 block.
DEEPSEEK_FP8 = {
    "activation_scheme": "dynamic",
    "fmt": "e4m3",
    "quant_method": "fp8",
    "weight_block_size": [128, 128],
}
# V3.1 and V3.2 add the scales' own format (UE8M0), https://huggingface.co/deepseek-ai/
# DeepSeek-V3.1/blob/main/config.json and .../DeepSeek-V3.2/blob/main/config.json
DEEPSEEK_FP8_UE8M0 = {**DEEPSEEK_FP8, "scale_fmt": "ue8m0"}
# MiniMax-M2's and M2.5's FP8 release: the quantization_config of
# https://huggingface.co/MiniMaxAI/MiniMax-M2/blob/main/config.json as public copies print it
MINIMAX_FP8 = {
    "activation_scheme": "dynamic",
    "fmt": "float8_e4m3fn",
    "quant_method": "fp8",
    "weight_block_size": [128, 128],
    "modules_to_not_convert": ["gate", "e_score_correction_bias", "lm_head"],
}
# Moonshot's INT4 release of Kimi-K2-Thinking and Kimi-K2.5 (text_config): compressed-tensors,
# 4-bit symmetric groups of 32 on the routed experts, as ai-dynamo/aiconfigurator@202f06a3:
# src/aiconfigurator/model_configs/nvidia--Kimi-K2.5-NVFP4_config.json copies it
KIMI_INT4 = {
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {
                "group_size": 32,
                "num_bits": 4,
                "strategy": "group",
                "symmetric": True,
                "type": "int",
                "dynamic": False,
            },
        }
    },
    "format": "pack-quantized",
    "ignore": [
        "lm_head",
        "re:.*self_attn.*",
        "re:.*shared_experts.*",
        "re:.*mlp\\.(gate|up|gate_up|down)_proj.*",
    ],
    "quant_method": "compressed-tensors",
    "quantization_status": "compressed",
}
DATA = Path(__file__).parent / "data" / "configs"


def _verbatim(name: str) -> dict:
    return json.loads((DATA / name).read_text())["config"]["quantization_config"]


# catalog id -> the quantization_config its published checkpoint carries (an MTP module is a
# layer of its target's checkpoint and shares its config.json)
PUBLISHED = {
    "deepseek-v3": DEEPSEEK_FP8,
    "deepseek-v3-mtp": DEEPSEEK_FP8,
    "deepseek-r1": DEEPSEEK_FP8,  # https://huggingface.co/deepseek-ai/DeepSeek-R1 config.json
    "deepseek-v3.1": DEEPSEEK_FP8_UE8M0,
    "deepseek-v3.2": DEEPSEEK_FP8_UE8M0,
    "deepseek-v3.2-mtp": DEEPSEEK_FP8_UE8M0,
    "kimi-k2": _verbatim("kimi-k2-instruct.json"),  # verbatim config.json copies
    "gpt-oss-20b": _verbatim("gpt-oss-20b.json"),
    "gpt-oss-120b": _verbatim("gpt-oss-120b.json"),
    "minimax-m2": MINIMAX_FP8,
    "minimax-m2.5": MINIMAX_FP8,
    "kimi-k2-thinking": KIMI_INT4,
    "kimi-k2.5": KIMI_INT4,
}
TINY = {
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 96,
    "max_position_embeddings": 512,
    "torch_dtype": "bfloat16",
}


@pytest.mark.parametrize("model_id", sorted(PUBLISHED))
def test_catalog_precision_is_the_published_quantization(model_id, catalog, tmp_path):
    folder = tmp_path / model_id
    folder.mkdir()
    config = {**TINY, "quantization_config": PUBLISHED[model_id]}
    (folder / "config.json").write_text(json.dumps(config))
    published = load_folder(folder).precision
    assert published is not None
    assert catalog.model(model_id).checkpoint_dtype == published


def test_every_quantized_catalog_entry_names_its_quantization_config(catalog):
    """An entry published quantized (neither 16- nor 32-bit) has its source above."""
    quantized = {
        m.id
        for m in catalog.models.records.values()
        if (m.checkpoint_dtype or "bf16") not in ("bf16", "fp16", "fp32")
    }
    assert quantized == set(PUBLISHED)


def test_deepseek_block_scales_are_in_the_fp8_estimate(catalog):
    """One fp32 scale per 128x128 block is 32 / 16,384 = 0.002 bits per weight: inside the fp8
    format's stated < 0.1 % for scales, so the block scales need no format of their own."""
    fmt = catalog.weight_format("fp8")
    assert fmt.linear_bits_per_weight == 8
    assert 32 / (128 * 128) / 8 < 0.001


def test_deepseek_v3_mtp_fits_8xh200_by_default(runner):
    """DeepSeek-V3's standard deployment (8 x H200, vLLM) fits with the checkpoint as published."""
    from infersize.cli import app

    args = [
        "spec",
        "--target",
        "deepseek-v3",
        "--method",
        "mtp",
        "--gpu",
        "h200",
        "--tp",
        "8",
        "--engine",
        "vllm",
        "--json",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["target"]["quant"] == "fp8"
    assert out["draft"]["quant"] == "fp8"
    assert out["fits"] is True
