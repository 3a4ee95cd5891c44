"""Checkpoint folders and GGUF files written by a test: a tiny Llama config and its tensors."""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np
from safetensors.numpy import save_file

TINY = {
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 96,
    "tie_word_embeddings": False,
    "max_position_embeddings": 512,
    "torch_dtype": "float16",
}


def llama_tensors(config: dict, dtype=np.float16) -> dict[str, np.ndarray]:
    """Tensors with the shapes a Llama checkpoint of this config stores (HF names)."""
    h, i, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    d = h // config["num_attention_heads"]
    kv = config["num_key_value_heads"] * d
    out = {
        "model.embed_tokens.weight": np.zeros((v, h), dtype),
        "model.norm.weight": np.ones(h, dtype),
        "lm_head.weight": np.zeros((v, h), dtype),
    }
    for layer in range(config["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        shapes = {
            "self_attn.q_proj.weight": (h, h),
            "self_attn.k_proj.weight": (kv, h),
            "self_attn.v_proj.weight": (kv, h),
            "self_attn.o_proj.weight": (h, h),
            "mlp.gate_proj.weight": (i, h),
            "mlp.up_proj.weight": (i, h),
            "mlp.down_proj.weight": (h, i),
            "input_layernorm.weight": (h,),
            "post_attention_layernorm.weight": (h,),
        }
        out.update({p + name: np.zeros(shape, dtype) for name, shape in shapes.items()})
    return out


def write_folder(folder: Path, config: dict, tensors: dict, shards: int = 1) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    names = sorted(tensors)
    if shards == 1:
        save_file(tensors, folder / "model.safetensors")
        return folder
    weight_map = {}
    for k in range(shards):
        part = {n: tensors[n] for n in names[k::shards]}
        file = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        save_file(part, folder / file)
        weight_map.update(dict.fromkeys(part, file))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return folder


def write_gguf(path: Path, config: dict) -> dict[str, int]:
    """A tiny Llama GGUF: Q8_0 matrices, F32 norms, F16 embedding; returns n_bytes per tensor."""
    h, i, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_embedding_length(h)
    writer.add_feed_forward_length(i)
    writer.add_head_count(config["num_attention_heads"])
    writer.add_head_count_kv(config["num_key_value_heads"])
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    writer.add_token_list([f"t{n}".encode() for n in range(v)])
    kv = config["num_key_value_heads"] * h // config["num_attention_heads"]
    sizes = {}
    tensors = {
        "token_embd.weight": np.zeros((v, h), np.float16),
        "output_norm.weight": np.ones(h, np.float32),
        "output.weight": np.zeros((v, h), np.float16),
    }
    for layer in range(config["num_hidden_layers"]):
        for name, shape in {
            "attn_q": (h, h),
            "attn_k": (kv, h),
            "attn_v": (kv, h),
            "attn_output": (h, h),
            "ffn_gate": (i, h),
            "ffn_up": (i, h),
            "ffn_down": (h, i),
        }.items():
            tensors[f"blk.{layer}.{name}.weight"] = np.zeros(shape, np.float32)
        tensors[f"blk.{layer}.attn_norm.weight"] = np.ones(h, np.float32)
        tensors[f"blk.{layer}.ffn_norm.weight"] = np.ones(h, np.float32)
    for name, array in tensors.items():
        if array.ndim == 2 and array.dtype == np.float32:
            q = gguf.quantize(array, gguf.GGMLQuantizationType.Q8_0)
            writer.add_tensor(name, q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
            sizes[name] = q.nbytes
        else:
            writer.add_tensor(name, array)
            sizes[name] = array.nbytes
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return sizes
