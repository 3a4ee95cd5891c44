"""Arrow tables of a scored chunk: frontier and best-pair rows (and the optional cells), with
units in the column names. Built from numpy columns plus per-setting strings (dictionary-encoded,
then cast to plain strings so every BI tool reads them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from infersize.catalog.store import load_catalog
from infersize.core.arrays import BoolArray, FloatArray, IntArray
from infersize.core.confidence import decode_confidence
from infersize.core.memory import verdict
from infersize.core.ranking import RANKED_BY, ranking_keys
from infersize.record import record
from infersize.sweep.arrow_types import arrow_schema
from infersize.sweep.columns import (
    BY_NAME,
    COLUMNS,
    COVERAGE_COLUMNS,
    IDENTITY,
    SETTING_COLUMNS,
    Column,
    table_columns,
)
from infersize.sweep.reduce import codes, pareto_front, top_n
from infersize.sweep.score import ChunkTask, Scored

if TYPE_CHECKING:
    import polars as pl

    from infersize.sweep.settings import Setting


def _per_setting(values: Sequence[object], setting: IntArray) -> pa.Array:
    """A string column from one value per setting and the row → setting index."""
    return pa.DictionaryArray.from_arrays(
        pa.array(setting.astype(np.int32)), pa.array([str(v) for v in values])
    ).cast(pa.string())


def _float(values: FloatArray) -> pa.Array:
    values = np.asarray(values, dtype=np.float64)
    return pa.array(values, mask=~np.isfinite(values))


def _setting_columns(
    settings: Sequence[Setting], s: IntArray, names: Sequence[str] = SETTING_COLUMNS
) -> dict[str, pa.Array]:
    """The identity columns that are a Setting's attributes, for the rows whose settings are
    `s`: whole numbers as integers, the rest as text."""
    out = {}
    for name in names:
        values = [getattr(x, name) for x in settings]
        if IDENTITY[name].kind == "int":
            out[name] = pa.array(np.asarray(values, dtype=np.int64)[s])
        else:
            out[name] = _per_setting(values, s)
    return out


def _identity(task: ChunkTask, s: IntArray) -> dict[str, pa.Array]:
    """The per-setting string and integer columns of the rows whose settings are `s`."""
    settings = task.settings
    catalog = load_catalog(tuple(task.scoring.catalog_files))
    return {
        **_setting_columns(settings, s),
        "gpu_name": _per_setting([catalog.gpu(x.gpu).name for x in settings], s),
        "engine": _per_setting([task.scoring.engine.engine] * len(settings), s),
        "speedup_model": _per_setting([task.scoring.speedup_model] * len(settings), s),
        "support": _per_setting([x.support for x in settings], s),
        "acceptance_source": _per_setting([x.alpha_source for x in settings], s),
    }


def _context_limits(task: ChunkTask) -> tuple[IntArray, FloatArray]:
    """Per setting: the target's max context, and the draft's (NaN for heads and n-gram
    lookup, whose positions are the target's)."""
    target = [x.target_max_context_tokens for x in task.settings]
    draft = [x.draft_max_context_tokens for x in task.settings]
    return (
        np.asarray(target, dtype=np.int64),
        np.asarray([np.nan if d is None else d for d in draft], dtype=np.float64),
    )


def within_max_context(task: ChunkTask, rows: IntArray) -> BoolArray:
    """Whether each row's context is one its target and draft hold."""
    shape = (len(task.settings), len(task.contexts), len(task.batches), task.scenarios)
    s, c, _, _ = np.unravel_index(rows, shape)
    target, draft = _context_limits(task)
    limit = np.fmin(target.astype(np.float64), draft)
    return np.asarray(task.contexts, dtype=np.float64)[c] <= limit[s]


def _confidence(task: ChunkTask, s: IntArray, b: IntArray) -> pa.Array:
    """`spec`'s confidence rule (core/confidence.py) for each row's target and batch."""
    catalog = load_catalog(tuple(task.scoring.catalog_files))
    models = [catalog.model(x.target) for x in task.settings]
    experts = np.asarray([m.num_experts or 0 for m in models], dtype=np.float64)
    per_token = np.asarray([m.num_experts_per_tok or 0 for m in models], dtype=np.float64)
    batch = np.asarray(task.batches, dtype=np.float64)[b]
    return pa.array(decode_confidence(experts[s], per_token[s], batch), pa.string())


def _cell_key(task: ChunkTask, s: IntArray, c: IntArray, b: IntArray, a: IntArray) -> pa.Array:
    """gpu|tp|target@quant|draft@quant|kv=…|ctx=…|b=…|a=… (α of the row's scenario)."""
    prefix = _per_setting(
        [
            f"{x.gpu}|tp{x.tp}|{x.target}@{x.target_quant}|{x.draft}@"
            f"{x.draft_quant}|kv={x.kv_dtype}"
            for x in task.settings
        ],
        s,
    )
    grid = c * len(task.batches) + b
    middle = pa.DictionaryArray.from_arrays(
        pa.array(grid.astype(np.int32)),
        pa.array([f"ctx={cc}|b={bb}" for cc in task.contexts for bb in task.batches]),
    ).cast(pa.string())
    alphas = pa.DictionaryArray.from_arrays(
        pa.array((s * task.scenarios + a).astype(np.int32)),
        pa.array([f"a={alpha:g}" for x in task.settings for alpha in x.alphas]),
    ).cast(pa.string())
    return pc.binary_join_element_wise(prefix, middle, alphas, "|")


def _rows_table(task: ChunkTask, scored: Scored, rows: IntArray, rank: IntArray | None) -> pa.Table:
    shape = (len(task.settings), len(task.contexts), len(task.batches), task.scenarios)
    s, c, b, a = np.unravel_index(rows, shape)
    alphas = np.asarray([x.alphas for x in task.settings], dtype=np.float64)
    values = scored.columns
    target_limit, draft_limit = _context_limits(task)
    columns = {
        **_identity(task, s),
        "context_length": pa.array(np.asarray(task.contexts, dtype=np.int64)[c]),
        "batch_size": pa.array(np.asarray(task.batches, dtype=np.int64)[b]),
        "acceptance_scenario": pa.array(a.astype(np.int64)),
        "acceptance_rate": pa.array(alphas[s, a]),
        "within_max_context": pa.array(within_max_context(task, rows)),
        "target_max_context_tokens": pa.array(target_limit[s]),
        "draft_max_context_tokens": _float(draft_limit[s]).cast(pa.int64()),
        "fits": pa.array(scored.valid[rows]),
        "verdict": pa.array(verdict(values["share_of_budget"][rows]), pa.string()),
        "confidence": _confidence(task, s, b),
        "cell_key": _cell_key(task, s, c, b, a),
    }
    for name in (c.name for c in COLUMNS if c.name not in columns):
        if name in values:
            columns[name] = _number(name, values[name][rows])
        elif name in scored.lazy:
            columns[name] = _number(name, scored.lazy[name](rows))
    if rank is not None:
        columns["rank"] = pa.array(rank.astype(np.int64))
    schema = arrow_schema(table_columns(with_rank=rank is not None))
    return pa.table([columns[f.name].cast(f.type) for f in schema], schema=schema)


def _number(name: str, values: FloatArray) -> pa.Array:
    """A numeric column, typed and rounded as the data dictionary says; NaN becomes null."""
    column = BY_NAME[name]
    if column.decimals is not None:  # past 2**52 a float has no decimals to round (and
        with np.errstate(over="ignore", invalid="ignore"):  # scaling it could overflow)
            rounded = np.round(values, column.decimals)
        values = np.where(np.abs(values) < 2.0**52, rounded, values)
    array = _float(values)
    return array.cast(pa.int64()) if column.kind == "int" else array


def _groups(
    task: ChunkTask, scored: Scored, inner: list[tuple[object, ...]] | None = None
) -> IntArray:
    """Dense group id per row, ordered by (gpu, target, context, batch, acceptance scenario
    [, inner key]): the order of the final tables, which chunk boundaries (whole (gpu, target)
    groups, then context and batch blocks) preserve when the parts are concatenated."""
    shape = (len(task.settings), len(task.contexts), len(task.batches), task.scenarios)
    _, c, b, _ = np.unravel_index(np.arange(scored.setting.size), shape)
    outer = codes([(x.gpu, x.target) for x in task.settings])[scored.setting]
    group = ((outer * shape[1] + c) * shape[2] + b) * shape[3] + scored.scenario
    if inner is None:
        return group
    inner_codes = codes(inner)
    return group * (int(inner_codes.max()) + 1) + inner_codes[scored.setting]


def frontier_table(task: ChunkTask, scored: Scored) -> pa.Table:
    """Per (GPU, TP, target, target precision, KV dtype, context, batch, scenario): the drafts
    and draft precisions, each at its best K, not dominated in (combined memory ↓, speedup ↑)."""
    s = task.settings
    group = _groups(task, scored, [(x.gpu, x.target, x.tp, x.target_quant, x.kv_dtype) for x in s])
    rows = np.flatnonzero(scored.valid)
    combined = scored.columns["combined_gib"]
    front = rows[
        pareto_front(
            group[rows], combined[rows], scored.columns["speedup"][rows], scored.setting[rows]
        )
    ]
    return _rows_table(task, scored, front, None)


def best_table(task: ChunkTask, scored: Scored) -> pa.Table:
    """Per (GPU, target, context, batch, scenario): the top-N fitting options (TP, precisions, KV
    dtype, draft, best K) that speed decoding up at a context both models hold, ranked by the
    one rule (core/ranking.py). A group where no draft beats plain decoding has no best pair."""
    group = _groups(task, scored)
    speedup = scored.columns["speedup"]
    within = within_max_context(task, np.arange(scored.setting.size))
    rows = np.flatnonzero(scored.valid & (speedup > 1.0) & within)
    keys = ranking_keys(*(scored.columns[name][rows] for name in RANKED_BY))
    picked, rank = top_n(group[rows], (*keys, scored.setting[rows]), task.best_top_n)
    return _rows_table(task, scored, rows[picked], rank)


# the per-cell dataset's identity: partitioned by GPU, so without it
CELL_SETTING_COLUMNS = ("tp", "target", "target_quant", "draft", "draft_quant", "kv_dtype")


def cells_tables(task: ChunkTask, scored: Scored) -> dict[str, pa.Table]:
    """The per-cell rows of a chunk, one table per GPU (hive partition gpu=<id>)."""
    cells = scored.cells
    if cells is None:
        return {}
    s = cells["setting"].astype(np.int64)
    gpus = np.asarray([x.gpu for x in task.settings])
    alphas = np.asarray([x.alphas for x in task.settings], dtype=np.float64)
    scenario = cells["scenario"].astype(np.int64)
    target_limit, draft_limit = _context_limits(task)
    limit = np.fmin(target_limit.astype(np.float64), draft_limit)
    contexts = np.asarray(task.contexts)
    out = {}
    for gpu in sorted(set(gpus.tolist())):
        keep = gpus[s] == gpu
        ss = s[keep]
        out[gpu] = pa.table(
            {
                **_setting_columns(task.settings, ss, CELL_SETTING_COLUMNS),
                "context_length": pa.array(contexts[cells["context"][keep]]),
                "within_max_context": pa.array(contexts[cells["context"][keep]] <= limit[ss]),
                "batch_size": pa.array(np.asarray(task.batches)[cells["batch"][keep]]),
                "acceptance_scenario": pa.array(scenario[keep]),
                "acceptance_rate": pa.array(alphas[ss, scenario[keep]]),
                "draft_k": pa.array(cells["k"][keep].astype(np.int64)),
                "speedup": pa.array(cells["speedup"][keep]),
                "combined_gib": pa.array(cells["combined_gib"][keep]),
                "fits": pa.array(cells["fits"][keep]),
            }
        )
    return out


def coverage_table(task: ChunkTask, scored: Scored) -> pa.Table:
    """Per (GPU, target) of the chunk: rows scored, rows that fit, rows beyond the models' max
    context, and the row that needs the least memory for its budget (what came closest when
    nothing fits)."""
    share = scored.columns["share_of_budget"]
    outer = codes([(x.gpu, x.target) for x in task.settings])[scored.setting]
    order = np.lexsort((np.arange(share.size), share, outer))
    first = order[np.concatenate(([True], outer[order][1:] != outer[order][:-1]))]
    shape = (len(task.settings), len(task.contexts), len(task.batches), task.scenarios)
    s, c, b, _ = np.unravel_index(first, shape)
    settings = task.settings
    within = within_max_context(task, np.arange(share.size))

    def count(mask: BoolArray) -> IntArray:  # rows of each (GPU, target) where mask holds
        return np.bincount(outer, weights=mask)[outer[first]].astype(np.int64)

    columns = {
        "gpu": _per_setting([x.gpu for x in settings], s),
        "target": _per_setting([x.target for x in settings], s),
        "rows": pa.array(np.bincount(outer)[outer[first]].astype(np.int64)),
        "fitting_rows": pa.array(count(scored.valid)),
        "beyond_max_context_rows": pa.array(count(~within)),
        "fitting_within_max_context_rows": pa.array(count(scored.valid & within)),
        "target_max_context_tokens": pa.array(_context_limits(task)[0][s]),
        "closest_share_of_budget": pa.array(share[first]),
        "closest_tp": pa.array(np.asarray([x.tp for x in settings], dtype=np.int64)[s]),
        "closest_target_quant": _per_setting([x.target_quant for x in settings], s),
        "closest_draft": _per_setting([x.draft for x in settings], s),
        "closest_draft_quant": _per_setting([x.draft_quant for x in settings], s),
        "closest_kv_dtype": _per_setting([x.kv_dtype for x in settings], s),
        "closest_context_length": pa.array(np.asarray(task.contexts, dtype=np.int64)[c]),
        "closest_batch_size": pa.array(np.asarray(task.batches, dtype=np.int64)[b]),
    }
    schema = arrow_schema(COVERAGE_COLUMNS)
    return pa.table([columns[f.name].cast(f.type) for f in schema], schema=schema)


def merge_coverage(parts: pl.LazyFrame) -> pl.LazyFrame:
    """A (GPU, target) split over several chunks becomes one row: counts add up, the closest
    row is the closest of all."""
    import polars as pl

    closest = [c.name for c in COVERAGE_COLUMNS if c.name.startswith("closest_")]
    return (
        parts.sort(["gpu", "target", "closest_share_of_budget"], maintain_order=True)
        .group_by(["gpu", "target"], maintain_order=True)
        .agg(
            pl.col("rows").sum(),
            pl.col("fitting_rows").sum(),
            pl.col("beyond_max_context_rows").sum(),
            pl.col("fitting_within_max_context_rows").sum(),
            pl.first("target_max_context_tokens"),
            *(pl.first(c) for c in closest),
        )
    )


@record
class OutputTable:
    """One table a sweep writes: each chunk builds its rows, the run concatenates them in chunk
    order (which is the table's sorted order) into NAME.parquet and NAME.csv."""

    name: str
    description: str
    build: Callable[[ChunkTask, Scored | None], pa.Table]  # None: the chunk scored no cells
    columns: tuple[Column, ...]  # in order: the data dictionary's entries
    merge: Callable[[pl.LazyFrame], pl.LazyFrame] | None = None  # beyond concatenating parts


OUTPUT_TABLES: dict[str, OutputTable] = {}


def from_scores(
    build: Callable[[ChunkTask, Scored], pa.Table], columns: tuple[Column, ...]
) -> Callable[[ChunkTask, Scored | None], pa.Table]:
    """A decode table's builder: no rows for a chunk that scored no cells."""

    def built(task: ChunkTask, scored: Scored | None) -> pa.Table:
        return arrow_schema(columns).empty_table() if scored is None else build(task, scored)

    return built


def register_table(table: OutputTable) -> OutputTable:
    OUTPUT_TABLES[table.name] = table
    return table


register_table(
    OutputTable(
        name="frontier",
        description="per (GPU, TP, target, target precision, KV dtype, context, batch, α "
        "scenario): the "
        "drafts and draft precisions, each at its best fitting K, that are Pareto-optimal in "
        "(combined memory ↓, speedup ↑)",
        build=from_scores(frontier_table, table_columns(with_rank=False)),
        columns=table_columns(with_rank=False),
    )
)
register_table(
    OutputTable(
        name="best_pairs",
        description="per (GPU, target, context, batch, α scenario): the top options that beat "
        "plain decoding at a context the models hold, ranked by speculative tokens/s per GPU, "
        "then speedup, then memory",
        build=from_scores(best_table, table_columns(with_rank=True)),
        columns=table_columns(with_rank=True),
    )
)
register_table(
    OutputTable(
        name="coverage",
        description="per (GPU, target) swept: rows scored and fitting, and what came closest to "
        "fitting",
        build=from_scores(coverage_table, COVERAGE_COLUMNS),
        columns=COVERAGE_COLUMNS,
        merge=merge_coverage,
    )
)
