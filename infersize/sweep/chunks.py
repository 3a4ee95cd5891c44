"""One chunk of a sweep in a worker: score it, write its parts under the run's own folder, then
a done-marker; and, for --resume, which chunks of an unfinished run read back whole. Parts are
Arrow IPC files: internal, read once by the merge (sweep/merge.py) or by --resume. A loky
worker's are uncompressed: the run's main process, on the same machine, maps them from the page
cache without a copy (LZ4 would cost the main process a decompression of every worker part, a
third of a second a 100 M-cell run, and the worker more than writing them whole). The main
process's own (the merge takes them from memory, only --resume reads them) and a Dask worker's
(which may cross a network) are LZ4: about a fifth of the bytes. Cells are Parquet, published.

A worker writes only while its run's main process lives, through fresh exclusive temp names in
the run's tmp/ folder renamed into place, every folder opened without following links
(sweep/store/walk.py): a killed run's workers write nothing after it dies, never half a file, and
never a temp file into a folder that is published."""

from __future__ import annotations

import json
import os
import time
import zlib
from collections.abc import Iterable
from dataclasses import asdict, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import pyarrow as pa

from infersize.errors import InfersizeError
from infersize.record import record
from infersize.sweep.score import ChunkTask, score
from infersize.sweep.store import walk
from infersize.sweep.store.generations import Generation
from infersize.sweep.store.walk import Dir
from infersize.sweep.tables import OUTPUT_TABLES, OutputTable, cells_tables

if TYPE_CHECKING:  # workers import this module: not the planner (YAML schema, pydantic)
    from infersize.sweep.plan import Plan
    from infersize.sweep.settings import CapacityPlan, Chunk


class RunAbandonedError(InfersizeError):
    """A worker found its run's main process gone: it writes nothing more."""


@record(kw_only=False)
class ChunkDone:
    index: int
    cells: int
    seconds: float
    rows: dict[str, int]
    # each part's CRC-32, which --resume checks: a part is rewritten whole or not at all, but
    # without fsync a crash can leave one of the right length with blocks of zeros
    crc32: dict[str, int] = field(default_factory=dict)
    # the parts themselves, when the run's own process scored the chunk: the merge appends
    # them as they are instead of reading back the files just written (a worker's come back
    # as files only)
    parts: dict[str, pa.Table] | None = field(default=None, compare=False, repr=False)


@record(kw_only=False)
class Where:
    """Where a worker writes (the output folder and the run), and whose run it works for."""

    out_dir: str
    run_id: str
    main_pid: int

    @property
    def generation(self) -> Generation:
        return Generation(Path(self.out_dir), self.run_id)


def _check_alive(where: Where) -> None:
    if where.main_pid:
        try:
            os.kill(where.main_pid, 0)
        except ProcessLookupError:
            raise RunAbandonedError(f"the run (pid {where.main_pid}) is gone") from None
        except PermissionError:  # alive, another user's: cannot be ours
            raise RunAbandonedError(f"pid {where.main_pid} is not this run") from None
    if not where.generation.work.is_dir():  # on a Dask worker elsewhere, the only sign
        raise RunAbandonedError("the run's folder was removed")


def part_name(index: int) -> str:
    """A chunk's part of one table."""
    return f"part-{index:06d}.arrow"


def read_part(folder: Dir, name: str, mapped: bool = False, crc32: int | None = None) -> pa.Table:
    """A part, whole: read into memory, or with `mapped` mapped from the page cache (no copy
    of an uncompressed part, but its map and the map's file descriptor stay open as long as
    the table lives: for a reader that drops each part before the next, as the merge does).
    With `crc32`, a part read into memory whose bytes do not sum to it is refused
    (ValueError)."""
    if mapped:
        data = pa.py_buffer(walk.map_file(folder, name))
    else:
        data = pa.py_buffer(walk.read_bytes(folder, name, limit=-1))
        if crc32 is not None and zlib.crc32(data) != crc32:
            raise ValueError(f"{name}: its bytes do not sum to the CRC-32 its chunk recorded")
    return pa.ipc.open_file(pa.BufferReader(data)).read_all()


class _Summed(walk.WriteThrough):
    """A file written through, summing what passes (CRC-32)."""

    def __init__(self, handle: BinaryIO) -> None:
        super().__init__(handle)
        self.crc32 = 0

    def pass_on(self, view: memoryview) -> None:
        self.crc32 = zlib.crc32(view, self.crc32)
        self.handle.write(view)


class _TableFile:
    """What writes `table` to a file: Arrow IPC (LZ4 if `compress`) for a .arrow name, summed
    as it goes (`crc32`), else Parquet (zstd)."""

    def __init__(self, table: pa.Table, name: str, compress: bool) -> None:
        self.table, self.name, self.compress = table, name, compress
        self.crc32 = 0

    def __call__(self, handle: BinaryIO) -> None:
        import pyarrow.parquet as pq

        if not self.name.endswith(".arrow"):
            pq.write_table(self.table, handle, compression="zstd")
            return
        # compressed (if at all) here: with one CPU (run_chunk), handing each buffer to
        # Arrow's pool only adds a thread switch per buffer
        codec = "lz4" if self.compress else None
        options = pa.ipc.IpcWriteOptions(compression=codec, use_threads=False)
        summed = _Summed(handle)
        with pa.ipc.new_file(summed, self.table.schema, options=options) as writer:
            writer.write_table(self.table)
        self.crc32 = summed.crc32


def _write_table(
    table: pa.Table, where: Where, folders: tuple[str, ...], name: str, compress: bool = True
) -> int:
    """The run's folders/name written whole, while the run lives; the last folder is made if
    it is not there (a cells/gpu=ID folder), none above it (a removed run stays removed).
    Returns a part's CRC-32 (0 for a Parquet file)."""
    _check_alive(where)
    run = where.generation
    with (
        run.open(*folders[:-1]) as above,
        above.sub(folders[-1], True) as folder,
        run.open("tmp") as tmp,
    ):
        write = _TableFile(table, name, compress)
        walk.write_file(folder, name, tmp, write, lambda: _check_alive(where))
    return write.crc32


def run_chunk(task: ChunkTask, where: Where) -> ChunkDone:
    """Worker entry point: score a chunk, write its parts, then its done-marker (last)."""
    pa.set_cpu_count(1)  # one worker per core: no nested thread pools
    start = time.perf_counter()
    scored = score(task) if task.decode else None
    tables = {name: t.build(task, scored) for name, t in _tables_of(task).items()}
    in_main = os.getpid() == where.main_pid
    compress = in_main or not where.main_pid  # uncompressed: a loky worker's, mapped by the main
    part = part_name(task.index)
    sums = {
        table_name: _write_table(table, where, ("parts", table_name), part, compress)
        for table_name, table in tables.items()
    }
    if task.with_cells and scored is not None:
        for gpu, table in cells_tables(task, scored).items():
            folders = ("gen", "cells", f"gpu={gpu}")
            _write_table(table, where, folders, f"part-{task.index:06d}.parquet")
    n_cells = 0 if scored is None else scored.setting.size * len(task.ks)
    rows = {k: v.num_rows for k, v in tables.items()}
    done = ChunkDone(task.index, n_cells, time.perf_counter() - start, rows, sums)
    _check_alive(where)
    with where.generation.open("parts", "done") as folder, where.generation.open("tmp") as tmp:
        marker = {k: v for k, v in asdict(done).items() if k != "parts"}
        walk.write_bytes(folder, f"{task.index:06d}.json", tmp, json.dumps(marker))
    return replace(done, parts=tables) if in_main else done


def _tables_of(task: ChunkTask) -> dict[str, OutputTable]:
    """The tables a chunk writes. The capacity table's module (the capacity service, 0.05 s
    of a worker's start) is loaded only for a chunk of capacity rows."""
    if task.capacity is None:
        return OUTPUT_TABLES
    from infersize.sweep.capacity.table import output_tables

    return output_tables(with_capacity=True)


def chunk_tasks(plan: Plan, best_top_n: int, with_cells: bool) -> list[ChunkTask]:
    # the catalog overlays as absolute paths: a reused worker keeps the working directory it
    # started in (the plan keeps them as written, for its hash and its resolved YAML)
    overlays = tuple(str(Path(path).absolute()) for path in plan.scoring.catalog_files)
    scoring = replace(plan.scoring, catalog_files=overlays)
    return [
        ChunkTask(
            index=chunk.index,
            settings=plan.settings[slice(*chunk.settings)],
            contexts=plan.contexts[slice(*chunk.contexts)],
            batches=plan.batches[slice(*chunk.batches)],
            scenarios=plan.scenarios,
            ks=plan.ks,
            scoring=scoring,
            best_top_n=best_top_n,
            with_cells=with_cells,
            decode=chunk.decode,
            capacity=_capacity_part(plan, chunk),
        )
        for chunk in plan.chunks
    ]


def _capacity_part(plan: Plan, chunk: Chunk) -> CapacityPlan | None:
    """The plan's capacity axes narrowed to the workload and SLA the chunk answers."""
    if plan.capacity is None or chunk.capacity is None:
        return None
    workload, sla = chunk.capacity
    return replace(
        plan.capacity,
        workloads=(plan.capacity.workloads[workload],),
        slas=(plan.capacity.slas[sla],),
    )


def finished_chunks(generation: Generation, tables: Iterable[str], with_cells: bool) -> set[int]:
    """Chunks of an unfinished run whose done-marker and part files of `tables` read back
    whole: their rows as the marker counts them and their bytes summing to its CRC-32s."""
    done = set()
    with generation.open("parts") as parts, parts.sub("done") as markers:
        for name in markers.names():
            try:
                record = json.loads(walk.read_bytes(markers, name))
                index, rows = int(record["index"]), dict(record["rows"])
                sums = {str(t): int(crc) for t, crc in dict(record.get("crc32", {})).items()}
            except (OSError, ValueError, KeyError, TypeError):
                continue
            whole = all(
                0 <= int(rows.get(t, -1)) == _rows_of(parts, (t, part_name(index)), sums.get(t))
                for t in tables
            )
            if whole and with_cells:
                whole = _cells_whole(generation, index)
            if whole:
                done.add(index)
    return done


def _cells_whole(generation: Generation, index: int) -> bool:
    """Every cells part of the chunk there reads back (a GPU may have none of its cells)."""
    name = f"part-{index:06d}.parquet"
    try:
        with generation.open("gen", "cells") as cells:
            for gpu in (n for n in cells.names() if cells.kind(n) == "dir"):
                with cells.sub(gpu) as folder:
                    if folder.kind(name) is not None and _rows_of(cells, (gpu, name)) < 0:
                        return False
    except FileNotFoundError:
        pass
    return True


def _rows_of(folder: Dir, names: tuple[str, str], crc32: int | None = None) -> int:
    """The rows of a part (read whole; its bytes summing to `crc32` where its chunk recorded
    one) or a Parquet file (its footer) at folder/sub/name; -1 when it does not read back
    (missing, damaged, or a link)."""
    import pyarrow.parquet as pq

    sub, name = names
    try:
        with folder.sub(sub) as below:
            if name.endswith(".arrow"):
                return int(read_part(below, name, crc32=crc32).num_rows)
            mapped = pa.py_buffer(walk.map_file(below, name))
            return int(pq.read_metadata(pa.BufferReader(mapped)).num_rows)
    except (OSError, ValueError, InfersizeError, pa.ArrowException):
        return -1
