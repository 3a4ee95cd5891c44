"""A sweep folder's tables and manifest as they are read back, checked against what this release
writes: every declared column present with values of its kind, no NaN or infinity, the columns
that name a row never null, counts where counts belong; the manifest's capacity figures within
the bounds a sweep file is held to. A table someone edited, truncated or wrote with another tool
is refused in one line naming the file and the column, never read into a wrong answer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from infersize.bounds import HEADROOM, REQUESTS, SEED, Bound
from infersize.errors import InfersizeError
from infersize.sweep.columns import IDENTITY, Column

# columns that say which row a row is, beyond the deployment's identity
KEYS = frozenset({*IDENTITY, "workload", "sla", "capacity_source"})
# quantities no row holds below zero (a saving of GPUs may be negative: speculation costs them)
COUNTED_IN = frozenset({"GPUs", "replicas", "requests/s", "ms", "USD per GPU-hour", "USD/hour"})
SIGNED = frozenset({"speculation_saves_gpus"})
LEAST = {"tp": 1}  # and a deployment has at least one GPU
KINDS = {"str": "text", "int": "whole numbers", "float": "numbers", "bool": "true/false values"}
MANIFEST_FIGURES: Mapping[str, Bound] = {"headroom": HEADROOM, "requests": REQUESTS, "seed": SEED}


class DamagedTableError(InfersizeError):
    """A table or manifest that is not what a sweep of this release writes."""


def _of_kind(column: Column, dtype: pl.DataType) -> bool:
    if dtype == pl.Null:  # every value null: the checks of nulls below decide
        return True
    return {
        "str": dtype == pl.String,
        "int": dtype.is_integer(),
        "float": dtype.is_float() or dtype.is_integer(),
        "bool": dtype == pl.Boolean,
    }[column.kind]


def _problem(column: Column, values: pl.Series) -> str | None:
    if not _of_kind(column, values.dtype):
        return f"holds {values.dtype} values, not {KINDS[column.kind]}"
    if column.name in KEYS and values.null_count():
        return "is empty in some rows"
    if values.dtype.is_float() and not values.drop_nulls().is_finite().all():
        return "holds NaN or infinite values"
    counted = column.unit in COUNTED_IN and column.name not in SIGNED
    if values.dtype.is_numeric() and (counted or column.name in LEAST):
        least = LEAST.get(column.name, 0)
        if (values.drop_nulls() < least).any():
            return f"holds values below {least}"
    return None


def conformed(frame: pl.DataFrame, columns: Sequence[Column], path: Path) -> pl.DataFrame:
    """`frame` (upgraded to this release's schema) if it holds `columns` as this release
    writes them."""
    for column in columns:
        if column.name not in frame.columns:
            raise DamagedTableError(
                f"{path}: column '{column.name}' is missing: not a table infersize wrote, or "
                "one edited since; run the sweep again"
            )
        if problem := _problem(column, frame[column.name]):
            raise DamagedTableError(
                f"{path}: column '{column.name}' {problem}: not a table infersize wrote, or "
                "one edited since; run the sweep again"
            )
    return frame


def checked_manifest(manifest: dict[str, Any], path: Path) -> dict[str, Any]:
    """`manifest` if its capacity figures are what a sweep file may hold."""
    figures = manifest.get("capacity")
    if figures is None:
        return manifest
    if not isinstance(figures, dict):
        raise DamagedTableError(f"{path}: damaged (capacity is not an object); run the sweep again")
    for name, bound in MANIFEST_FIGURES.items():
        value = figures.get(name)
        number = isinstance(value, int | float) and not isinstance(value, bool)
        whole = bound.kind is not int or isinstance(value, int)
        if value is not None and not (number and whole and bound.contains(value)):
            raise DamagedTableError(
                f"{path}: damaged (capacity.{name} must be in {bound.range_text()}, got "
                f"{value!r}); run the sweep again"
            )
    return manifest
