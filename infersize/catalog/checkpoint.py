"""Real checkpoints: a local Hugging Face folder (config.json + safetensors headers) and the
precision its quantization_config declares. Only headers are read, never the weights.

safetensors layout (huggingface/safetensors docs, "Format"): 8 bytes little-endian header size N,
N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then
the data. Offsets are checked against the file size, so a truncated file is an error, not a guess.
"""

from __future__ import annotations

import json
import math
import os
import struct
from pathlib import Path
from typing import Any

from infersize.catalog.hfconfig import CheckpointError, model_from_config
from infersize.catalog.records import ComponentBytes, Model
from infersize.files import InputFileError, open_regular, read_input
from infersize.record import record

DTYPE_BYTES = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "U16": 2,
    "U32": 4,
    "U64": 8,
    "F8_E8M0": 1,
    "F4": 0.5,
    "F6_E2M3": 0.75,
    "F6_E3M2": 0.75,
    "C64": 8,
}
MAX_HEADER_BYTES = 100 * 2**20


@record(kw_only=False)
class Tensor:
    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int

    @property
    def numel(self) -> int:
        count = 1
        for dim in self.shape:
            count *= dim
        return count


def read_safetensors_header(path: Path) -> list[Tensor]:
    """The tensors a .safetensors file declares, each validated: a known dtype, non-negative
    integer dimensions, offsets inside the data and as long as dtype × shape says."""
    try:
        fd = open_regular(path)
    except InputFileError as exc:
        raise CheckpointError(str(exc)) from None
    try:
        with os.fdopen(fd, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            prefix = handle.read(8)
            if len(prefix) < 8:
                raise CheckpointError(f"{path}: truncated safetensors file (no header)")
            (header_len,) = struct.unpack("<Q", prefix)
            if header_len > min(size - 8, MAX_HEADER_BYTES):
                raise CheckpointError(
                    f"{path}: corrupt or truncated safetensors header "
                    f"({header_len:,} header bytes in a {size:,}-byte file)"
                )
            header = json.loads(handle.read(header_len))
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read ({exc.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        raise CheckpointError(f"{path}: corrupt safetensors header (not JSON)") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: corrupt safetensors header (not a JSON object)")
    data_size = size - 8 - header_len
    return [
        _tensor(path, name, info, data_size)
        for name, info in header.items()
        if name != "__metadata__"
    ]


def _tensor(path: Path, name: str, info: Any, data_size: int) -> Tensor:
    """One header entry, checked against what the format allows and the file holds."""
    try:
        dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
    except (KeyError, TypeError, ValueError):
        raise CheckpointError(f"{path}: corrupt entry for tensor '{name}'") from None
    if not isinstance(dtype, str) or dtype not in DTYPE_BYTES:
        raise CheckpointError(f"{path}: tensor '{name}' has an unknown dtype {dtype!r}")
    ints = [begin, end, *shape] if isinstance(shape, list) else None
    if ints is None or not all(type(v) is int and v >= 0 for v in ints):
        raise CheckpointError(f"{path}: tensor '{name}': shape and offsets must be integers >= 0")
    tensor = Tensor(name, dtype, tuple(shape), end - begin)
    if begin > end:
        raise CheckpointError(f"{path}: corrupt: tensor '{name}' ends before it begins")
    if end > data_size:
        raise CheckpointError(
            f"{path}: truncated: tensor '{name}' ends at byte {end:,} of {data_size:,} data bytes"
        )
    expected = tensor.numel * DTYPE_BYTES[dtype]
    if math.ceil(expected) != tensor.nbytes:
        raise CheckpointError(
            f"{path}: tensor '{name}' declares {tensor.nbytes:,} bytes, but {dtype} × "
            f"{list(shape)} is {math.ceil(expected):,}"
        )
    return tensor


def weight_bytes_from_tensors(tensors: list[Tensor], tied: bool) -> ComponentBytes:
    """Exact bytes by component, from tensor names: what an engine loads. A tied checkpoint
    that still stores lm_head (Qwen3-0.6B does) loads one copy, so the duplicate is skipped."""
    embedding = lm_head = linear = small = 0
    for t in tensors:
        name = t.name
        if "embed_tokens" in name or name.endswith(("wte.weight", "token_embd.weight")):
            embedding += t.nbytes
        elif name.startswith("lm_head") or name in ("output.weight",):
            lm_head += 0 if tied else t.nbytes
        elif len(t.shape) <= 1:
            small += t.nbytes
        else:
            linear += t.nbytes
    return ComponentBytes(embedding=embedding, lm_head=lm_head, linear=linear, small=small)


def precision_of(config: dict[str, Any]) -> str | None:
    """The weight format a checkpoint's quantization_config (or dtype) declares."""
    quant = config.get("quantization_config")
    if isinstance(quant, dict):
        method = str(quant.get("quant_method", "")).lower()
        if method in ("gptq", "awq", "marlin", "gptq_marlin", "awq_marlin"):
            bits = quant.get("bits", quant.get("w_bit"))
            return "int8" if bits == 8 else "int4"
        if method in ("fp8", "fbgemm_fp8"):
            return "fp8"
        if method == "bitsandbytes":
            return "nf4" if quant.get("load_in_4bit") else "int8"
        if method in ("mxfp4", "nvfp4"):
            return method
        if method == "compressed-tensors":
            for group in (quant.get("config_groups") or {}).values():
                weights = group.get("weights") or {}
                bits, kind = weights.get("num_bits"), weights.get("type")
                if bits == 4:
                    return "nvfp4" if kind == "float" else "int4"
                if bits == 8:
                    return "fp8" if kind == "float" else "int8"
        return None
    dtype = str(config.get("torch_dtype") or config.get("dtype") or "")
    return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(dtype)


@record
class Checkpoint:
    """A model read from real files: its architecture, precision and, when the files say, its
    exact weight bytes and parameter count."""

    model: Model
    precision: str | None
    weights: ComponentBytes | None  # exact, whole model
    params_in_files: int | None  # elements stored (packed formats store fewer than params)
    origin: str


def _read_json(path: Path) -> Any:
    try:
        return json.loads(read_input(path))
    except InputFileError as exc:
        raise CheckpointError(str(exc)) from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        raise CheckpointError(f"{path}: not valid JSON") from None


def _safetensors_files(folder: Path) -> list[Path]:
    """The shards an index names (each a plain file name inside the folder), or every
    .safetensors file there."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        weight_map = _read_json(index)
        weight_map = weight_map.get("weight_map") if isinstance(weight_map, dict) else None
        if not isinstance(weight_map, dict) or not all(
            isinstance(v, str) for v in weight_map.values()
        ):
            raise CheckpointError(f"{index}: corrupt index (no weight_map)")
        names = sorted(set(weight_map.values()))
        outside = [n for n in names if Path(n).name != n or n in ("", ".", "..")]
        if outside:
            raise CheckpointError(f"{index}: shard {outside[0]!r} is not a file in the folder")
        files = [folder / name for name in names]
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            raise CheckpointError(f"{index}: shard {missing[0]} is missing")
        return files
    return sorted(folder.glob("*.safetensors"))


def load_folder(folder: Path) -> Checkpoint:
    config_path = folder / "config.json"
    if not folder.exists():
        raise CheckpointError(f"{folder}: no such folder")
    if not config_path.is_file():
        raise CheckpointError(
            f"{folder}: no config.json there (is it a Hugging Face model folder?)"
        )
    config = _read_json(config_path)
    name = folder.resolve().name
    model = model_from_config(config, name.lower(), str(folder), str(config_path))
    tensors = [t for f in _safetensors_files(folder) for t in read_safetensors_header(f)]
    weights = weight_bytes_from_tensors(tensors, model.tie_word_embeddings) if tensors else None
    params = sum(t.numel for t in tensors) if tensors else None
    return Checkpoint(
        model=model,
        precision=precision_of(config),
        weights=weights,
        params_in_files=params,
        origin="local folder",
    )
