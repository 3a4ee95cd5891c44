"""Checkpoints users bring today: their config.json files (tests/data/configs/, each with its
source), counted exactly against their published totals, and their KV cache laid out as the
engine allocates it.

Not every fixture is a byte-for-byte copy of the Hub file, and the tests say which: `verbatim`
copies (some trimmed of fields the count does not read), `reconstructed` ones (GLM-4.5,
GLM-4.5-Air, Qwen2.5-VL-7B: written from the published file, every field corroborated by other
copies), a `composite` one (Llama-4-Scout: the base model's config with the Instruct fields)
and a `proxy` (Qwen3-Next-80B-A3B-Instruct: the Thinking variant's config, the same
architecture). Each fixture's config_source says which and why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infersize.catalog.hfconfig import model_from_config
from infersize.core.memory import kv_layout
from infersize.core.params import param_counts

CONFIGS = Path(__file__).parent / "data" / "configs"
KINDS = ("reconstructed", "composite", "proxy")


def provenance(name: str) -> str:
    """How faithful a fixture is to the Hub file: reconstructed, composite, proxy or verbatim."""
    source = json.loads((CONFIGS / f"{name}.json").read_text())["config_source"]
    return next((k for k in KINDS if source.upper().startswith(k.upper())), "verbatim")


def ids(names):
    return [f"{provenance(n)}-{n}" for n in names]


def load(name: str):
    fixture = json.loads((CONFIGS / f"{name}.json").read_text())
    assert fixture["total_source"] and fixture["config_source"]
    return fixture, model_from_config(fixture["config"], name, name, name)


COUNTED = [
    *("phi-4", "gemma-3-27b-it", "gpt-oss-20b", "gpt-oss-120b", "glm-4.5", "glm-4.5-air"),
    *("mistral-small-3.1-24b-instruct-2503", "qwen2.5-vl-7b-instruct"),
    *("qwen3-vl-8b-instruct", "qwen3-vl-30b-a3b-instruct", "llama-4-scout-17b-16e-instruct"),
    "qwen3-next-80b-a3b-instruct",
]


def test_the_non_verbatim_fixtures_are_the_ones_the_tests_name():
    """A fixture that is not a copy of the Hub file says so first in its config_source."""
    kinds = {n: provenance(n) for n in COUNTED}
    assert {n for n, k in kinds.items() if k != "verbatim"} == {
        "glm-4.5",
        "glm-4.5-air",
        "qwen2.5-vl-7b-instruct",
        "llama-4-scout-17b-16e-instruct",
        "qwen3-next-80b-a3b-instruct",
    }
    assert kinds["llama-4-scout-17b-16e-instruct"] == "composite"
    assert kinds["qwen3-next-80b-a3b-instruct"] == "proxy"


@pytest.mark.parametrize("name", COUNTED, ids=ids(COUNTED))
def test_parameter_counts_equal_the_published_totals(name):
    fixture, model = load(name)
    assert param_counts(model).total == fixture["published_total_params"]


def test_kimi_k2_counts_its_config_exactly():
    """Kimi-K2 is DeepSeek-V3's architecture (MLA, 384 experts). Its Hub figure is 3,416
    parameters above what its config holds (61 layers × 56: no tensor of that shape is in
    the architecture); every variant's Hub figure carries the same gap, so the config's count
    is the one infersize gives."""
    fixture, model = load("kimi-k2-instruct")
    assert param_counts(model).total == 1_026_408_232_448
    assert fixture["published_total_params"] - param_counts(model).total == 61 * 56


def test_gemma_3_full_checkpoint_defaults_its_vocabulary_and_counts_its_vision_tower():
    """Its text_config has no vocab_size (Gemma3TextConfig's default, 262,208, applies); the
    SigLIP tower (416,866,032) and projector (6,194,304) load with it."""
    _, model = load("gemma-3-27b-it")
    assert model.vocab_size == 262_208
    assert model.extra_params == 416_866_032 + 6_194_304
    assert model.vision is not None and model.vision.patches_per_item == 64 * 64
    layout = kv_layout(model, _bf16(), 1)
    assert (model.sliding_window, model.sliding_window_layers) == (1024, 52)
    assert layout.full_bytes_per_token == 10 * 2 * 16 * 128 * 2


def test_gpt_oss_alternates_sliding_and_full_attention():
    """layer_types: every other layer attends to a 128-token window; 8 KV heads of 64."""
    _, model = load("gpt-oss-20b")
    layout = kv_layout(model, _bf16(), 1)
    assert (model.sliding_window, model.sliding_window_layers) == (128, 12)
    assert layout.full_bytes_per_token == layout.window_bytes_per_token == 12 * 2 * 8 * 64 * 2
    assert model.moe is not None and model.moe.num_experts_per_tok == 4


def test_kimi_k2_caches_one_latent_per_layer():
    """MLA (DeepSeek-V2 §2.1.2): 512 latent + 64 rope values per token and layer."""
    _, model = load("kimi-k2-instruct")
    assert kv_layout(model, _bf16(), 8).bytes_per_token == 61 * (512 + 64) * 2


@pytest.mark.parametrize(
    ("name", "main", "layers"),
    [("glm-4.5", 352_797_829_024, 92), ("glm-4.5-air", 106_852_251_264, 46)],
)
def test_glm_4_5_reconstructed_config_holds_one_mtp_layer_that_vllm_serves_without(
    name, main, layers
):
    """The Hub total includes the MTP layer (model.layers.<n>.*: a full MoE decoder layer,
    eh_proj, three norms and its own embed_tokens and shared_head.head); the served weights
    (vLLM's Glm4MoeForCausalLM skips the spec layer) are the main model's. Attention is full in
    every layer: 8 KV heads of 128; q, k, v biased and o not."""
    _, model = load(name)
    counts = param_counts(model)
    assert counts.total - counts.mtp == main
    assert counts.embedding + counts.lm_head + counts.linear + counts.small == main
    assert (model.mtp_layers, model.qkv_bias, model.o_proj_bias) == (1, True, False)
    assert model.qk_norm == (name == "glm-4.5")
    layout = kv_layout(model, _bf16(), 1)
    assert layout.bytes_per_token == layers * 2 * 8 * 128 * 2
    assert layout.window_bytes_per_token == 0


# (vision tower and projector, decoder layers, KV heads, largest image: patches, prompt tokens)
VISION = {
    # Pixtral 403,305,472 + projector 35,652,608; 1540 px / 14 = 110 patches a side, merged 2x2
    # into 55 rows of 55 tokens and one [IMG_BREAK] each
    "mistral-small-3.1-24b-instruct-2503": (403_305_472 + 35_652_608, 40, 8, 110 * 110, 55 * 56),
    # a transformers run prints visual 676,550,144 and text 7,615,616,512 (the fixture's source)
    "qwen2.5-vl-7b-instruct": (676_550_144, 28, 4, 65536, 16384),
    "qwen3-vl-8b-instruct": (576_388_336, 36, 8, 65536, 16384),
    "qwen3-vl-30b-a3b-instruct": (538_631_408, 48, 4, 65536, 16384),
    # tower and adapter 850,960,896 + projector 20,971,520; a 16x1-tile image and its global
    # tile, 577 positions each (24x24 patches and the class token), 144 tokens each in the prompt
    "llama-4-scout-17b-16e-instruct": (850_960_896 + 20_971_520, 48, 8, 17 * 577, 2467),
}


@pytest.mark.parametrize("name", sorted(VISION), ids=ids(sorted(VISION)))
def test_vision_towers_load_beside_a_full_attention_decoder(name):
    """The decoder counts as its text model does today (Qwen2.5-VL's text is Qwen2.5-7B's
    7,615,616,512; Qwen3-VL's is Qwen3-8B's and Qwen3-30B-A3B's Hub totals); the tower and
    projector are extra_params. Every decoder layer attends fully (Qwen2.5-VL's sliding_window
    is off: use_sliding_window false), 128-wide heads; the largest image is the one vLLM
    profiles the encoder on."""
    tower, layers, kv_heads, patches, tokens = VISION[name]
    _, model = load(name)
    assert model.extra_params == tower
    assert model.vision is not None
    assert (model.vision.patches_per_item, model.vision.tokens_per_item) == (patches, tokens)
    layout = kv_layout(model, _bf16(), 1)
    assert layout.bytes_per_token == layers * 2 * kv_heads * 128 * 2
    assert layout.window_bytes_per_token == 0


def test_llama_4_scout_composite_config_is_moe_in_every_layer_and_chunks_36_of_them():
    """16 experts, top-1, and a shared expert of the same size in all 48 layers. The RoPE
    layers (no_rope_layers is empty: every 4th layer is global, without RoPE) attend within
    8192-token chunks. vLLM turns its hybrid allocator off for chunked local attention (config/
    vllm.py, unless VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE; always with EAGLE), so
    every layer caches every token: 48 full layers of 8 KV heads of 128."""
    _, model = load("llama-4-scout-17b-16e-instruct")
    counts = param_counts(model)
    assert (model.attention_chunk_size, model.chunked_attention_layers) == (8192, 36)
    assert model.moe is not None and (model.moe.num_experts, model.moe.layer_step) == (16, 1)
    assert counts.mlp == 48 * 17 * 3 * 5120 * 8192
    assert counts.total - model.extra_params == 107_769_861_120
    layout = kv_layout(model, _bf16(), 1)
    assert layout.bytes_per_token == 48 * 2 * 8 * 128 * 2 and layout.window_bytes_per_token == 0


def test_llama_4_maverick_trimmed_config_alternates_dense_and_moe_layers(catalog):
    """interleave_moe_layer_step 2: layers 1, 3, ..., 47 are MoE (128 experts, top-1, a shared
    expert), the other 24 dense SwiGLU of intermediate_size_mlp 16384. The fixture is a trimmed
    config without vision_config: its decoder is 400,711,848,960; with Scout's vision_config
    (the same encoder, an assumption) it is the published total to the parameter."""
    fixture, model = load("llama-4-maverick-17b-128e-instruct")
    counts = param_counts(model)
    assert counts.total == 400_711_848_960
    assert counts.mlp == 24 * 129 * 3 * 5120 * 8192 + 24 * 3 * 5120 * 16384
    scout, _ = load("llama-4-scout-17b-16e-instruct")
    whole = {**fixture["config"], "vision_config": scout["config"]["vision_config"]}
    full = model_from_config(whole, "maverick", "maverick", "maverick")
    assert param_counts(full).total == fixture["published_total_params"]
    assert param_counts(catalog.model("llama-4-maverick")) == param_counts(full)


def test_qwen3_next_proxy_config_caches_12_layers_per_token_and_36_states_per_sequence():
    """36 Gated DeltaNet layers hold no per-token KV but a fixed state per sequence (conv
    window 8192 x 3 and 32 value heads' 128 x 128 matrix, at the model's bf16 whatever the KV
    dtype), split over TP ranks; the 12 gated full-attention layers cache 2 KV heads of 256.
    The checkpoint's MTP module (1,650,471,424) is in the total, not in the served weights."""
    from infersize.core.memory import kv_cache_bytes

    _, model = load("qwen3-next-80b-a3b-instruct")
    counts = param_counts(model)
    assert (counts.mtp, counts.total - counts.mtp) == (1_650_471_424, 79_674_391_296)
    assert model.linear_attention is not None and model.linear_attention.layers == 36
    state = 36 * (8192 * 3 + 32 * 128 * 128) * 2
    layout = kv_layout(model, _bf16(), 1)
    assert layout.full_bytes_per_token == 12 * 2 * 2 * 256 * 2
    assert layout.state_bytes_per_sequence == state
    assert kv_layout(model, _bf16(), 2).state_bytes_per_sequence == state / 2
    assert kv_cache_bytes(layout, 1000, 3) == 3 * (1000 * 12 * 2048 + state)


CATALOG_ENTRIES = {
    "glm-4.5": "glm-4.5",
    "glm-4.5-air": "glm-4.5-air",
    "mistral-small-3.1-24b-instruct-2503": "mistral-small-3.1-24b",
    "qwen2.5-vl-7b-instruct": "qwen2.5-vl-7b",
    "qwen3-vl-8b-instruct": "qwen3-vl-8b",
    "qwen3-vl-30b-a3b-instruct": "qwen3-vl-30b-a3b",
    "llama-4-scout-17b-16e-instruct": "llama-4-scout",
    "qwen3-next-80b-a3b-instruct": "qwen3-next-80b-a3b",
}


@pytest.mark.parametrize(
    ("name", "entry"), sorted(CATALOG_ENTRIES.items()), ids=ids(sorted(CATALOG_ENTRIES))
)
def test_catalog_entry_counts_and_caches_as_its_config(catalog, name, entry):
    """The catalog entry says what the checkpoint's config.json says: same parameters by
    component, same KV layout, same largest image."""
    _, model = load(name)
    listed = catalog.model(entry)
    assert param_counts(listed) == param_counts(model)
    assert kv_layout(listed, _bf16(), 2) == kv_layout(model, _bf16(), 2)
    assert listed.published_params == param_counts(model).total
    if model.vision is not None:
        assert listed.vision is not None
        assert {**listed.vision.as_dict(), "source": ""} == {**model.vision.as_dict(), "source": ""}


def _bf16():
    from infersize.catalog.store import load_catalog

    return load_catalog().kv_dtype("bf16")
