"""Running a plan: chunks scored by this process and loky workers (sweep/workers.py; joblib's
Dask backend on a cluster), each written as parts (sweep/chunks.py) that are merged into the
final tables as they finish (sweep/merge.py), all inside one new generation of the output
folder that is published whole (sweep/store/folder.py has the layout and the rules).

A run's parts live in its own partial folder under a fresh run id, so nothing a killed run's
workers finish late can reach another run; workers also stop writing once the run's main
process is gone (sweep/chunks.py). `--resume` picks up the newest unfinished run of the same
configuration and re-scores any chunk whose part files do not read back whole.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import BrokenExecutor
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml

from infersize import __version__
from infersize.defaults import DEFAULTS
from infersize.errors import InfersizeError
from infersize.record import record
from infersize.sweep.arrow_types import schema_json
from infersize.sweep.capacity.table import output_tables, simulated_rows
from infersize.sweep.chunks import (
    ChunkDone,
    Where,
    chunk_tasks,
    finished_chunks,
    part_name,
    read_part,
    run_chunk,
)
from infersize.sweep.merge import TableMerge
from infersize.sweep.plan import Plan
from infersize.sweep.score import ChunkTask
from infersize.sweep.store import folder, generations, walk
from infersize.sweep.store.folder import OutputError
from infersize.sweep.store.generations import Generation
from infersize.sweep.upgrade import TABLES_SCHEMA
from infersize.sweep.workers import (
    jobs_for,
    loky_workers,
    release_workers,
    share_out,
    stop_workers,
)

__all__ = ["ChunkDone", "OutputError", "RunOptions", "WorkerDiedError", "run_sweep"]


def _run_hash_of(generation: Generation, name: str) -> str | None:
    """The run hash a run recorded in its `name` file (plan.json, or a generation's manifest)."""
    try:
        with generation.open(*([] if name == "plan.json" else ["gen"])) as folder:
            return str(json.loads(walk.read_bytes(folder, name))["run_hash"])
    except (OSError, ValueError, KeyError, TypeError, OutputError):
        return None


def prepare_generation(
    out_dir: Path, run_hash: str, tables: Iterable[str], resume: bool
) -> tuple[Generation, bool]:
    """The run's generation (under the lock): the newest unfinished run of the same
    configuration when resuming (its temp files removed), else a new one (older unfinished
    runs are discarded)."""
    partial = generations.partial_runs(out_dir)
    if resume:
        for generation in partial:
            if _run_hash_of(generation, "plan.json") == run_hash:
                generations.clear_temps(generation)
                return generation, True
        if partial:
            raise OutputError(
                f"{out_dir}: the unfinished run there is of another sweep or config; run "
                "without {resume} to start over",
                settings=("resume",),
            )
    for generation in partial:
        generations.discard(generation)
    generation = generations.start(out_dir, generations.new_run_id())
    try:
        with generation.open() as work, work.sub("parts") as parts, work.sub("tmp") as tmp:
            for sub in (*tables, "done"):
                os.mkdir(sub, 0o777, dir_fd=parts.fd)
            with work.sub("gen") as gen:
                os.mkdir("cells", 0o777, dir_fd=gen.fd)
            walk.write_bytes(work, "plan.json", tmp, json.dumps({"run_hash": run_hash}))
    except BaseException:  # a run that could not even start leaves nothing behind
        generations.discard(generation)
        raise
    return generation, False


def _published(out_dir: Path, run_hash: str) -> dict[str, Any] | None:
    """The current generation's manifest when it is this very run and no unfinished run is
    left (nothing to resume: its publish was interrupted after the switch, and is now tidied
    up)."""
    if generations.partial_runs(out_dir):
        return None
    path = out_dir / folder.CURRENT / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and manifest.get("run_hash") == run_hash else None


def _execute(
    tasks: list[ChunkTask], where: Where, jobs: int, backend: str, scheduler: str | None
) -> Iterator[ChunkDone]:
    if not tasks:
        return
    if backend != "dask":
        simulator = any(task.capacity is not None for task in tasks)
        pool = loky_workers(jobs - 1, simulator) if jobs > 1 else None
        yield from share_out(tasks, partial(run_chunk, where=where), pool, jobs - 1)
        return
    from joblib import Parallel, delayed

    from infersize.sweep.cluster import dask_backend

    with dask_backend(scheduler):
        runner = Parallel(n_jobs=-1, return_as="generator_unordered")
        yield from runner(delayed(run_chunk)(task, where) for task in tasks)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@record
class RunOptions:
    """How to run a plan; `run_hash` covers every one of them that changes the bytes written."""

    jobs: int = 1
    backend: str = "loky"
    scheduler: str | None = None
    resume: bool = False
    with_cells: bool = False
    best_top_n: int = DEFAULTS.best_top_n
    formats: tuple[str, ...] = DEFAULTS.output_formats
    command_line: str | None = None


def run_hash(plan: Plan, options: RunOptions) -> str:
    """The plan's hash, the catalog files' contents (overlays included) and the outputs."""
    import hashlib

    text = json.dumps(
        {
            "plan": plan.config_hash(),
            "catalog": plan.catalog_hash(),
            "cells": options.with_cells,
            "best_top_n": options.best_top_n,
            "formats": list(options.formats),
        },
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()


def run_sweep(
    plan: Plan,
    out_dir: Path,
    options: RunOptions | None = None,
    *,
    on_chunk: Callable[[ChunkDone], None] | None = None,
) -> dict[str, Any]:
    """Run `plan` into a new generation of `out_dir` and publish it."""
    options = options or RunOptions()
    folder.claim(out_dir)
    with folder.lock(out_dir):
        try:
            return _run_locked(plan, out_dir, options, on_chunk)
        except Exception as exc:
            stop_workers(wait=True)
            if isinstance(exc, BrokenExecutor):
                raise WorkerDiedError(
                    f"{out_dir}: {_death(exc)}; {UNTOUCHED}", settings=("jobs", "resume")
                ) from None
            if not _is_write_failure(exc):
                raise
            reason = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
            raise OutputError(
                f"{out_dir}: writing failed ({reason}); {UNTOUCHED}", settings=("resume",)
            ) from None
        except BaseException:  # Ctrl-C, SIGTERM: no worker may write on
            stop_workers(wait=True)
            raise


UNTOUCHED = "the tables there are the previous run's, untouched, and {resume} continues this one"


class WorkerDiedError(InfersizeError):
    """A worker process ended in the middle of a chunk (killed, or crashed)."""


def _death(exc: BrokenExecutor) -> str:
    """How the worker ended, from loky's message ("The exit codes of the workers are
    {SIGKILL(-9)}"), and the usual reason for it."""
    codes = re.search(r"exit codes of the workers are \{([^}]*)\}", str(exc))
    how = f" ({codes.group(1)})" if codes else ""
    if "SIGKILL" in how:
        return (
            f"a worker process was killed{how}, most often by the kernel's out-of-memory "
            "killer: try fewer {jobs} or a smaller chunk_cells"
        )
    return f"a worker process ended in the middle of a chunk{how}"


WRITE_FAILURE_WORDS = ("space", "i/o", "io error", "file too large", "denied", "read-only")


def _is_write_failure(exc: Exception) -> bool:
    """Disk full, a file-size limit, a folder made read-only: from the OS, Arrow or polars."""
    if isinstance(exc, OSError | pa.ArrowIOError):
        return True
    kind = type(exc)
    return kind.__module__.startswith("polars") and any(
        word in str(exc).lower() for word in WRITE_FAILURE_WORDS
    )


def _manifest(
    plan: Plan, options: RunOptions, hashes: tuple[str, str], times: dict[str, Any]
) -> dict[str, Any]:
    total_s = times["total_s"]
    return {
        "name": plan.name,
        "infersize_version": __version__,
        "tables_schema": TABLES_SCHEMA,
        "command_line": options.command_line,
        "started_at": times["started_at"],
        "finished_at": _now(),
        "config_hash": hashes[0],
        "run_hash": hashes[1],
        "catalog_hash": plan.catalog_hash(),
        "cells": plan.total_cells,
        "chunks": len(plan.chunks),
        "chunks_resumed": times["resumed"],
        "rows": times["rows"],
        "jobs": options.jobs,
        "backend": options.backend,
        "seconds": {"scoring": round(times["score_s"], 3), "total": round(total_s, 3)},
        "cells_per_s": round(plan.total_cells / max(total_s, 1e-9)),
        "speedup_model": plan.scoring.speedup_model,
        "engine": plan.scoring.engine.engine,
        "acceptance_scenarios": plan.scenarios,
        "best_top_n": options.best_top_n,
        "resolved_config": "sweep.resolved.yaml",
        "schema": "schema.json",
        **({"capacity": times["capacity"]} if plan.capacity is not None else {}),
    }


def _capacity_figures(generation: Generation, plan: Plan) -> dict[str, Any]:
    """How the capacity table was answered: its rows, those the simulator answered, and the
    simulation's settings (`best --request-rate` sizes fleets with the same headroom)."""
    if plan.capacity is None:
        return {}
    with generation.open("parts", "capacity") as parts:
        tables = [read_part(parts, part_name(chunk.index)) for chunk in plan.chunks]
    return {
        "rows": sum(t.num_rows for t in tables),
        "simulated_rows": simulated_rows(tables),
        "requests": plan.capacity.requests,
        "seed": plan.capacity.seed,
        "simulate_top": plan.capacity.simulate_top,
        **({"simulate_all": True} if plan.capacity.simulate_all else {}),
        "headroom": plan.capacity.headroom,
    }


def _run_locked(
    plan: Plan,
    out_dir: Path,
    options: RunOptions,
    on_chunk: Callable[[ChunkDone], None] | None,
) -> dict[str, Any]:
    start, started_at = time.perf_counter(), _now()
    hashes = (plan.config_hash(), run_hash(plan, options))
    generations.recover(out_dir)  # a publish killed half-way, finished or undone
    if options.resume and (published := _published(out_dir, hashes[1])) is not None:
        return published
    tables = output_tables(plan.capacity is not None)
    generation, resuming = prepare_generation(out_dir, hashes[1], tables, options.resume)
    done = finished_chunks(generation, tables, options.with_cells) if resuming else set()
    tasks = [
        t for t in chunk_tasks(plan, options.best_top_n, options.with_cells) if t.index not in done
    ]
    main_pid = 0 if options.backend == "dask" else os.getpid()
    # absolute: a reused worker started in another working directory finds the same folder
    where = Where(str(out_dir.absolute()), generation.run_id, main_pid)
    jobs = options.jobs
    if options.backend == "loky":
        jobs = jobs_for(options.jobs, plan.work_cells, len(tasks))
    score_start = time.perf_counter()
    merge = TableMerge(generation, tables, len(plan.chunks), list(options.formats))
    try:  # parts are appended to the tables as chunks finish, while later ones are scored
        for index in sorted(done):
            merge.chunk_done(index)
        for finished in _execute(tasks, where, jobs, options.backend, options.scheduler):
            merge.chunk_done(finished.index, finished.parts)
            if on_chunk:
                on_chunk(finished)
        score_s = time.perf_counter() - score_start
        if options.backend == "loky":
            release_workers()
        rows = merge.finish()
    except BaseException:
        merge.abandon()
        raise
    times = {
        "started_at": started_at,
        "resumed": len(done),
        "rows": rows,
        "score_s": score_s,
        "total_s": time.perf_counter() - start,
        "capacity": _capacity_figures(generation, plan),
    }
    manifest = _manifest(plan, options, hashes, times)
    _write_run_files(generation, plan, options, manifest)
    generations.publish(generation)
    return manifest


def _write_run_files(
    generation: Generation, plan: Plan, options: RunOptions, manifest: dict[str, Any]
) -> None:
    """The resolved config, the tables' schema and the manifest, beside the tables."""
    resolved = {
        **plan.resolved(),
        "outputs": {
            "cells": options.with_cells,
            "best_top_n": options.best_top_n,
            "formats": list(options.formats),
        },
    }
    tables = {name: t.columns for name, t in output_tables(plan.capacity is not None).items()}
    files = {
        "sweep.resolved.yaml": yaml.safe_dump(resolved, sort_keys=False),
        "schema.json": schema_json(tables),
        "manifest.json": json.dumps(manifest, indent=2),
    }
    with generation.open("gen") as gen, generation.open("tmp") as tmp:
        if not options.with_cells:  # gone already where a resume finishes a merged run
            with contextlib.suppress(FileNotFoundError):
                os.rmdir("cells", dir_fd=gen.fd)
        for name, text in files.items():
            walk.write_bytes(gen, name, tmp, text)
