"""Where a model comes from: a catalog name, a local Hugging Face folder, a GGUF file or a Hub
id (hf:ORG/NAME). Every route ends in a ModelSpec, plus exact weight bytes when files say."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from infersize.catalog import Catalog, GpuSpec, KvDtype, ModelSpec, WeightFormat
from infersize.checkpoints import Checkpoint, load_folder
from infersize.deployment import Side, prepare_side
from infersize.errors import UnknownNameError


@dataclass(frozen=True)
class ModelSource:
    spec: ModelSpec
    checkpoint: Checkpoint | None = None  # None: a catalog entry

    @property
    def default_precision(self) -> str:
        if self.checkpoint and self.checkpoint.precision:
            return self.checkpoint.precision
        return self.spec.checkpoint_dtype or "bf16"


def _looks_like_path(name: str) -> bool:
    if not name.strip():
        return False
    return name.startswith((".", "/", "~")) or name.endswith(".gguf") or Path(name).exists()


@lru_cache(maxsize=64)
def _load(name: str) -> Checkpoint:
    if name.startswith("hf:"):
        from infersize.hub import load_hub

        return load_hub(name[3:])
    path = Path(name).expanduser()
    if path.suffix.lower() == ".gguf":
        from infersize.gguf_file import load_gguf

        return load_gguf(path)
    return load_folder(path)


def resolve_model(name: str, catalog: Catalog) -> ModelSource:
    """Catalog names first (ids, aliases, HF repo ids); then files and Hub ids."""
    try:
        return ModelSource(catalog.model(name))
    except UnknownNameError:
        if not (name.startswith("hf:") or _looks_like_path(name)):
            raise
    checkpoint = _load(name)
    return ModelSource(checkpoint.spec, checkpoint)


def _format(source: ModelSource, quant: str, catalog: Catalog) -> WeightFormat:
    """The catalog format, or the checkpoint's own type when the catalog lacks it (GGUF Q5_0,
    Q4_K_S ...): then its bytes come from the file and only the compute dtype is needed."""
    try:
        return catalog.weight_format(quant)
    except UnknownNameError:
        own = source.checkpoint.precision if source.checkpoint else None
        if quant != own or source.checkpoint.weights is None:
            raise
        total = source.checkpoint.weights.total
        bits = total * 8 / max(source.checkpoint.params_in_files or 1, 1)
        return WeightFormat(
            id=quant,
            name=f"{quant} (from the file)",
            linear_bits_per_weight=bits,
            embedding_bits=bits,
            lm_head_bits=bits,
            norm_bits=32,
            compute_dtype="fp16",
            exact=True,
        )


def resolve_side(
    name: str, quant: str, catalog: Catalog, kv: KvDtype, gpu: GpuSpec, tp: int = 1
) -> tuple[Side, ModelSource]:
    """`quant` 'auto' means the checkpoint's own precision. When the precision is the
    checkpoint's own and its files were read, the weights are the files' exact bytes."""
    source = resolve_model(name, catalog)
    quant = source.default_precision if quant.strip().lower() == "auto" else quant
    fmt = _format(source, quant, catalog)
    exact = None
    if source.checkpoint and source.checkpoint.weights and fmt.id == source.checkpoint.precision:
        exact = source.checkpoint.weights
    return prepare_side(source.spec, fmt, kv, gpu, tp, exact), source
