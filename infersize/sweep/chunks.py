"""One chunk of a sweep in a worker: score it, write its parts under the run's own folder, then
a done-marker; and, for --resume, which chunks of an unfinished run read back whole. Parts are
Arrow IPC files, LZ4-compressed: internal, read once by the merge (sweep/merge.py), they cost a
fifth of a zstd Parquet file to write and a twentieth to read; cells are Parquet, published.

A worker writes only while its run's main process lives, through fresh exclusive temp names
renamed into place: a killed run's workers write nothing after it dies, never half a file."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from infersize.errors import InfersizeError
from infersize.files import atomic_write, temp_beside
from infersize.sweep.output import Generation
from infersize.sweep.score import ChunkTask, score
from infersize.sweep.tables import OUTPUT_TABLES, cells_tables

if TYPE_CHECKING:  # workers import this module: not the planner (YAML schema, pydantic)
    from infersize.sweep.plan import Plan


class RunAbandonedError(InfersizeError):
    """A worker found its run's main process gone: it writes nothing more."""


@dataclass(frozen=True)
class ChunkDone:
    index: int
    cells: int
    seconds: float
    rows: dict[str, int]


@dataclass(frozen=True)
class Where:
    """Where a worker writes, and whose run it works for."""

    parts: str
    gen: str
    main_pid: int


def _check_alive(where: Where) -> None:
    if not where.main_pid:  # a Dask worker on another host: the run folder decides
        if not Path(where.parts).is_dir():
            raise RunAbandonedError("the run's folder was removed")
        return
    try:
        os.kill(where.main_pid, 0)
    except ProcessLookupError:
        raise RunAbandonedError(f"the run (pid {where.main_pid}) is gone") from None
    except PermissionError:  # alive, another user's: cannot be ours
        raise RunAbandonedError(f"pid {where.main_pid} is not this run") from None
    if not Path(where.parts).is_dir():
        raise RunAbandonedError("the run's folder was removed")


def part_name(index: int) -> str:
    """A chunk's part of one table."""
    return f"part-{index:06d}.arrow"


def read_part(path: Path) -> pa.Table:
    """A part, whole (the map stays open as long as the table needs it)."""
    return pa.ipc.open_file(pa.memory_map(str(path))).read_all()


def _atomic_table(table: pa.Table, path: Path, where: Where) -> None:
    """Write under a fresh exclusive temp name beside `path`, then rename; never half a file.
    A .arrow path gets Arrow IPC (LZ4), any other Parquet (zstd)."""
    import pyarrow.parquet as pq

    _check_alive(where)
    fd, tmp = temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            if path.suffix == ".arrow":
                options = pa.ipc.IpcWriteOptions(compression="lz4")
                with pa.ipc.new_file(handle, table.schema, options=options) as writer:
                    writer.write_table(table)
            else:
                pq.write_table(table, handle, compression="zstd")
        _check_alive(where)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def run_chunk(task: ChunkTask, where: Where) -> ChunkDone:
    """Worker entry point: score a chunk, write its parts, then its done-marker (last)."""
    pa.set_cpu_count(1)  # one worker per core: no nested thread pools
    start = time.perf_counter()
    scored = score(task)
    parts = Path(where.parts)
    tables = {name: table.build(task, scored) for name, table in OUTPUT_TABLES.items()}
    for table_name, table in tables.items():
        _atomic_table(table, parts / table_name / part_name(task.index), where)
    if task.with_cells:
        for gpu, table in cells_tables(task, scored).items():
            folder = Path(where.gen) / "cells" / f"gpu={gpu}"
            folder.mkdir(exist_ok=True)  # not parents: a removed run folder stays removed
            _atomic_table(table, folder / f"part-{task.index:06d}.parquet", where)
    n_cells = scored.setting.size * len(task.ks)
    done = ChunkDone(
        task.index, n_cells, time.perf_counter() - start, {k: v.num_rows for k, v in tables.items()}
    )
    _check_alive(where)
    atomic_write(parts / "done" / f"{task.index:06d}.json", json.dumps(asdict(done)))
    return done


def chunk_tasks(plan: Plan, best_top_n: int, with_cells: bool) -> list[ChunkTask]:
    return [
        ChunkTask(
            index=chunk.index,
            settings=plan.settings[slice(*chunk.settings)],
            contexts=plan.contexts[slice(*chunk.contexts)],
            batches=plan.batches[slice(*chunk.batches)],
            scenarios=plan.scenarios,
            ks=plan.ks,
            scoring=plan.scoring,
            best_top_n=best_top_n,
            with_cells=with_cells,
        )
        for chunk in plan.chunks
    ]


def finished_chunks(generation: Generation, with_cells: bool) -> set[int]:
    """Chunks of an unfinished run whose done-marker and part files read back whole."""
    done = set()
    for marker in (generation.parts / "done").glob("*.json"):
        try:
            record = json.loads(marker.read_text(encoding="utf-8"))
            index, rows = int(record["index"]), dict(record["rows"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        whole = all(
            0 <= int(rows.get(table, -1)) == _rows_of(generation.parts / table / part_name(index))
            for table in OUTPUT_TABLES
        )
        if whole and with_cells:
            cells = (generation.gen / "cells").glob(f"gpu=*/part-{index:06d}.parquet")
            whole = all(_rows_of(p) >= 0 for p in cells)
        if whole:
            done.add(index)
    return done


def _rows_of(path: Path) -> int:
    """The rows of a part (read whole) or a Parquet file (its footer); -1 when it does not
    read back."""
    import pyarrow.parquet as pq

    try:
        if path.suffix == ".arrow":
            return int(read_part(path).num_rows)
        return int(pq.read_metadata(path).num_rows)
    except (OSError, pa.ArrowException):
        return -1
