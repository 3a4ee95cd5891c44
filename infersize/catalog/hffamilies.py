"""config.json fields that one architecture spells its own way, as Model fields.

`family_fields` returns what a model_type adds to (or overrides in) the fields every decoder
config has; each reader names the transformers or vLLM class it follows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, get_args

from infersize.catalog.records import SsmStateDtype

NO_ROPE_LAYER_INTERVAL = 4  # Llama4TextConfig's default: every 4th layer is global, no RoPE


def _glm4_moe(config: dict[str, Any]) -> dict[str, Any]:
    """GLM-4.5: use_qk_norm adds q and k RMS norms (GLM-4.5-Air has none); each of its
    num_nextn_predict_layers MTP layers stores its own embed_tokens and shared_head.head."""
    mtp = int(config.get("num_nextn_predict_layers") or 0)
    out: dict[str, Any] = {"qk_norm": bool(config.get("use_qk_norm", False))}
    return {**out, "mtp_layers": mtp, "mtp_embeddings": True} if mtp else out


def _llama4(config: dict[str, Any]) -> dict[str, Any]:
    """Llama4TextConfig: intermediate_size is an expert's (the shared expert's too) and
    intermediate_size_mlp a dense layer's; every interleave_moe_layer_step-th layer is MoE
    (vLLM llama4.py: (layer + 1) % step == 0). no_rope_layers flags the RoPE layers, which
    attend within chunks of attention_chunk_size; left empty, every 4th layer is global.
    use_qk_norm is an L2 norm without weights, so it adds no parameters."""
    layers = int(config["num_hidden_layers"])
    flags = config.get("no_rope_layers") or [
        int((layer + 1) % NO_ROPE_LAYER_INTERVAL != 0) for layer in range(layers)
    ]
    out: dict[str, Any] = {
        "intermediate_size": config.get("intermediate_size_mlp", config["intermediate_size"]),
        "moe_intermediate_size": config["intermediate_size"],
        "num_shared_experts": 1,
        "moe_layer_step": int(config.get("interleave_moe_layer_step", 1)),
    }
    if config.get("attention_chunk_size"):
        out["attention_chunk_size"] = config["attention_chunk_size"]
        out["chunked_attention_layers"] = sum(1 for flag in flags if flag)
    return out


def _qwen3_next(config: dict[str, Any]) -> dict[str, Any]:
    """Qwen3NextConfig: layer_types, or else every full_attention_interval-th layer, is gated
    full attention and the rest Gated DeltaNet (linear attention). The checkpoint ships an MTP
    module (mtp.*) the config does not describe; vLLM's Qwen3NextMTP builds
    num_nextn_predict_layers of them, 1 by default, sharing the embedding and lm_head. A
    mamba_ssm_dtype SGLang accepts is kept (its mamba2_state_dtype reads it; another value it
    warns about and ignores)."""
    layers = int(config["num_hidden_layers"])
    if isinstance(config.get("layer_types"), list):
        linear = sum(1 for t in config["layer_types"] if t == "linear_attention")
    else:
        linear = layers - layers // int(config.get("full_attention_interval", 4))
    keys = (
        "linear_num_key_heads",
        "linear_num_value_heads",
        "linear_key_head_dim",
        "linear_value_head_dim",
        "linear_conv_kernel_dim",
    )
    out = {key: config[key] for key in keys}
    if config.get("mamba_ssm_dtype") in get_args(SsmStateDtype):  # else SGLang's own default
        out["mamba_ssm_dtype"] = config["mamba_ssm_dtype"]
    mtp = int(config.get("num_nextn_predict_layers", 1))
    return {**out, "linear_attention_layers": linear, "mtp_layers": mtp}


READERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "glm4_moe": _glm4_moe,
    "llama4_text": _llama4,
    "qwen3_next": _qwen3_next,
}


def family_fields(config: dict[str, Any]) -> dict[str, Any]:
    reader = READERS.get(str(config.get("model_type")))
    return {} if reader is None else reader(config)
