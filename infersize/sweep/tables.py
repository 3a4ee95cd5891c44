"""Arrow tables of a scored chunk: frontier and best-pair rows (and the optional cells), with
units in the column names. Built from numpy columns plus per-setting strings (dictionary-encoded,
then cast to plain strings so every BI tool reads them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from infersize.catalog.store import load_catalog
from infersize.core.arrays import FloatArray, IntArray
from infersize.core.memory import verdict
from infersize.sweep.reduce import codes, pareto_front, top_n
from infersize.sweep.score import ChunkTask, Scored


def _per_setting(values: Sequence[object], setting: IntArray) -> pa.Array:
    """A string column from one value per setting and the row → setting index."""
    return pa.DictionaryArray.from_arrays(
        pa.array(setting.astype(np.int32)), pa.array([str(v) for v in values])
    ).cast(pa.string())


def _float(values: FloatArray) -> pa.Array:
    values = np.asarray(values, dtype=np.float64)
    return pa.array(values, mask=~np.isfinite(values))


def _rows_table(task: ChunkTask, scored: Scored, rows: IntArray) -> pa.Table:
    settings = task.settings
    shape = (len(settings), len(task.contexts), len(task.batches), len(task.alphas))
    _, c, b, a = np.unravel_index(rows, shape)
    s = scored.setting[rows]
    catalog = load_catalog(tuple(task.scoring.catalog_files))
    contexts, batches = np.asarray(task.contexts), np.asarray(task.batches)
    alphas = np.asarray(task.alphas)
    share = scored.columns["share_of_budget"][rows]
    prefix = _per_setting(
        [
            f"{x.gpu}|tp{x.tp}|{x.target}@{x.target_quant}|{x.draft}@"
            f"{x.draft_quant}|kv={x.kv_dtype}"
            for x in settings
        ],
        s,
    )
    grid = (c * len(task.batches) + b) * len(task.alphas) + a
    suffixes = [
        f"ctx={cc}|b={bb}|a={aa:g}"
        for cc in task.contexts
        for bb in task.batches
        for aa in task.alphas
    ]
    columns = {
        "gpu": _per_setting([x.gpu for x in settings], s),
        "gpu_name": _per_setting([catalog.gpu(x.gpu).name for x in settings], s),
        "tp": pa.array(np.asarray([x.tp for x in settings], dtype=np.int64)[s]),
        "target": _per_setting([x.target for x in settings], s),
        "target_quant": _per_setting([x.target_quant for x in settings], s),
        "draft": _per_setting([x.draft for x in settings], s),
        "draft_quant": _per_setting([x.draft_quant for x in settings], s),
        "kv_dtype": _per_setting([x.kv_dtype for x in settings], s),
        "context_length": pa.array(contexts[c].astype(np.int64)),
        "batch_size": pa.array(batches[b].astype(np.int64)),
        "acceptance_rate": pa.array(alphas[a]),
        "acceptance_scenario": pa.array(scored.scenario[rows]),
        "optimal_k": pa.array(scored.columns["optimal_k"][rows].astype(np.int64)),
    }
    for name, values in scored.columns.items():
        if name == "crossover_batch_size":  # a batch size: integer, null when none up to 2048
            columns[name] = _float(values[rows]).cast(pa.int64())
        elif name not in ("optimal_k", "share_of_budget"):
            columns[name] = _float(values[rows])
    columns["fits"] = pa.array(scored.valid[rows])
    columns["verdict"] = pa.array(verdict(share), pa.string())
    columns["speedup_model"] = pa.array([task.scoring.speedup_model] * rows.size, pa.string())
    columns["engine"] = pa.array([task.scoring.engine] * rows.size, pa.string())
    suffix = pa.DictionaryArray.from_arrays(
        pa.array(grid.astype(np.int32)), pa.array(suffixes)
    ).cast(pa.string())
    columns["cell_key"] = pc.binary_join_element_wise(prefix, suffix, "|")
    return pa.table(columns)


def _groups(
    task: ChunkTask, scored: Scored, inner: list[tuple[object, ...]] | None = None
) -> IntArray:
    """Dense group id per row, ordered by (gpu, target, context, batch, acceptance scenario
    [, inner key]) (the scenario is the α's position: the α itself unless pairs have their own): the
    order of the final tables, which chunk boundaries (whole (gpu, target) groups, then context
    and batch blocks) preserve when the parts are concatenated."""
    shape = (len(task.settings), len(task.contexts), len(task.batches), len(task.alphas))
    _, c, b, _ = np.unravel_index(np.arange(scored.setting.size), shape)
    outer = codes([(x.gpu, x.target) for x in task.settings])[scored.setting]
    group = ((outer * shape[1] + c) * shape[2] + b) * shape[3] + np.maximum(scored.scenario, 0)
    if inner is None:
        return group
    inner_codes = codes(inner)
    return group * (int(inner_codes.max()) + 1) + inner_codes[scored.setting]


def frontier_table(task: ChunkTask, scored: Scored) -> pa.Table:
    """Per (GPU, TP, target, target precision, KV dtype, context, batch, α): the drafts and draft
    precisions, each at its best K, not dominated in (combined memory ↓, speedup ↑)."""
    s = task.settings
    group = _groups(task, scored, [(x.gpu, x.target, x.tp, x.target_quant, x.kv_dtype) for x in s])
    rows = np.flatnonzero(scored.valid)
    combined = scored.columns["combined_gib"]
    front = rows[
        pareto_front(
            group[rows], combined[rows], scored.columns["speedup"][rows], scored.setting[rows]
        )
    ]
    return _rows_table(task, scored, front)


def best_table(task: ChunkTask, scored: Scored) -> pa.Table:
    """Per (GPU, target, context, batch, α): the top-N fitting options (TP, precisions, KV
    dtype, draft, best K) that speed decoding up, ranked by speculative tokens/s per GPU (what
    each GPU of the deployment delivers, so TP sizes and target precisions compare), then by
    speedup and less memory. A group where no draft beats plain decoding has no best pair."""
    group = _groups(task, scored)
    speedup = scored.columns["speedup"]
    rows = np.flatnonzero(scored.valid & (speedup > 1.0))
    per_gpu = scored.columns["speculative_tokens_per_s_per_gpu"]
    combined = scored.columns["combined_gib"]
    picked, rank = top_n(
        group[rows],
        (-per_gpu[rows], -speedup[rows], combined[rows], scored.setting[rows]),
        task.best_top_n,
    )
    table = _rows_table(task, scored, rows[picked])
    return table.append_column("rank", pa.array(rank.astype(np.int64)))


def cells_tables(task: ChunkTask, scored: Scored) -> dict[str, pa.Table]:
    """The per-cell rows of a chunk, one table per GPU (hive partition gpu=<id>)."""
    cells = scored.cells
    if cells is None:
        return {}
    s = cells["setting"]
    gpus = np.asarray([x.gpu for x in task.settings])
    out = {}
    for gpu in sorted(set(gpus.tolist())):
        keep = gpus[s] == gpu
        ss = s[keep]
        out[gpu] = pa.table(
            {
                "tp": pa.array(np.asarray([x.tp for x in task.settings], dtype=np.int64)[ss]),
                "target": _per_setting([x.target for x in task.settings], ss),
                "target_quant": _per_setting([x.target_quant for x in task.settings], ss),
                "draft": _per_setting([x.draft for x in task.settings], ss),
                "draft_quant": _per_setting([x.draft_quant for x in task.settings], ss),
                "kv_dtype": _per_setting([x.kv_dtype for x in task.settings], ss),
                "context_length": pa.array(np.asarray(task.contexts)[cells["context"][keep]]),
                "batch_size": pa.array(np.asarray(task.batches)[cells["batch"][keep]]),
                "acceptance_rate": pa.array(np.asarray(task.alphas)[cells["alpha"][keep]]),
                "draft_k": pa.array(cells["k"][keep].astype(np.int64)),
                "speedup": pa.array(cells["speedup"][keep]),
                "combined_gib": pa.array(cells["combined_gib"][keep]),
                "fits": pa.array(cells["fits"][keep]),
            }
        )
    return out


@dataclass(frozen=True)
class OutputTable:
    """One table a sweep writes: each chunk builds its rows, the run concatenates them in chunk
    order (which is the table's sorted order) into NAME.parquet and NAME.csv."""

    name: str
    description: str
    build: Callable[[ChunkTask, Scored], pa.Table]


OUTPUT_TABLES: dict[str, OutputTable] = {}


def register_table(table: OutputTable) -> OutputTable:
    OUTPUT_TABLES[table.name] = table
    return table


register_table(
    OutputTable(
        "frontier",
        "per (GPU, TP, target, target precision, KV dtype, context, batch, α scenario): the "
        "drafts and draft precisions, each at its best fitting K, that are Pareto-optimal in "
        "(combined memory ↓, speedup ↑)",
        frontier_table,
    )
)
register_table(
    OutputTable(
        "best_pairs",
        "per (GPU, target, context, batch, α scenario): the top options that beat plain "
        "decoding, ranked by speculative tokens/s per GPU",
        best_table,
    )
)
