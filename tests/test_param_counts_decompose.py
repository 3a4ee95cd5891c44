"""Catalog entries of 2025-26 checkpoints (gpt-oss, DeepSeek-R1/V3.1/V3.2, GLM-4.6): each count is
tested against its published total in tests/test_params.py; here, how those totals decompose
into the parts the catalog counts, each part's size worked out in the test."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from infersize.catalog.hfconfig import model_from_config
from infersize.core.memory import kv_layout
from infersize.core.params import checkpoint_params, param_counts

CONFIGS = Path(__file__).parent / "data" / "configs"
# one lightning indexer (deepseek-ai/DeepSeek-V3.2-Exp inference/model.py `Indexer`): wq_b from
# the 1,536-wide query latent to 64 heads of 128, wk 7,168 -> 128, weights_proj 7,168 -> 64,
# k_norm a LayerNorm of 128 with its bias
INDEXER = 1536 * 64 * 128 + 7168 * 128 + 7168 * 64 + 2 * 128


def test_one_indexer_holds_13_959_424_parameters():
    assert INDEXER == 13_959_424


def test_deepseek_v3_2_is_r1_plus_an_indexer_in_each_of_its_62_layers(catalog):
    """Hub totals (the entries' published_params_source): DeepSeek-R1 684,489,845,504 (main
    model and MTP layer, no FP8 scales), DeepSeek-V3.2 685,355,329,792, 62 indexers more."""
    r1 = checkpoint_params(catalog.model("deepseek-r1")) + checkpoint_params(
        catalog.model("deepseek-v3-mtp")
    )
    v32 = checkpoint_params(catalog.model("deepseek-v3.2")) + checkpoint_params(
        catalog.model("deepseek-v3.2-mtp")
    )
    assert r1 == 684_489_845_504
    assert v32 == 685_355_329_792 == r1 + 62 * INDEXER


def test_deepseek_v3_2_caches_the_indexer_key_beside_the_latent(catalog):
    """Per layer and token: the 512 + 64 latent at the KV dtype, and the indexer's key as 128
    fp8 values and one fp32 scale (132 bytes) whatever the KV dtype."""
    bf16, fp8 = catalog.kv_dtype("bf16"), catalog.kv_dtype("fp8")
    model = catalog.model("deepseek-v3.2")
    assert kv_layout(model, bf16).bytes_per_token == 61 * (576 * 2 + 132)
    assert kv_layout(model, fp8).bytes_per_token == 61 * (576 + 132)
    v3 = catalog.model("deepseek-v3")
    assert kv_layout(v3, bf16).bytes_per_token == 61 * 576 * 2


def test_a_config_json_with_an_indexer_counts_as_the_catalog_entry(catalog):
    """The V3.2 fields of config.json (index_n_heads, index_head_dim) read by the config reader
    give the catalog's count."""
    v32 = catalog.model("deepseek-v3.2")
    config = {
        "architectures": ["DeepseekV32ForCausalLM"],
        "model_type": "deepseek_v32",
        "hidden_size": 7168,
        "intermediate_size": 18432,
        "num_hidden_layers": 61,
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "vocab_size": 129280,
        "tie_word_embeddings": False,
        "n_routed_experts": 256,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 2048,
        "n_shared_experts": 1,
        "first_k_dense_replace": 3,
        "q_lora_rank": 1536,
        "kv_lora_rank": 512,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "index_n_heads": 64,
        "index_head_dim": 128,
        "index_topk": 2048,
        "max_position_embeddings": 163840,
        "topk_method": "noaux_tc",
    }
    model = model_from_config(config, "v32", "deepseek-ai/DeepSeek-V3.2", "config.json")
    assert (model.index_n_heads, model.index_head_dim) == (64, 128)
    assert param_counts(model).total == param_counts(v32).total == 671_877_944_064


def test_an_indexer_without_latent_attention_is_refused(catalog):
    with pytest.raises(ValueError, match="index_\\* need all"):
        dataclasses.replace(catalog.model("deepseek-v3.2"), q_lora_rank=None)
    with pytest.raises(ValueError, match="index_\\* need all"):
        dataclasses.replace(catalog.model("deepseek-v3"), index_n_heads=64)


def test_glm_4_6_is_glm_4_5_without_the_mtp_layers_own_embedding_and_head(catalog):
    """Hub totals 358,337,791,296 (GLM-4.5) and 356,785,898,816 (GLM-4.6) differ by two
    151,552 x 5,120 matrices; both main models are 352,797,829,024."""
    glm45, glm46 = catalog.model("glm-4.5"), catalog.model("glm-4.6")
    assert param_counts(glm45).total - param_counts(glm46).total == 2 * 151_552 * 5_120
    main = param_counts(glm46).total - checkpoint_params(catalog.model("glm-4.6-mtp"))
    assert main == param_counts(glm45).total - checkpoint_params(catalog.model("glm-4.5-mtp"))
    assert main == 352_797_829_024


@pytest.mark.parametrize("name", ["gpt-oss-20b", "gpt-oss-120b"])
def test_gpt_oss_entries_are_their_config_json(catalog, name):
    """The catalog entry and the verbatim config.json (tests/data/configs) give the same count,
    the same alternating sliding windows and the same KV layout."""
    fixture = json.loads((CONFIGS / f"{name}.json").read_text())
    from_config = model_from_config(fixture["config"], name, name, name)
    entry = catalog.model(name)
    assert param_counts(entry) == param_counts(from_config)
    assert (entry.sliding_window, entry.sliding_window_layers) == (
        128,
        entry.num_hidden_layers // 2,
    )
    bf16 = catalog.kv_dtype("bf16")
    assert kv_layout(entry, bf16) == kv_layout(from_config, bf16)
