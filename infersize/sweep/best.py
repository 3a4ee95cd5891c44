"""`infersize best`: the best draft pair per GPU (and target), read back from a sweep's tables;
and the slices the report and the frontier figure draw."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from infersize.catalog.store import load_catalog
from infersize.errors import InfersizeError, UnknownNameError


@dataclass(frozen=True)
class Selection:
    context_length: int
    batch_size: int
    acceptance_rate: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "context_length": self.context_length,
            "batch_size": self.batch_size,
            "acceptance_rate": self.acceptance_rate,
        }


def _nearest(values: list[float], wanted: float) -> float:
    return min(values, key=lambda v: (abs(v - wanted), v))


def _read(out_dir: Path, table: str) -> pl.DataFrame:
    path = out_dir / f"{table}.parquet"
    if not path.is_file():
        raise InfersizeError(
            f"{out_dir}: no {table}.parquet there; run 'infersize sweep run' first"
        )
    return pl.read_parquet(path)


def _select(
    frame: pl.DataFrame, alpha: float | None, context: int | None, batch: int | None
) -> Selection:
    """Defaults: the smallest context and batch of the sweep, and the α nearest 0.7."""
    for column, value, flag in (
        ("context_length", context, "--context-length"),
        ("batch_size", batch, "--batch-size"),
    ):
        swept = sorted(frame[column].unique())
        if value is not None and value not in swept:
            raise InfersizeError(
                f"{flag} {value} is not in the sweep; it has {', '.join(str(v) for v in swept)}"
            )
    chosen = _nearest(sorted(frame["acceptance_rate"].unique()), 0.7 if alpha is None else alpha)
    if alpha is not None and abs(chosen - alpha) > 1e-9:
        raise InfersizeError(f"α {alpha:g} is not in the sweep; nearest is {chosen:g}")
    return Selection(
        context if context is not None else int(frame["context_length"].min()),  # type: ignore[arg-type]
        batch if batch is not None else int(frame["batch_size"].min()),  # type: ignore[arg-type]
        chosen,
    )


def best_pairs(
    out_dir: Path,
    gpu: str | None = None,
    target: str | None = None,
    alpha: float | None = None,
    context: int | None = None,
    batch: int | None = None,
    rank: int = 1,
) -> tuple[pl.DataFrame, Selection | None]:
    """Rows of best_pairs at one (context, batch, α) and the selection used."""
    frame = _read(out_dir, "best_pairs")
    for column, value in (("gpu", gpu), ("target", target)):
        if value is not None:
            frame = _match(frame, column, _catalog_id(column, value))
    if frame.is_empty():
        return frame, None
    chosen = _select(frame, alpha, context, batch)
    for column, value in chosen.as_dict().items():
        frame = frame.filter(pl.col(column) == value)
    frame = frame.filter(pl.col("rank") <= rank).sort(["gpu", "target", "rank"])
    return frame, chosen


def frontier_rows(out_dir: Path, gpu: str, selection: Selection) -> pl.DataFrame:
    """One GPU's frontier rows at a selection, by target and rising memory, with `on_front`:
    the rows that raise the target's best speedup so far (its Pareto steps across TP,
    precisions and KV dtypes)."""
    frame = _read(out_dir, "frontier").filter(pl.col("gpu") == gpu)
    for column, value in selection.as_dict().items():
        frame = frame.filter(pl.col(column) == value)
    frame = frame.sort(["target", "combined_gib", "speedup"], descending=[False, False, True])
    frame = frame.with_columns(best_so_far=pl.col("speedup").cum_max().over("target"))
    previous = pl.col("best_so_far").shift(1).over("target")
    on_front = previous.is_null() | (pl.col("best_so_far") > previous)
    return frame.with_columns(on_front=on_front).drop("best_so_far")


def read_manifest(out_dir: Path) -> dict[str, Any]:
    path = out_dir / "manifest.json"
    if not path.is_file():
        raise InfersizeError(f"{out_dir}: no manifest.json there; run 'infersize sweep run' first")
    manifest: dict[str, Any] = json.loads(path.read_text())
    return manifest


def _catalog_id(column: str, value: str) -> str:
    """A catalog alias ('h100', 'Qwen/Qwen2.5-7B') becomes the id the tables hold."""
    catalog = load_catalog()
    try:
        return catalog.gpu(value).id if column == "gpu" else catalog.model(value).id
    except InfersizeError:
        return value


def _match(frame: pl.DataFrame, column: str, value: str) -> pl.DataFrame:
    known = sorted(frame[column].unique().to_list())
    lowered = {k.lower(): k for k in known}
    if value.lower() not in lowered:
        raise UnknownNameError(column, value, known, hint=f"in this sweep: {', '.join(known)}")
    return frame.filter(pl.col(column) == lowered[value.lower()])
