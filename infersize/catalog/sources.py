"""Where a model comes from: a catalog name, a local Hugging Face folder, a GGUF file or a Hub
id (hf:ORG/NAME). Every route ends in a Model record, plus exact weight bytes when files say."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from infersize.catalog.names import formula_problem
from infersize.catalog.records import ComponentBytes, Model, WeightFormat
from infersize.catalog.store import Catalog
from infersize.errors import UnknownNameError
from infersize.record import record

if TYPE_CHECKING:  # checkpoint readers load only for names that are files or Hub ids
    from infersize.catalog.checkpoint import Checkpoint


@record(kw_only=False)
class ModelSource:
    model: Model
    checkpoint: Checkpoint | None = None  # None: a catalog entry

    @property
    def default_precision(self) -> str:
        if self.checkpoint and self.checkpoint.precision:
            return self.checkpoint.precision
        return self.model.checkpoint_dtype or "bf16"

    def exact_weights(self, fmt: WeightFormat) -> ComponentBytes | None:
        """The files' exact bytes when `fmt` is the checkpoint's own precision and its files
        were read; None when the format's bits per weight must be used."""
        point = self.checkpoint
        if point is None or point.weights is None or fmt.id != point.precision:
            return None
        return point.weights


def _exists(name: str) -> bool:
    try:
        return Path(name).exists()
    except (OSError, ValueError):  # a name too long for a path, or with a NUL byte
        return False


def _looks_like_path(name: str) -> bool:
    if not name.strip():
        return False
    return name.startswith((".", "/", "~")) or name.endswith(".gguf") or _exists(name)


def _check_table_name(name: str) -> None:
    """A checkpoint's name as given, its folder's or file's name and a Hub id's parts name it in
    the tables: none may start like a spreadsheet formula."""
    from infersize.catalog.hfconfig import CheckpointError

    hub = name.startswith("hf:")
    parts = {"name": name}
    if hub:
        parts |= dict(zip(("organisation", "repository"), name[3:].split("/", 1), strict=False))
    else:
        parts["file or folder name"] = Path(name.rstrip("/")).name
    for part, text in parts.items():
        if problem := formula_problem(text):
            raise CheckpointError(f"{name}: its {part} {problem}")


@lru_cache(maxsize=64)
def _load(name: str) -> Checkpoint:
    from infersize.catalog.checkpoint import load_folder
    from infersize.catalog.hfconfig import CheckpointError

    if name.startswith("hf:"):
        from infersize.catalog.hub import load_hub

        return load_hub(name[3:])
    try:
        path = Path(name).expanduser()
    except RuntimeError:  # ~user of no such user
        raise CheckpointError(f"{name}: cannot expand '~' (no such user)") from None
    if path.suffix.lower() == ".gguf":
        from infersize.catalog.gguf_file import load_gguf

        return load_gguf(path)
    return load_folder(path)


def resolve_model(name: str, catalog: Catalog) -> ModelSource:
    """Catalog names first (ids, aliases, HF repo ids); then files and Hub ids."""
    try:
        return ModelSource(catalog.model(name))
    except UnknownNameError:
        if not (name.startswith("hf:") or _looks_like_path(name)):
            raise
    _check_table_name(name)
    checkpoint = _load(name)
    return ModelSource(checkpoint.model, checkpoint)


def resolve_format(source: ModelSource, quant: str, catalog: Catalog) -> WeightFormat:
    """The catalog format ('auto': the checkpoint's own), or the checkpoint's own type when the
    catalog lacks it (GGUF Q5_0, Q4_K_S ...): then its bytes come from the file and only the
    compute dtype is needed."""
    quant = source.default_precision if quant.strip().lower() == "auto" else quant
    try:
        return catalog.weight_format(quant)
    except UnknownNameError:
        point = source.checkpoint
        if point is None or quant != point.precision or point.weights is None:
            raise
        bits = point.weights.total * 8 / max(point.params_in_files or 1, 1)
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
