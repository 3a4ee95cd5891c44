"""Arrow tables of a scored chunk: frontier and best-pair rows (and the optional cells), with
units in the column names. Built from numpy columns plus the chunk's values per setting
(sweep/per_setting.py), which each row takes by its setting index."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

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
    Column,
    table_columns,
)
from infersize.sweep.per_setting import IDENTITY_COLUMNS, PerSetting, per_setting
from infersize.sweep.reduce import first_least, pareto_front, top_n
from infersize.sweep.score import ChunkTask, Scored

if TYPE_CHECKING:
    import polars as pl


def _float(values: FloatArray) -> pa.Array:
    values = np.asarray(values, dtype=np.float64)
    return pa.array(values, mask=~np.isfinite(values))


def _taken(values: PerSetting, names: Sequence[str], s: IntArray) -> dict[str, pa.Array]:
    """The identity columns `names` of the rows whose settings are `s`."""
    index = pa.array(s)
    return {name: values.identity[name].take(index) for name in names}


def _shape(task: ChunkTask) -> tuple[int, int, int, int]:
    """A chunk's rows: (setting, context, batch, scenario), in this order."""
    return (len(task.settings), len(task.contexts), len(task.batches), task.scenarios)


def within_max_context(task: ChunkTask, rows: IntArray) -> BoolArray:
    """Whether each row's context is one its target and draft hold."""
    s, c, _, _ = np.unravel_index(rows, _shape(task))
    return np.asarray(task.contexts, dtype=np.float64)[c] <= per_setting(task).limit[s]


def _within_every_row(task: ChunkTask) -> BoolArray:
    """within_max_context of every row of the chunk, in row order."""
    held = np.asarray(task.contexts, dtype=np.float64)[None, :] <= per_setting(task).limit[:, None]
    return np.broadcast_to(held[:, :, None, None], _shape(task)).ravel()


def _confidence(task: ChunkTask, s: IntArray, b: IntArray) -> pa.Array:
    """`spec`'s confidence rule (core/confidence.py) for each row's target and batch."""
    values = per_setting(task)
    batch = np.asarray(task.batches, dtype=np.float64)[b]
    confidence = decode_confidence(values.num_experts[s], values.experts_per_token[s], batch)
    return pa.array(confidence, pa.string())


def _cell_key(task: ChunkTask, s: IntArray, c: IntArray, b: IntArray, a: IntArray) -> pa.Array:
    """gpu|tp|target@quant|draft@quant|kv=…|ctx=…|b=…|a=… (α of the row's scenario)."""
    values = per_setting(task)
    grid = c * len(task.batches) + b
    middle = pa.DictionaryArray.from_arrays(
        pa.array(grid.astype(np.int32)),
        pa.array([f"ctx={cc}|b={bb}" for cc in task.contexts for bb in task.batches]),
    ).cast(pa.string())
    prefix = values.cell_prefix.take(pa.array(s))
    alphas = values.alpha_text.take(pa.array(s * task.scenarios + a))
    return pc.binary_join_element_wise(prefix, middle, alphas, "|")


def _rows_table(task: ChunkTask, scored: Scored, rows: IntArray, rank: IntArray | None) -> pa.Table:
    shape = _shape(task)
    s, c, b, a = np.unravel_index(rows, shape)
    setting = per_setting(task)
    values = scored.columns
    columns = {
        **_taken(setting, IDENTITY_COLUMNS, s),
        "context_length": pa.array(np.asarray(task.contexts, dtype=np.int64)[c]),
        "batch_size": pa.array(np.asarray(task.batches, dtype=np.int64)[b]),
        "acceptance_scenario": pa.array(a.astype(np.int64)),
        "acceptance_rate": pa.array(setting.alphas[s, a]),
        "within_max_context": pa.array(within_max_context(task, rows)),
        "target_max_context_tokens": pa.array(setting.target_limit[s]),
        "draft_max_context_tokens": _float(setting.draft_limit[s]).cast(pa.int64()),
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


def _groups(task: ChunkTask, inner: IntArray | None = None) -> IntArray:
    """Dense group id per row, ordered by (gpu, target, context, batch, acceptance scenario
    [, inner key]): the order of the final tables, which chunk boundaries (whole (gpu, target)
    groups, then context and batch blocks) preserve when the parts are concatenated."""
    n_c, n_b, n_a = _shape(task)[1:]
    outer = per_setting(task).outer.reshape(-1, 1, 1, 1)
    c, b, a = np.arange(n_c)[:, None, None], np.arange(n_b)[:, None], np.arange(n_a)
    group = ((outer * n_c + c) * n_b + b) * n_a + a
    if inner is not None:
        group = group * (int(inner.max()) + 1) + inner.reshape(-1, 1, 1, 1)
    return group.ravel()


def frontier_table(task: ChunkTask, scored: Scored) -> pa.Table:
    """Per (GPU, TP, target, target precision, KV dtype, context, batch, scenario): the drafts
    and draft precisions, each at its best K, not dominated in (combined memory ↓, speedup ↑)."""
    group = _groups(task, per_setting(task).frontier_inner)
    rows = np.flatnonzero(scored.valid)
    combined = scored.columns["combined_gib"]
    front = rows[pareto_front(group[rows], combined[rows], scored.columns["speedup"][rows])]
    return _rows_table(task, scored, front, None)


def best_table(task: ChunkTask, scored: Scored) -> pa.Table:
    """Per (GPU, target, context, batch, scenario): the top-N fitting options (TP, precisions, KV
    dtype, draft, best K) that speed decoding up at a context both models hold, ranked by the
    one rule (core/ranking.py). A group where no draft beats plain decoding has no best pair."""
    group = _groups(task)
    speedup = scored.columns["speedup"]
    within = _within_every_row(task)
    rows = np.flatnonzero(scored.valid & (speedup > 1.0) & within)
    keys = ranking_keys(*(scored.columns[name][rows] for name in RANKED_BY))
    picked, rank = top_n(group[rows], keys, task.best_top_n)  # ties: the lower setting
    return _rows_table(task, scored, rows[picked], rank)


# the per-cell dataset's identity: partitioned by GPU, so without it
CELL_SETTING_COLUMNS = ("tp", "target", "target_quant", "draft", "draft_quant", "kv_dtype")
# the coverage table's closest row: these of its identity, as closest_<name>
CLOSEST = ("target_quant", "draft", "draft_quant", "kv_dtype")


def cells_tables(task: ChunkTask, scored: Scored) -> dict[str, pa.Table]:
    """The per-cell rows of a chunk, one table per GPU (hive partition gpu=<id>)."""
    cells = scored.cells
    if cells is None:
        return {}
    s = cells["setting"].astype(np.int64)
    gpus = np.asarray([x.gpu for x in task.settings])
    setting = per_setting(task)
    scenario = cells["scenario"].astype(np.int64)
    contexts = np.asarray(task.contexts)
    out = {}
    for gpu in sorted(set(gpus.tolist())):
        keep = gpus[s] == gpu
        ss = s[keep]
        out[gpu] = pa.table(
            {
                **{  # as plain strings, as the cells dataset has always held them
                    name: column.cast(pa.string()) if name != "tp" else column
                    for name, column in _taken(setting, CELL_SETTING_COLUMNS, ss).items()
                },
                "context_length": pa.array(contexts[cells["context"][keep]]),
                "within_max_context": pa.array(
                    contexts[cells["context"][keep]] <= setting.limit[ss]
                ),
                "batch_size": pa.array(np.asarray(task.batches)[cells["batch"][keep]]),
                "acceptance_scenario": pa.array(scenario[keep]),
                "acceptance_rate": pa.array(setting.alphas[ss, scenario[keep]]),
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
    setting = per_setting(task)
    outer = setting.outer[scored.setting]
    first = first_least(outer, share)  # codes are dense: every (GPU, target) has rows
    shape = _shape(task)
    s, c, b, _ = np.unravel_index(first, shape)
    closest = _taken(setting, ("gpu", "target", "tp", *CLOSEST), s)
    within = _within_every_row(task)

    def count(mask: BoolArray) -> IntArray:  # rows of each (GPU, target) where mask holds
        return np.bincount(outer, weights=mask)[outer[first]].astype(np.int64)

    columns = {
        "gpu": closest["gpu"],
        "target": closest["target"],
        "rows": pa.array(np.bincount(outer)[outer[first]].astype(np.int64)),
        "fitting_rows": pa.array(count(scored.valid)),
        "beyond_max_context_rows": pa.array(count(~within)),
        "fitting_within_max_context_rows": pa.array(count(scored.valid & within)),
        "target_max_context_tokens": pa.array(setting.target_limit[s]),
        "closest_share_of_budget": pa.array(share[first]),
        "closest_tp": closest["tp"],
        **{f"closest_{name}": closest[name] for name in CLOSEST},
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
