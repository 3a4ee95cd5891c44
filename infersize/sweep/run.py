"""Running a plan: chunks in parallel through joblib, each written as Parquet parts, then merged
into the final tables by polars, all writes atomic (temp name, then rename).

Layout of an output folder:
  frontier.parquet/.csv, best_pairs.parquet/.csv   the tables (sorted, no timestamps inside)
  cells/gpu=<id>/part-NNNNNN.parquet               optional per-cell dataset (hive partitioned)
  manifest.json, sweep.resolved.yaml               what ran, hashes, counts, timings
  .parts/                                          finished chunks; kept until the merge, so
                                                   `--resume` redoes only unfinished ones
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml

from infersize import __version__
from infersize.errors import InfersizeError
from infersize.files import atomic_write
from infersize.sweep.columns import arrow_schema, schema_json
from infersize.sweep.plan import Plan
from infersize.sweep.score import ChunkTask, score
from infersize.sweep.tables import OUTPUT_TABLES, cells_tables

PARTS = ".parts"


class OutputError(InfersizeError):
    """The output folder cannot be used (unwritable, or holds another sweep's unfinished run)."""


@dataclass(frozen=True)
class ChunkDone:
    index: int
    cells: int
    seconds: float
    rows: dict[str, int]


def _atomic_parquet(table: pa.Table, path: Path) -> None:
    import pyarrow.parquet as pq

    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    pq.write_table(table, tmp, compression="zstd")
    tmp.replace(path)


def run_chunk(task: ChunkTask, out_dir: str) -> ChunkDone:
    """Worker entry point: score a chunk, write its parts, then its done-marker (last)."""
    pa.set_cpu_count(1)  # one worker per core: no nested thread pools
    start = time.perf_counter()
    scored = score(task)
    parts = Path(out_dir) / PARTS
    name = f"part-{task.index:06d}.parquet"
    tables = {name: table.build(task, scored) for name, table in OUTPUT_TABLES.items()}
    for table_name, table in tables.items():
        _atomic_parquet(table, parts / table_name / name)
    if task.with_cells:
        for gpu, table in cells_tables(task, scored).items():
            folder = Path(out_dir) / "cells" / f"gpu={gpu}"
            folder.mkdir(parents=True, exist_ok=True)
            _atomic_parquet(table, folder / name)
    n_cells = scored.setting.size * len(task.ks)
    done = ChunkDone(
        task.index, n_cells, time.perf_counter() - start, {k: v.num_rows for k, v in tables.items()}
    )
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


def ensure_writable(out_dir: Path) -> None:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        probe = out_dir / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise OutputError(f"{out_dir}: cannot write there ({exc.strerror})") from None


@contextmanager
def output_lock(out_dir: Path) -> Iterator[None]:
    """One run per output folder. flock is released by the kernel when the holder dies, even by
    SIGKILL, so a killed run never leaves a stale lock behind."""
    path = out_dir / ".infersize.lock"
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            raise OutputError(
                f"{out_dir}: another infersize sweep (pid {holder}) is writing "
                "there; wait for it or choose another --out"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def prepare_output(out_dir: Path, plan_hash: str, resume: bool) -> set[int]:
    """Make the folder ready (under the lock); return the chunks already finished (--resume)."""
    parts = out_dir / PARTS
    state = parts / "plan.json"
    if resume and state.exists():
        if json.loads(state.read_text()).get("config_hash") != plan_hash:
            raise OutputError(
                f"{out_dir}: the unfinished run there is of another sweep or "
                "config; run without --resume to start over"
            )
        return {int(p.stem) for p in (parts / "done").glob("*.json")}
    shutil.rmtree(parts, ignore_errors=True)
    shutil.rmtree(out_dir / "cells", ignore_errors=True)
    for sub in (*OUTPUT_TABLES, "done"):
        (parts / sub).mkdir(parents=True, exist_ok=True)
    atomic_write(state, json.dumps({"config_hash": plan_hash}))
    return set()


def _execute(
    tasks: list[ChunkTask], out_dir: Path, jobs: int, backend: str, scheduler: str | None
) -> Iterator[ChunkDone]:
    from joblib import Parallel, delayed, parallel_config

    if not tasks:
        return
    if backend == "dask":
        from infersize.sweep.cluster import dask_backend

        context = dask_backend(scheduler)
    else:
        context = parallel_config(backend="loky", n_jobs=jobs, inner_max_num_threads=1)
    with context:
        runner = Parallel(n_jobs=jobs if backend != "dask" else -1, return_as="generator_unordered")
        yield from runner(delayed(run_chunk)(task, str(out_dir)) for task in tasks)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def merge_tables(out_dir: Path, n_chunks: int, formats: list[str]) -> dict[str, int]:
    """Concatenate the parts in chunk order (the sorted order) into the final tables."""
    import polars as pl

    rows = {}
    for name, table in OUTPUT_TABLES.items():
        files = [str(out_dir / PARTS / name / f"part-{i:06d}.parquet") for i in range(n_chunks)]
        frame = pl.scan_parquet(files)
        if table.merge is not None:
            frame = table.merge(frame)
        if "parquet" in formats:
            tmp = out_dir / f".{name}.parquet.tmp-{os.getpid()}"
            schema = arrow_schema(table.columns)  # the data dictionary as field metadata
            frame.sink_parquet(tmp, compression="zstd", statistics=True, arrow_schema=schema)
            tmp.replace(out_dir / f"{name}.parquet")
        if "csv" in formats:
            tmp = out_dir / f".{name}.csv.tmp-{os.getpid()}"
            frame.sink_csv(tmp)
            tmp.replace(out_dir / f"{name}.csv")
        rows[name] = frame.select(pl.len()).collect().item()
    return rows


def run_sweep(
    plan: Plan,
    out_dir: Path,
    *,
    jobs: int = 1,
    backend: str = "loky",
    scheduler: str | None = None,
    resume: bool = False,
    with_cells: bool = False,
    best_top_n: int = 3,
    formats: tuple[str, ...] = ("parquet", "csv"),
    on_chunk: Callable[[ChunkDone], None] | None = None,
    command_line: str | None = None,
) -> dict[str, Any]:
    ensure_writable(out_dir)
    with output_lock(out_dir):
        try:
            return _run_locked(
                plan,
                out_dir,
                jobs,
                backend,
                scheduler,
                resume,
                with_cells,
                best_top_n,
                formats,
                on_chunk,
                command_line,
            )
        except OSError as exc:  # disk full, folder made read-only mid-run, ...
            raise OutputError(
                f"{out_dir}: writing failed ({exc.strerror or exc}); the tables already there "
                "are untouched, and --resume continues the run"
            ) from None


def _run_locked(
    plan: Plan,
    out_dir: Path,
    jobs: int,
    backend: str,
    scheduler: str | None,
    resume: bool,
    with_cells: bool,
    best_top_n: int,
    formats: tuple[str, ...],
    on_chunk: Callable[[ChunkDone], None] | None,
    command_line: str | None,
) -> dict[str, Any]:
    start = time.perf_counter()
    started_at = _now()
    plan_hash = plan.config_hash()
    done = prepare_output(out_dir, plan_hash, resume)
    resolved = {
        **plan.resolved(),
        "outputs": {"cells": with_cells, "best_top_n": best_top_n, "formats": list(formats)},
    }
    atomic_write(out_dir / "sweep.resolved.yaml", yaml.safe_dump(resolved, sort_keys=False))
    tasks = [t for t in chunk_tasks(plan, best_top_n, with_cells) if t.index not in done]
    score_start = time.perf_counter()
    for finished in _execute(tasks, out_dir, jobs, backend, scheduler):
        if on_chunk:
            on_chunk(finished)
    score_s = time.perf_counter() - score_start
    rows = merge_tables(out_dir, len(plan.chunks), list(formats))
    total_s = time.perf_counter() - start
    manifest = {
        "name": plan.name,
        "infersize_version": __version__,
        "command_line": command_line,
        "started_at": started_at,
        "finished_at": _now(),
        "config_hash": plan_hash,
        "catalog_hash": plan.catalog_hash(),
        "cells": plan.total_cells,
        "chunks": len(plan.chunks),
        "chunks_resumed": len(done),
        "rows": rows,
        "jobs": jobs,
        "backend": backend,
        "seconds": {"scoring": round(score_s, 3), "total": round(total_s, 3)},
        "cells_per_s": round(plan.total_cells / total_s),
        "speedup_model": plan.scoring.speedup_model,
        "engine": plan.scoring.engine,
        "acceptance_scenarios": plan.scenarios,
        "best_top_n": best_top_n,
        "resolved_config": "sweep.resolved.yaml",
        "schema": "schema.json",
    }
    tables = {name: table.columns for name, table in OUTPUT_TABLES.items()}
    atomic_write(out_dir / "schema.json", schema_json(tables))
    atomic_write(out_dir / "manifest.json", json.dumps(manifest, indent=2))
    shutil.rmtree(out_dir / PARTS, ignore_errors=True)
    return manifest
