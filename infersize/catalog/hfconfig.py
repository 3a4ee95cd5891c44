"""A Hugging Face config.json as a Model: the architectures infersize can count exactly.

Each model_type names the config keys it reads; a missing key is an error naming it, an
unknown model_type an error listing what is supported. Defaults follow transformers' own config
classes (e.g. LlamaConfig ties no embeddings, GemmaConfig does)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from infersize.catalog.hffamilies import family_fields
from infersize.catalog.hfheads import head_from_config
from infersize.catalog.records import Model
from infersize.catalog.validation import validate_record
from infersize.catalog.vision import vision_fields
from infersize.errors import InfersizeError


class CheckpointError(InfersizeError):
    """A local or Hub checkpoint that cannot be read: missing files or fields, corrupt headers."""


GPT_OSS = {"attention_sinks": True, "router_bias": True, "expert_bias": True}
# model_type -> (family used in ids, tied-embedding default, fixed fields)
ARCHITECTURES: dict[str, tuple[str, bool, dict[str, Any]]] = {
    "llama": ("llama", False, {}),
    "mistral": ("mistral", False, {}),
    "mixtral": ("mixtral", False, {}),
    "qwen2": ("qwen2", False, {"qkv_bias": True}),
    "qwen2_moe": ("qwen2-moe", False, {"qkv_bias": True}),
    "qwen3": ("qwen3", False, {"qk_norm": True}),
    "qwen3_moe": ("qwen3-moe", False, {"qk_norm": True}),
    "gemma": ("gemma", True, {}),
    "gemma2": ("gemma-2", True, {"norms_per_layer": 4}),
    "gemma3_text": ("gemma-3", True, {"norms_per_layer": 4, "qk_norm": True}),
    "phi3": ("phi-3", False, {}),
    "granite": ("granite", True, {}),
    "deepseek_v2": ("deepseek-v2", False, {}),
    "deepseek_v3": ("deepseek-v3", False, {"router_bias": True}),
    "deepseek_v32": ("deepseek-v3", False, {"router_bias": True}),  # V3 and a lightning indexer
    "kimi_k2": ("kimi-k2", False, {"router_bias": True}),  # the DeepSeek-V3 architecture
    # attention_bias (q, k, v and o biased) comes from the config like any model's
    "gpt_oss": ("gpt-oss", False, GPT_OSS),
    # attention_bias biases q, k and v only (Glm4MoeAttention's o_proj has none)
    "glm4_moe": ("glm-4.5", False, {"router_bias": True, "o_proj_bias": False}),
    "qwen2_5_vl": ("qwen2.5-vl", False, {"qkv_bias": True}),  # Qwen2 text fields, top level
    "qwen3_vl_text": ("qwen3-vl", False, {"qk_norm": True}),
    "qwen3_vl_moe_text": ("qwen3-vl-moe", False, {"qk_norm": True}),
    "llama4_text": ("llama-4", False, {}),
    "qwen3_next": ("qwen3-next", False, {"qk_norm": True, "attention_output_gate": True}),
}

# (model_type family, vocab size) -> tokenizer family shared with the catalog
TOKENIZERS = {
    ("llama", 32000): "llama2",
    ("llama", 128256): "llama3",
    ("mistral", 32000): "mistral-v1",
    ("mixtral", 32000): "mistral-v1",
    ("mistral", 32768): "mistral-v3",
    ("mixtral", 32768): "mistral-v3",
    ("mistral", 131072): "tekken",
    ("gemma", 256000): "gemma",
    ("gemma-2", 256000): "gemma",
    ("gemma-3", 262144): "gemma3",
    ("gemma-3", 262208): "gemma3",
    ("phi-3", 32064): "phi3",
    ("deepseek-v2", 102400): "deepseek-v2",
    ("deepseek-v3", 129280): "deepseek-v3",
    ("glm-4.5", 151552): "glm4",
    ("llama-4", 202048): "llama4",
}
QWEN_VOCABS = (151936, 152064)


def tokenizer_family(family: str, vocab_size: int) -> str:
    if family.startswith("qwen") and vocab_size in QWEN_VOCABS:
        return "qwen2"  # Qwen2, Qwen2.5 and Qwen3 share one BPE vocabulary
    return TOKENIZERS.get((family, vocab_size), f"{family}-{vocab_size}")


GEMMA3_VOCAB = 262208  # Gemma3TextConfig's default: a text_config may leave vocab_size out
# multimodal model_type -> the model_type its text_config stands for
TEXT_CONFIGS = {
    "gemma3": "gemma3_text",
    "mistral3": "mistral",
    "qwen3_vl": "qwen3_vl_text",
    "qwen3_vl_moe": "qwen3_vl_moe_text",
    "llama4": "llama4_text",
}
INHERITED = ("tie_word_embeddings", "torch_dtype", "dtype")  # top-level keys a text_config may lack


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    """Multimodal checkpoints (Gemma-3 4B+, Mistral-Small-3.1, Qwen3-VL) nest the language model
    under text_config; Qwen2.5-VL keeps it at the top level. The top level's tied-embedding
    flag and dtype hold for the text model where its own config leaves them out."""
    text_type = TEXT_CONFIGS.get(str(config.get("model_type")))
    if text_type is None or not isinstance(config.get("text_config"), dict):
        return config
    defaults: dict[str, Any] = {"vocab_size": GEMMA3_VOCAB} if text_type == "gemma3_text" else {}
    inherited = {key: config[key] for key in INHERITED if key in config}
    return {**defaults, **inherited, "model_type": text_type, **config["text_config"]}


def _sliding_layers(config: dict[str, Any], layers: int) -> int | None:
    if isinstance(config.get("layer_types"), list):
        return sum(1 for t in config["layer_types"] if t == "sliding_attention")
    pattern = config.get("sliding_window_pattern")
    if config.get("model_type") == "gemma3_text":  # 5 local layers to 1 global (Gemma-3 report)
        return layers - layers // int(pattern or 6)
    if config.get("model_type") == "gemma2":  # alternating local and global layers
        return layers // 2
    return None


def _moe(config: dict[str, Any]) -> dict[str, Any]:
    experts = (
        config.get("num_local_experts")
        or config.get("num_experts")
        or config.get("n_routed_experts")
    )
    if not experts:
        return {}
    out = {"num_experts": experts, "num_experts_per_tok": config["num_experts_per_tok"]}
    if config.get("moe_intermediate_size"):
        out["moe_intermediate_size"] = config["moe_intermediate_size"]
    if config.get("shared_expert_intermediate_size"):
        out["shared_expert_intermediate_size"] = config["shared_expert_intermediate_size"]
    if config.get("n_shared_experts"):
        out["num_shared_experts"] = config["n_shared_experts"]
    if config.get("first_k_dense_replace"):
        out["first_k_dense_replace"] = config["first_k_dense_replace"]
    return out


def _mla(config: dict[str, Any]) -> dict[str, Any]:
    if not config.get("kv_lora_rank"):
        return {}
    keys = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
    out = {key: config[key] for key in keys}
    if config.get("q_lora_rank"):
        out["q_lora_rank"] = config["q_lora_rank"]
    if config.get("index_n_heads") and config.get("index_head_dim"):  # DeepSeek-V3.2
        out["index_n_heads"] = config["index_n_heads"]
        out["index_head_dim"] = config["index_head_dim"]
    return out


def safe_id(name: str) -> str:
    """A catalog-style id from a folder or file name (no spaces or separators)."""
    cleaned = re.sub(r"[^a-z0-9._+-]+", "-", name.lower()).strip("-.")
    return cleaned[:100] or "model"


def model_from_config(config: dict[str, Any], model_id: str, hf_repo: str, where: str) -> Model:
    """Model from config.json; `where` names the file in errors."""
    if not isinstance(config, dict):
        raise CheckpointError(f"{where}: expected a JSON object")
    try:
        head = head_from_config(config, safe_id(model_id), hf_repo)
    except KeyError as exc:
        raise CheckpointError(f"{where}: missing '{exc.args[0]}'") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "config"
        raise CheckpointError(f"{where}: {key}: {err['msg']}") from None
    if head is not None:
        return head
    original, config = config, _text_config(config)
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or model_type not in ARCHITECTURES:
        raise CheckpointError(
            f"{where}: unknown architecture '{model_type}' (model_type); "
            f"infersize knows {', '.join(sorted(ARCHITECTURES))}"
        )
    try:
        return _model(config, model_type, model_id, hf_repo, where, vision_of=original)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        if isinstance(exc, KeyError):
            raise CheckpointError(f"{where}: missing '{exc.args[0]}'") from None
        raise CheckpointError(f"{where}: a field has the wrong type or value ({exc})") from None


def _model(
    config: dict[str, Any],
    model_type: str,
    model_id: str,
    hf_repo: str,
    where: str,
    vision_of: dict[str, Any],
) -> Model:
    family, tied_default, fixed = ARCHITECTURES[model_type]
    try:
        layers = config["num_hidden_layers"]
        fields: dict[str, Any] = {
            "hidden_size": config["hidden_size"],
            "intermediate_size": config["intermediate_size"],
            "num_hidden_layers": layers,
            "num_attention_heads": config["num_attention_heads"],
            "num_key_value_heads": config["num_key_value_heads"]
            if config.get("num_key_value_heads") is not None
            else config["num_attention_heads"],
            "vocab_size": config["vocab_size"],
            "max_position_embeddings": config.get("max_position_embeddings", 4096),
        }
    except KeyError as exc:
        raise CheckpointError(f"{where}: missing '{exc.args[0]}'") from None
    if config.get("head_dim") and not config.get("kv_lora_rank"):
        fields["head_dim"] = config["head_dim"]
    if config.get("attention_bias"):
        fields["qkv_bias"] = fields["o_proj_bias"] = True
    if config.get("sliding_window") and config.get("use_sliding_window", True):
        fields["sliding_window"] = config["sliding_window"]
        window_layers = _sliding_layers(config, layers)
        if window_layers is not None:
            fields["sliding_window_layers"] = window_layers
    declared = str(config.get("torch_dtype") or config.get("dtype") or "")
    dtype = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(declared)
    try:
        return validate_record(
            Model,
            dict(
                id=safe_id(model_id),
                hf_repo=hf_repo,
                family=family,
                tokenizer_family=tokenizer_family(family, config["vocab_size"]),
                architecture=model_type,
                tie_word_embeddings=config.get("tie_word_embeddings", tied_default),
                checkpoint_dtype=dtype,
                **{**fields, **_moe(config), **_mla(config), **family_fields(config), **fixed},
                **vision_fields(vision_of, int(config["hidden_size"])),
            ),
        )  # an architecture's own spelling wins over the common fields, its fixed fields over both
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "config"
        raise CheckpointError(f"{where}: {key}: {err['msg']}") from None
