"""Speculator heads from their own config.json: the fields each engine reads to build them
(vLLM v0.21.0 model_executor/models/llama_eagle3.py, medusa.py, mlp_speculator.py and
transformers_utils/configs/{medusa,mlp_speculator}.py), as a Model that core/heads.py counts.

  EAGLE-3  a Llama config with draft_vocab_size (yuhuili/EAGLE3-*; architectures may name
           Eagle3): one decoder layer, no embedding of its own (the target's is used)
  Medusa   model_type medusa: medusa_num_heads (num_heads) heads of medusa_num_layers
           (num_hidden_layers) residual blocks, bias when medusa_fc_bias
  MLP speculator  model_type mlp_speculator: n_predict stages of width inner_dim (0: emb_dim)
           on emb_dim-wide hidden states, tie_weights
"""

from __future__ import annotations

from typing import Any

from infersize.catalog.records import Model
from infersize.catalog.validation import validate_record

_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def _common(config: dict[str, Any], model_id: str, hf_repo: str, kind: str) -> dict[str, Any]:
    declared = str(config.get("torch_dtype") or config.get("dtype") or "")
    return {
        "id": model_id,
        "hf_repo": hf_repo,
        "family": kind,
        "tokenizer_family": f"vocab-{config['vocab_size']}",  # heads pair by vocabulary
        "architecture": kind,
        "vocab_size": config["vocab_size"],
        "max_position_embeddings": config.get("max_position_embeddings", 4096),
        "checkpoint_dtype": _DTYPES.get(declared),
        "tie_word_embeddings": False,
    }


def _is_eagle3(config: dict[str, Any]) -> bool:
    names = [str(a) for a in config.get("architectures") or []]
    return "draft_vocab_size" in config or any("eagle3" in a.lower() for a in names)


def _eagle3(config: dict[str, Any], model_id: str, hf_repo: str) -> Model:
    heads = config["num_attention_heads"]
    return validate_record(
        Model,
        dict(
            **_common(config, model_id, hf_repo, "eagle3"),
            hidden_size=config["hidden_size"],
            intermediate_size=config["intermediate_size"],
            num_hidden_layers=config.get("num_hidden_layers", 1),
            num_attention_heads=heads,
            num_key_value_heads=config.get("num_key_value_heads") or heads,
            head_dim=config.get("head_dim"),
            draft_vocab_size=config.get("draft_vocab_size") or config["vocab_size"],
            embedding_from_target=True,
            speculator="eagle3",
        ),
    )


def _medusa(config: dict[str, Any], model_id: str, hf_repo: str) -> Model:
    hidden = config["hidden_size"]
    return validate_record(
        Model,
        dict(
            **_common(config, model_id, hf_repo, "medusa"),
            hidden_size=hidden,
            intermediate_size=hidden,
            num_hidden_layers=config.get("medusa_num_layers", config.get("num_hidden_layers", 1)),
            num_attention_heads=1,  # no attention: residual blocks and LM heads only
            num_key_value_heads=1,
            mlp_bias=bool(config.get("medusa_fc_bias", False)),
            speculator="medusa",
            speculator_heads=config.get("medusa_num_heads", config.get("num_heads", 5)),
        ),
    )


def _mlp_speculator(config: dict[str, Any], model_id: str, hf_repo: str) -> Model:
    common = _common(config, model_id, hf_repo, "mlp_speculator")
    common["tie_word_embeddings"] = bool(config.get("tie_weights", False))
    return validate_record(
        Model,
        dict(
            **common,
            hidden_size=config["emb_dim"],
            intermediate_size=config.get("inner_dim") or config["emb_dim"],
            num_hidden_layers=1,
            num_attention_heads=1,
            num_key_value_heads=1,
            speculator="mlp_speculator",
            speculator_heads=config["n_predict"],
        ),
    )


def head_from_config(config: dict[str, Any], model_id: str, hf_repo: str) -> Model | None:
    """The head a config.json describes, or None for an ordinary model."""
    model_type = config.get("model_type")
    if model_type == "medusa":
        return _medusa(config, model_id, hf_repo)
    if model_type == "mlp_speculator":
        return _mlp_speculator(config, model_id, hf_repo)
    if model_type == "llama" and _is_eagle3(config):
        return _eagle3(config, model_id, hf_repo)
    return None
