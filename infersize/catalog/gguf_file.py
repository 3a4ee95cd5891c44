"""GGUF files (llama.cpp): architecture from the header's key-values, exact per-tensor types and
bytes from the tensor infos, read with the `gguf` package's reader (memory-mapped, no weights
decoded)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from infersize.catalog.checkpoint import Checkpoint, Tensor, weight_bytes_from_tensors
from infersize.catalog.hfconfig import CheckpointError, model_from_config
from infersize.files import InputFileError, open_regular

# general.architecture -> config.json model_type (llama.cpp writes Mistral as llama)
ARCHITECTURES = {
    "llama": "llama",
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "qwen2moe": "qwen2_moe",
    "qwen3moe": "qwen3_moe",
    "gemma2": "gemma2",
    "gemma3": "gemma3_text",
    "phi3": "phi3",
    "granite": "granite",
}
FILE_TYPES = {"ALL_F32": "fp32", "MOSTLY_F16": "fp16", "MOSTLY_BF16": "bf16"}


def _fields(reader: Any) -> dict[str, Any]:
    out = {}
    for name, field in reader.fields.items():
        try:
            out[name] = field.contents()
        except (ValueError, IndexError, TypeError):
            continue
    return out


def _config(kv: dict[str, Any], arch: str, tensor_names: set[str]) -> dict[str, Any]:
    def key(name: str, default: Any = None) -> Any:
        return kv.get(f"{arch}.{name}", default)

    vocab = len(kv["tokenizer.ggml.tokens"]) if "tokenizer.ggml.tokens" in kv else key("vocab_size")
    config = {
        "model_type": ARCHITECTURES[arch],
        "hidden_size": key("embedding_length"),
        "intermediate_size": key("feed_forward_length"),
        "num_hidden_layers": key("block_count"),
        "num_attention_heads": key("attention.head_count"),
        "num_key_value_heads": key("attention.head_count_kv"),
        "vocab_size": vocab,
        "max_position_embeddings": key("context_length", 4096),
        "tie_word_embeddings": "output.weight" not in tensor_names,
    }
    if key("attention.key_length"):
        config["head_dim"] = key("attention.key_length")
    if key("attention.sliding_window"):
        config["sliding_window"] = key("attention.sliding_window")
    if key("expert_count"):
        config["num_experts"] = key("expert_count")
        config["num_experts_per_tok"] = key("expert_used_count")
        if key("expert_feed_forward_length"):
            config["moe_intermediate_size"] = key("expert_feed_forward_length")
    return {k: v for k, v in config.items() if v is not None}


def precision_of_file_type(file_type: int | None) -> str | None:
    import gguf

    if file_type is None:
        return None
    try:
        name = gguf.LlamaFileType(file_type).name
    except (ValueError, TypeError):
        return None
    return FILE_TYPES.get(name, name.removeprefix("MOSTLY_").lower())


def load_gguf(path: Path) -> Checkpoint:
    try:
        import gguf
    except ImportError:
        raise CheckpointError("GGUF files need the gguf package: pip install gguf") from None
    try:
        os.close(open_regular(path))
    except InputFileError as exc:
        raise CheckpointError(str(exc)) from None
    try:
        reader = gguf.GGUFReader(path)
    except Exception as exc:  # the reader raises ValueError, struct/np errors on bad files
        raise CheckpointError(f"{path}: not a readable GGUF file ({exc})") from None
    kv = _fields(reader)
    arch = kv.get("general.architecture")
    if not isinstance(arch, str) or arch not in ARCHITECTURES:
        raise CheckpointError(
            f"{path}: unknown architecture '{arch}' (general.architecture); "
            f"infersize reads {', '.join(sorted(ARCHITECTURES))}"
        )
    tensors = [
        Tensor(t.name, t.tensor_type.name, tuple(int(d) for d in t.shape), int(t.n_bytes))
        for t in reader.tensors
    ]
    names = {t.name for t in tensors}
    model = model_from_config(_config(kv, arch, names), path.stem.lower(), str(path), str(path))
    weights = weight_bytes_from_tensors(tensors, model.tie_word_embeddings)
    params = sum(int(t.n_elements) for t in reader.tensors)
    return Checkpoint(
        model=model,
        precision=precision_of_file_type(kv.get("general.file_type")),
        weights=weights,
        params_in_files=params,
        origin="GGUF file",
    )
