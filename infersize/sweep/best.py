"""`infersize best`: the best draft pair per GPU (and target), read back from a sweep's tables;
and the slices the report and the frontier figure draw.

Rows are compared within an acceptance scenario: with one what-if list of α for every pair, a
scenario is one α (select it with `alpha`); when pairs bring their own α (their list, a
published figure or the prior), scenario i holds each pair's i-th α (select it with
`scenario`; the default is the middle one, the expected α)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import field
from pathlib import Path
from typing import Any

import polars as pl

from infersize.catalog.store import load_catalog
from infersize.core.ranking import RANKED_BY, ranking_order
from infersize.errors import InfersizeError, UnknownNameError
from infersize.files import InputFileError, open_regular, read_input
from infersize.record import record
from infersize.sweep.columns import Column
from infersize.sweep.readback import checked_manifest, conformed
from infersize.sweep.tables import OUTPUT_TABLES
from infersize.sweep.upgrade import tables_schema, upgrade

RUN = ("sweep run",)  # the command that makes a sweep's output folder


@record
class Filters:
    """Column filters a user may give; None: any."""

    gpu: str | None = None
    target: str | None = None
    tp: int | None = None
    target_quant: str | None = None
    draft_quant: str | None = None
    engine: str | None = None
    context_length: int | None = None
    batch_size: int | None = None
    alpha: float | None = None
    scenario: int | None = None


CATALOG_SCENARIOS = ("low", "expected", "high")  # α from the acceptance catalog, per pair


@record
class Selection:
    context_length: int
    batch_size: int
    acceptance_scenario: int
    acceptance_rate: float | None  # the scenario's α when every pair shares it
    scenario_name: str = ""  # low, expected, high when α comes from the acceptance catalog

    def as_dict(self) -> dict[str, Any]:
        return {
            "context_length": self.context_length,
            "batch_size": self.batch_size,
            "acceptance_scenario": self.acceptance_scenario,
            "acceptance_rate": self.acceptance_rate,
        }

    def describe(self) -> str:
        if self.acceptance_rate is not None:
            alpha = f"α {self.acceptance_rate:g}"
        elif self.scenario_name:
            alpha = f"the {self.scenario_name} α of each pair"
        else:
            alpha = f"acceptance scenario {self.acceptance_scenario} (each pair's own α)"
        return f"context {self.context_length}, batch {self.batch_size}, {alpha}"


@record(kw_only=False)
class BestPairs:
    rows: pl.DataFrame  # best_pairs rows at the selection, ranks up to the one asked
    selection: Selection | None  # None: nothing matched the filters
    notes: list[str] = field(default_factory=list)


def _parquet(path: Path) -> pl.DataFrame:
    """A sweep table, or one line saying it is damaged (a truncated copy, another file)."""
    try:
        os.close(open_regular(path))
        return pl.read_parquet(path)
    except InputFileError as exc:
        raise InfersizeError(str(exc)) from None
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        reason = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise InfersizeError(
            f"{path}: not a readable Parquet table ({reason}); run the sweep again"
        ) from None


def read_table(out_dir: Path, table: str, columns: Sequence[Column] | None = None) -> pl.DataFrame:
    """A table of the sweep, as this release reads it (sweep/upgrade.py), holding `columns`
    (a decode table's own by default) as this release writes them (sweep/readback.py)."""
    path = out_dir / f"{table}.parquet"
    if not path.is_file():
        raise InfersizeError(
            f"{out_dir}: no {table}.parquet there; run {{sweep run}} first", commands=RUN
        )
    frame = upgrade(table, _parquet(path), _schema(out_dir))
    if columns is None and table in OUTPUT_TABLES:
        columns = OUTPUT_TABLES[table].columns
    return conformed(frame, columns or (), path)


def _schema(out_dir: Path) -> int:
    """The tables' schema its manifest records (a folder of tables alone: the first)."""
    if not (out_dir / "manifest.json").is_file():
        return 1
    return tables_schema(read_manifest(out_dir))


def _coverage(out_dir: Path) -> pl.DataFrame | None:
    """The coverage table, or None where the sweep wrote none."""
    return read_table(out_dir, "coverage") if (out_dir / "coverage.parquet").is_file() else None


def read_manifest(out_dir: Path) -> dict[str, Any]:
    path = out_dir / "manifest.json"
    if not path.is_file():
        raise InfersizeError(
            f"{out_dir}: no manifest.json there; run {{sweep run}} first", commands=RUN
        )
    try:
        manifest = json.loads(read_input(path))
    except InputFileError as exc:
        raise InfersizeError(str(exc)) from None
    except (ValueError, RecursionError):
        raise InfersizeError(f"{path}: damaged (not JSON); run the sweep again") from None
    if not isinstance(manifest, dict):
        raise InfersizeError(f"{path}: damaged (not a JSON object); run the sweep again")
    return checked_manifest(manifest, path)


def ranked(frame: pl.DataFrame) -> pl.DataFrame:
    """The rows best first, by the one ranking rule (core/ranking.py)."""
    return frame[ranking_order(*(frame[name].to_numpy() for name in RANKED_BY))]


def _uniform_alpha(frame: pl.DataFrame, scenario: int) -> float | None:
    alphas = frame.filter(pl.col("acceptance_scenario") == scenario)["acceptance_rate"].unique()
    return float(alphas[0]) if alphas.len() == 1 else None


def _check_swept(frame: pl.DataFrame, column: str, value: object, setting: str) -> None:
    swept = sorted(frame[column].unique().to_list())
    if value is not None and value not in swept:
        raise InfersizeError(
            f"{{{setting}}} {value} is not in the sweep; it has {', '.join(str(v) for v in swept)}",
            settings=(setting,),
        )


def _scenario(frame: pl.DataFrame, filters: Filters) -> int:
    """The scenario asked (by α or by position), else α nearest 0.7 (one α per scenario) or
    the middle scenario (each pair's own α)."""
    scenarios = sorted(frame["acceptance_scenario"].unique().to_list())
    uniform = {s: _uniform_alpha(frame, s) for s in scenarios}
    shared = all(a is not None for a in uniform.values())
    if filters.scenario is not None:
        _check_swept(frame, "acceptance_scenario", filters.scenario, "scenario")
        return filters.scenario
    if filters.alpha is None:
        if not shared:
            return int(scenarios[len(scenarios) // 2])
        return int(min(scenarios, key=lambda s: (abs((uniform[s] or 0.0) - 0.7), s)))
    if not shared:
        raise InfersizeError(
            "this sweep gives each pair its own α: choose {scenario} "
            f"{scenarios[0]}..{scenarios[-1]} instead of {{alpha}}",
            settings=("scenario", "alpha"),
        )
    wanted = filters.alpha
    nearest = min(scenarios, key=lambda s: (abs((uniform[s] or 0.0) - wanted), s))
    if abs((uniform[nearest] or 0.0) - wanted) > 1e-9:
        raise InfersizeError(
            f"α {wanted:g} is not in the sweep; nearest is {uniform[nearest] or 0.0:g}"
        )
    return int(nearest)


def select(frame: pl.DataFrame, filters: Filters) -> Selection:
    """Defaults: the smallest context and batch of the sweep, and the scenario of _scenario."""
    _check_swept(frame, "context_length", filters.context_length, "context_length")
    _check_swept(frame, "batch_size", filters.batch_size, "batch_size")
    scenario = _scenario(frame, filters)
    from_catalog = set(frame["acceptance_source"].unique()) <= {"published", "prior", "method"}
    n_scenarios = frame["acceptance_scenario"].max()
    named = from_catalog and n_scenarios == len(CATALOG_SCENARIOS) - 1
    return Selection(
        context_length=filters.context_length or int(frame["context_length"].min()),  # type: ignore[arg-type]
        batch_size=filters.batch_size or int(frame["batch_size"].min()),  # type: ignore[arg-type]
        acceptance_scenario=scenario,
        acceptance_rate=_uniform_alpha(frame, scenario),
        scenario_name=CATALOG_SCENARIOS[scenario] if named else "",
    )


def _at(frame: pl.DataFrame, selection: Selection) -> pl.DataFrame:
    return frame.filter(
        (pl.col("context_length") == selection.context_length)
        & (pl.col("batch_size") == selection.batch_size)
        & (pl.col("acceptance_scenario") == selection.acceptance_scenario)
    )


def filtered(out_dir: Path, table: str, filters: Filters) -> pl.DataFrame:
    frame = read_table(out_dir, table)
    names = {}
    for column in ("gpu", "target"):
        value = getattr(filters, column)
        if value is not None:
            names[column] = _catalog_id(column, value)
            frame = _match(frame, column, names, out_dir)
    for column in ("tp", "target_quant", "draft_quant", "engine"):
        value = getattr(filters, column)
        if value is not None:
            _check_swept(frame, column, value, column)
            frame = frame.filter(pl.col(column) == value)
    return frame


def best_pairs(out_dir: Path, filters: Filters, rank: int = 1) -> BestPairs:
    """Rows of best_pairs at one (context, batch, scenario), ranks 1..`rank`."""
    frame = filtered(out_dir, "best_pairs", filters)
    if frame.is_empty():
        return BestPairs(frame, None)
    asked = filters.context_length
    if asked is not None and asked not in frame["context_length"]:
        notes = context_notes(out_dir, filters, asked)
        if notes:  # swept at that context, but no row there is one the models hold
            return BestPairs(frame.clear(), None, notes)
    chosen = select(frame, filters)
    rows = _at(frame, chosen).filter(pl.col("rank") <= rank).sort(["gpu", "target", "rank"])
    kept = int(read_manifest(out_dir).get("best_top_n", rank))
    notes = context_notes(out_dir, filters, chosen.context_length)
    if rank > kept:
        notes.append(f"only the top {kept} of each group were kept (output.best_top_n: {kept})")
    return BestPairs(rows, chosen, notes)


def context_notes(out_dir: Path, filters: Filters, context_length: int) -> list[str]:
    """The targets swept (within the GPU and target filters) that cannot hold this context:
    none of their rows ranks there."""
    coverage = _coverage(out_dir)
    if coverage is None:
        return []
    for column in ("gpu", "target"):
        value = getattr(filters, column)
        if value is not None:
            wanted = _catalog_id(column, value).lower()
            coverage = coverage.filter(pl.col(column).str.to_lowercase() == wanted)
    short = (
        coverage.filter(pl.col("target_max_context_tokens") < context_length)
        .group_by("target")
        .agg(pl.first("target_max_context_tokens"))
        .sort("target")
    )
    return [
        f"{target} holds at most {limit:,} tokens (max_position_embeddings): none of its rows "
        f"is within max context at context {context_length:,}"
        for target, limit in short.iter_rows()
    ]


def beyond_context_rows(out_dir: Path) -> tuple[int, int]:
    """Rows of the sweep at a context longer than their target or draft holds, and all rows
    scored (coverage)."""
    coverage = _coverage(out_dir)
    if coverage is None:
        return 0, 0
    return int(coverage["beyond_max_context_rows"].sum()), int(coverage["rows"].sum())


def frontier_rows(
    out_dir: Path, gpu: str, selection: Selection, frontier: pl.DataFrame | None = None
) -> pl.DataFrame:
    """One GPU's frontier rows at a selection, by target and rising memory, with `on_front`:
    the rows that raise the target's best speedup so far (its Pareto steps across TP,
    precisions and KV dtypes). `frontier`: the table, when the caller has read it already."""
    table = read_table(out_dir, "frontier") if frontier is None else frontier
    frame = _at(table.filter(pl.col("gpu") == gpu), selection)
    frame = frame.sort(["target", "combined_gib", "speedup"], descending=[False, False, True])
    frame = frame.with_columns(best_so_far=pl.col("speedup").cum_max().over("target"))
    previous = pl.col("best_so_far").shift(1).over("target")
    on_front = previous.is_null() | (pl.col("best_so_far") > previous)
    return frame.with_columns(on_front=on_front).drop("best_so_far")


def _catalog_id(column: str, value: str) -> str:
    """A catalog alias ('h100', 'Qwen/Qwen2.5-7B') becomes the id the tables hold."""
    catalog = load_catalog()
    try:
        return catalog.gpu(value).id if column == "gpu" else catalog.model(value).id
    except InfersizeError:
        return value


def match_name(frame: pl.DataFrame, column: str, value: str, out_dir: Path) -> pl.DataFrame:
    """The rows of `frame` whose gpu or target is `value`, a catalog alias or id in any case; a
    name not among them is one line: swept but never fitting, not in this sweep, or unknown."""
    return _match(frame, column, {column: _catalog_id(column, value)}, out_dir)


def _match(frame: pl.DataFrame, column: str, names: dict[str, str], out_dir: Path) -> pl.DataFrame:
    value = names[column]
    known = sorted(frame[column].unique().to_list())
    lowered = {k.lower(): k for k in known}
    if value.lower() in lowered:
        return frame.filter(pl.col(column) == lowered[value.lower()])
    swept = never_fits(out_dir, names)
    if swept is not None:
        raise InfersizeError(swept)
    if _in_catalog(column, value):
        raise InfersizeError(
            f"{{{column}}} {value} is not in this sweep; it has {', '.join(known)}",
            settings=(column,),
        )
    raise UnknownNameError(column, value, known, hint=f"in this sweep: {', '.join(known)}")


def _in_catalog(column: str, value: str) -> bool:
    catalog = load_catalog()
    table = catalog.gpus if column == "gpu" else catalog.models
    return value in table.records


def never_fits(out_dir: Path, names: dict[str, str]) -> str | None:
    """When the GPU or target asked was swept but no row fits: what came closest (the
    coverage table)."""
    coverage = _coverage(out_dir)
    if coverage is None:
        return None
    for column, value in names.items():
        coverage = coverage.filter(pl.col(column).str.to_lowercase() == value.lower())
    if coverage.is_empty():
        return None
    asked = " ".join(f"{column} {value}" for column, value in names.items())
    if coverage["fitting_rows"].sum():
        if coverage["fitting_within_max_context_rows"].sum():
            return f"{asked} was swept but no draft beats plain decoding there"
        return (
            f"{asked} was swept but fits only at contexts longer than its target or draft "
            f"holds ({coverage['target'][0]}: {coverage['target_max_context_tokens'][0]:,} "
            "tokens), so no row ranks"
        )
    close = coverage.sort("closest_share_of_budget").row(0, named=True)
    return (
        f"{asked} was swept but never fits: the closest, {close['target']} "
        f"{close['closest_target_quant']} tp{close['closest_tp']} with {close['closest_draft']} "
        f"{close['closest_draft_quant']} (KV {close['closest_kv_dtype']}) on {close['gpu']} at "
        f"context {close['closest_context_length']}, batch {close['closest_batch_size']}, "
        f"needs {close['closest_share_of_budget']:.0%} of the memory budget"
    )
