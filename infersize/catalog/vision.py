"""The vision tower and projector a multimodal checkpoint loads beside its decoder, counted from
its config.json's vision_config (the decoder itself is counted from its text fields).

Each counter follows the module layout of the transformers class named in its docstring and
returns Model fields: `extra_params` (tower and projector) and `vision` (what vLLM profiles
the encoder on: the patches and prompt tokens of its largest image). Counts equal the
published totals exactly (tests/test_hub_configs_count_and_lay_out_kv.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SIGLIP_SO400M = {
    "hidden_size": 1152,
    "intermediate_size": 4304,
    "num_hidden_layers": 27,
    "image_size": 896,
    "patch_size": 14,
}  # Gemma-3's vision_config defaults
# Qwen2.5-VL and Qwen3-VL image processors: max_pixels (size.longest_edge) in preprocessor
# config, which vLLM's get_image_size_with_most_features profiles with (it is not in config.json)
QWEN_MAX_PIXELS = {"qwen2_5_vl": 12845056, "qwen3_vl": 16777216, "qwen3_vl_moe": 16777216}
LLAMA4_MAX_TILES = 16  # Llama4ImageProcessor max_patches: vLLM profiles a 16-tile image


def _tower(h: int, i: int, patches: int, tokens: int, source: str) -> dict[str, Any]:
    return {
        "hidden_size": h,
        "intermediate_size": i,
        "patches_per_item": patches,
        "tokens_per_item": tokens,
        "source": source,
    }


def _gemma3(config: dict[str, Any], v: dict[str, Any], text_hidden: int) -> dict[str, Any]:
    """Gemma3ForConditionalGeneration's SigLIP tower and projector: patch embedding (conv with
    bias), one position per patch, per layer four biased attention projections, two layer
    norms and a biased MLP, a final layer norm; the projector is one [vision, text] matrix and
    an RMS norm."""
    v = {**SIGLIP_SO400M, **v}
    h, i, layers = int(v["hidden_size"]), int(v["intermediate_size"]), int(v["num_hidden_layers"])
    patches = (int(v["image_size"]) // int(v["patch_size"])) ** 2
    per_layer = 4 * (h * h + h) + 2 * 2 * h + (h * i + i) + (i * h + h)
    tower = 3 * int(v["patch_size"]) ** 2 * h + h + patches * h + layers * per_layer + 2 * h
    projector = h * text_hidden + h
    tokens = int(config.get("mm_tokens_per_image", 256)) + 4  # with its begin/end markers
    return {
        "extra_params": tower + projector,
        "vision": _tower(h, i, patches, tokens, "the checkpoint's vision_config"),
    }


def _pixtral(config: dict[str, Any], v: dict[str, Any], text_hidden: int) -> dict[str, Any]:
    """Mistral3ForConditionalGeneration: PixtralVisionModel (patch conv without bias, ln_pre
    RMS norm; per layer attention_norm and ffn_norm, q/k/v/o without bias, a SwiGLU MLP; 2D
    RoPE has no weights) and Mistral3MultiModalProjector (RMS norm, patch merger of
    spatial_merge_size² patches, two linears, biased with multimodal_projector_bias)."""
    h, i, p = int(v["hidden_size"]), int(v["intermediate_size"]), int(v["patch_size"])
    per_layer = 2 * h + 4 * h * h + 3 * h * i
    tower = 3 * p * p * h + h + int(v["num_hidden_layers"]) * per_layer
    merge = int(config.get("spatial_merge_size", 1))
    bias = 2 * text_hidden if config.get("multimodal_projector_bias") else 0
    projector = h + merge * merge * h * h + h * text_hidden + text_hidden * text_hidden + bias
    side = int(v["image_size"]) // p  # patches along the largest image's side
    rows = side // merge  # a row of merged tokens and its [IMG_BREAK] (the last: [IMG_END])
    vision = _tower(h, i, side * side, rows * (rows + 1), "the checkpoint's vision_config")
    return {"extra_params": tower + projector, "vision": vision}


def _qwen2_5_vl(config: dict[str, Any], v: dict[str, Any], text_hidden: int) -> dict[str, Any]:
    """Qwen2_5_VisionTransformerPretrainedModel: Conv3d patch embedding without bias (temporal
    × patch²), per block two RMS norms, biased qkv and proj, a biased SwiGLU MLP; the merger
    is an RMS norm and two biased linears over spatial_merge_size² patches."""
    h, i, p = int(v["hidden_size"]), int(v["intermediate_size"]), int(v["patch_size"])
    t, merge = int(v.get("temporal_patch_size", 2)), int(v.get("spatial_merge_size", 2))
    out = int(v.get("out_hidden_size", text_hidden))
    per_block = 2 * h + 4 * (h * h + h) + 2 * (h * i + i) + (i * h + h)
    mh = h * merge * merge
    merger = h + mh * mh + mh + mh * out + out
    tower = int(v.get("in_chans", 3)) * t * p * p * h + int(v["depth"]) * per_block + merger
    return {"extra_params": tower, "vision": _qwen_item(config, h, i, p, merge)}


def _qwen3_vl(config: dict[str, Any], v: dict[str, Any], text_hidden: int) -> dict[str, Any]:
    """Qwen3VLVisionModel: Conv3d patch embedding with bias, learned position embeddings,
    per block two layer norms (with bias), biased qkv and proj, a biased GELU MLP; a merger
    (layer norm, two biased linears) and one more per deepstack_visual_indexes entry, whose
    layer norm runs after the patch shuffle (over spatial_merge_size² · hidden)."""
    h, i, p = int(v["hidden_size"]), int(v["intermediate_size"]), int(v["patch_size"])
    t, merge = int(v.get("temporal_patch_size", 2)), int(v.get("spatial_merge_size", 2))
    out = int(v.get("out_hidden_size", text_hidden))
    patch = int(v.get("in_channels", 3)) * t * p * p * h + h
    per_block = 2 * 2 * h + 4 * (h * h + h) + (h * i + i) + (i * h + h)
    mh = h * merge * merge
    mlp = mh * mh + mh + mh * out + out
    mergers = 2 * h + mlp + len(v.get("deepstack_visual_indexes", [])) * (2 * mh + mlp)
    positions = int(v["num_position_embeddings"]) * h
    tower = patch + positions + int(v["depth"]) * per_block + mergers
    return {"extra_params": tower, "vision": _qwen_item(config, h, i, p, merge)}


def _qwen_item(config: dict[str, Any], h: int, i: int, patch: int, merge: int) -> dict[str, Any]:
    """The largest image vLLM profiles a Qwen-VL encoder on: max_pixels of (patch · merge)²
    tokens, each spatial_merge_size² patches."""
    tokens = QWEN_MAX_PIXELS[config["model_type"]] // (patch * merge) ** 2
    source = "vision_config; max_pixels of the image processor's preprocessor_config"
    return _tower(h, i, tokens * merge * merge, tokens, source)


def _llama4(config: dict[str, Any], v: dict[str, Any], text_hidden: int) -> dict[str, Any]:
    """Llama4VisionModel: unfolded patches through one linear without bias, a class embedding,
    a position per patch and the class token, layer norms (with bias) before and after, per
    layer biased q/k/v/o, two layer norms and a biased GELU MLP; its pixel-shuffle adapter is
    two linears without bias (intermediate_size -> projector_input_dim -> projector_output_dim)
    and the multi-modal projector one more (vision_output_dim -> text hidden)."""
    h, i, p = int(v["hidden_size"]), int(v["intermediate_size"]), int(v["patch_size"])
    positions = (int(v["image_size"]) // p) ** 2 + 1
    per_layer = 4 * (h * h + h) + 2 * 2 * h + (h * i + i) + (i * h + h)
    embeddings = int(v.get("num_channels", 3)) * p * p * h + h + positions * h + 2 * 2 * h
    adapter_in, adapter_out = int(v["projector_input_dim"]), int(v["projector_output_dim"])
    adapter = i * adapter_in + adapter_in * adapter_out
    projector = int(v["vision_output_dim"]) * text_hidden
    tower = embeddings + int(v["num_hidden_layers"]) * per_layer + adapter + projector
    per_tile = round((positions - 1) * float(v["pixel_shuffle_ratio"]) ** 2)
    # a 16x1 tile grid: each tile's tokens and a row separator, then the global tile between
    # <|image|> and <|image_end|>, after <|image_start|> (Llama4Processor._prompt_split_image)
    tokens = LLAMA4_MAX_TILES * (per_tile + 1) + per_tile + 3
    patches = (LLAMA4_MAX_TILES + 1) * positions
    source = "vision_config; Llama4ImageProcessor's 16 tiles and a global one, vLLM mllama4"
    return {"extra_params": tower, "vision": _tower(h, i, patches, tokens, source)}


VisionCounter = Callable[[dict[str, Any], dict[str, Any], int], dict[str, Any]]
COUNTERS: dict[str, VisionCounter] = {
    "gemma3": _gemma3,
    "mistral3": _pixtral,
    "qwen2_5_vl": _qwen2_5_vl,
    "qwen3_vl": _qwen3_vl,
    "qwen3_vl_moe": _qwen3_vl,
    "llama4": _llama4,
}


def vision_fields(config: dict[str, Any], text_hidden: int) -> dict[str, Any]:
    """extra_params and vision of a multimodal checkpoint's config.json; {} for text only."""
    counter = COUNTERS.get(str(config.get("model_type")))
    vision_config = config.get("vision_config")
    if counter is None or not isinstance(vision_config, dict):
        return {}
    return counter(config, vision_config, text_hidden)
