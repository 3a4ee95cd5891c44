"""Running sweeps: tables read back with pyarrow, the reductions checked against brute force,
determinism across --jobs, and an interrupted (SIGKILL) run resumed to the same bytes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from infersize.cli import app
from infersize.sweep.config import load_sweep
from infersize.sweep.plan import build_plan
from infersize.sweep.run import RunOptions, run_sweep
from infersize.sweep.store import generations
from tests.support.commands import cli_process
from tests.support.sweeps import scored_unfinished

SMALL = """\
name: small
targets: [qwen2.5-7b, qwen2.5-14b, llama-3.1-8b]
drafts: [qwen2.5-0.5b, qwen2.5-1.5b, llama-3.2-1b]
target_quants: [bf16, int4]
draft_quants: [bf16, int4]
kv_dtypes: [fp16, fp8]
gpus: [l4, {name: a100-40gb, tp: [1, 2]}]
context_lengths: [2048, 32768]
batch_sizes: [1, 16]
acceptance_rates: [0.5, 0.7, 0.9]
draft_k: {start: 1, stop: 10, step: 1}
speedup_model: SPEEDUP
chunk_cells: 5000
"""
REQUIRED = [
    "gpu",
    "tp",
    "target",
    "target_quant",
    "draft",
    "draft_quant",
    "kv_dtype",
    "context_length",
    "batch_size",
    "acceptance_rate",
    "optimal_k",
    "speedup",
    "expected_tokens_per_step",
    "latency_ratio",
    "combined_gib",
    "gpu_memory_gib",
    "fits",
]
TABLE_FILES = ["frontier.parquet", "frontier.csv", "best_pairs.parquet", "best_pairs.csv"]
SETTING = [
    "gpu",
    "tp",
    "target",
    "target_quant",
    "draft",
    "draft_quant",
    "kv_dtype",
    "context_length",
    "batch_size",
    "acceptance_rate",
]


def plan_for(tmp_path: Path, text: str):
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    config, doc = load_sweep(path)
    return build_plan(config, doc)


@pytest.fixture(scope="module", params=["leviathan", "roofline"])
def small_run(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(request.param)
    plan = plan_for(tmp, SMALL.replace("SPEEDUP", request.param))
    out = tmp / "out"
    manifest = run_sweep(plan, out, RunOptions(jobs=1, with_cells=True))
    return plan, out, manifest


def test_tables_read_back_with_pyarrow(small_run):
    plan, out, manifest = small_run
    for name in ("frontier", "best_pairs"):
        table = pq.read_table(out / f"{name}.parquet")
        assert set(REQUIRED) <= set(table.column_names)
        assert table.num_rows == manifest["rows"][name] > 0
        csv = pl.read_csv(out / f"{name}.csv")
        assert csv.height == table.num_rows
    assert "rank" in pq.read_table(out / "best_pairs.parquet").column_names
    assert not (out / ".parts").exists()
    assert json.loads((out / "manifest.json").read_text())["cells"] == plan.total_cells
    assert (out / "sweep.resolved.yaml").is_file()


def test_cells_dataset_is_hive_partitioned_by_gpu(small_run):
    plan, out, _ = small_run
    dataset = ds.dataset(out / "cells", format="parquet", partitioning="hive")
    assert "gpu" in dataset.schema.names
    assert dataset.count_rows() == plan.total_cells
    gpus = set(dataset.to_table(columns=["gpu"]).column("gpu").to_pylist())
    assert gpus == {"l4", "a100-40gb-sxm"}


def test_best_k_equals_brute_force_over_fitting_k(small_run):
    _, out, _ = small_run
    cells = pl.from_arrow(
        ds.dataset(out / "cells", format="parquet", partitioning="hive").to_table()
    ).with_columns(pl.col("gpu").cast(pl.String))
    brute = (
        cells.filter(pl.col("fits"))
        .group_by(SETTING)
        .agg(
            pl.col("speedup").max().alias("brute_speedup"),
            pl.col("draft_k").sort_by("speedup").last().alias("brute_k"),
        )
    )
    best = pl.read_parquet(out / "best_pairs.parquet").join(brute, on=SETTING, how="left")
    assert best.height > 0 and best["brute_speedup"].null_count() == 0
    assert np.allclose(best["speedup"], best["brute_speedup"], rtol=1e-12)
    same_k = best.filter(pl.col("optimal_k") != pl.col("brute_k"))
    assert np.allclose(same_k["speedup"], same_k["brute_speedup"], rtol=1e-12)  # only exact ties


def test_no_best_pair_exceeds_the_memory_limit(small_run):
    _, out, _ = small_run
    best = pl.read_parquet(out / "best_pairs.parquet")
    assert best["fits"].all()
    assert (best["combined_gib"] <= best["gpu_memory_gib"]).all()
    # an OOM case exists in this grid (14B bf16 with 32k context on a 24 GB L4), so the
    # filter is doing work
    cells = ds.dataset(out / "cells", format="parquet", partitioning="hive").to_table(
        columns=["fits"]
    )
    assert not all(cells.column("fits").to_pylist())


def test_best_pairs_are_ranked_by_tokens_per_s_per_gpu(small_run):
    _, out, _ = small_run
    best = pl.read_parquet(out / "best_pairs.parquet")
    groups = ["gpu", "target", "context_length", "batch_size", "acceptance_rate"]
    for _, group in best.group_by(groups):
        group = group.sort("rank")
        assert group["rank"].to_list() == list(range(1, group.height + 1))
        assert (group["speculative_tokens_per_s_per_gpu"].diff().drop_nulls() <= 1e-9).all()
        assert (group["speedup"] > 1.0).all()


def test_no_frontier_row_is_dominated(small_run):
    _, out, _ = small_run
    front = pl.read_parquet(out / "frontier.parquet")
    groups = [
        "gpu",
        "tp",
        "target",
        "target_quant",
        "kv_dtype",
        "context_length",
        "batch_size",
        "acceptance_rate",
    ]
    pairs = front.join(front, on=groups, suffix="_other")
    dominated = pairs.filter(
        (pl.col("combined_gib_other") <= pl.col("combined_gib"))
        & (pl.col("speedup_other") >= pl.col("speedup"))
        & (
            (pl.col("combined_gib_other") < pl.col("combined_gib"))
            | (pl.col("speedup_other") > pl.col("speedup"))
        )
    )
    assert dominated.height == 0
    # with one α for every draft the smallest, fastest draft dominates: fronts of one row
    assert front.height == front.select(groups).unique().height


def test_jobs_1_and_2_give_byte_identical_tables(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERSIZE_MIN_PARALLEL_CELLS", "0")  # two workers even for this grid
    plan = plan_for(tmp_path, SMALL.replace("SPEEDUP", "leviathan"))
    run_sweep(plan, tmp_path / "one", RunOptions(jobs=1))
    run_sweep(plan, tmp_path / "two", RunOptions(jobs=2))
    for name in TABLE_FILES:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()


def test_relative_paths_are_found_by_workers_started_in_another_folder(tmp_path, monkeypatch):
    """Workers are reused between runs of one process (loky's reusable executor) and keep the
    working directory they started in: a later run from another directory, into a relative
    folder and with a relative catalog overlay, must still find both (the folder was not
    found: "the run's folder was removed"; nor was the overlay)."""
    from infersize.sweep.workers import stop_workers, warm_workers

    monkeypatch.setenv("INFERSIZE_MIN_PARALLEL_CELLS", "0")  # the worker scores chunks too
    (tmp_path / "started").mkdir()
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "mine.yaml").write_text("gpus: []\n")
    monkeypatch.chdir(tmp_path / "runs")
    path = Path("sweep.yaml")
    path.write_text(SMALL.replace("SPEEDUP", "leviathan"))
    config, doc = load_sweep(path)
    plan = build_plan(config, doc, ("mine.yaml",))
    monkeypatch.chdir(tmp_path / "started")
    try:
        warm_workers(2)  # the worker starts here...
        monkeypatch.chdir(tmp_path / "runs")
        run_sweep(plan, Path("out"), RunOptions(jobs=2))  # ...and works for a run here
    finally:
        stop_workers(wait=True)
    run_sweep(plan, tmp_path / "one", RunOptions(jobs=1))
    for name in TABLE_FILES:
        assert (tmp_path / "runs" / "out" / name).read_bytes() == (
            tmp_path / "one" / name
        ).read_bytes()


def test_a_finished_run_leaves_no_worker_running(tmp_path, monkeypatch):
    """A run tells its idle workers to exit as soon as the last chunk is in (they end while
    the tables are finished), rather than leaving them to loky's idle timeout or to the
    process's exit, which then waits for them."""
    import multiprocessing

    from loky.backend.process import LokyProcess

    from infersize.sweep.workers import stop_workers

    def workers() -> list[object]:
        return [p for p in multiprocessing.active_children() if isinstance(p, LokyProcess)]

    stop_workers(wait=True)  # none left over from another test of this process
    monkeypatch.setenv("INFERSIZE_MIN_PARALLEL_CELLS", "0")  # the run starts a worker
    plan = plan_for(tmp_path, SMALL.replace("SPEEDUP", "leviathan"))
    run_sweep(plan, tmp_path / "out", RunOptions(jobs=2))
    deadline = time.monotonic() + 20
    while workers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert workers() == []


def _stored_whole(path: Path) -> bool:
    """Whether an Arrow IPC part holds its buffers uncompressed: its bytes are exactly what
    an uncompressed writer makes of the table it reads back as (LZ4 makes fewer)."""
    import pyarrow as pa

    table = pa.ipc.open_file(pa.memory_map(str(path))).read_all()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().size == path.stat().st_size


def test_a_workers_parts_are_uncompressed_the_runs_own_lz4_and_a_resume_reads_both(
    tmp_path, monkeypatch
):
    """The main process maps a loky worker's parts without decompressing them; the parts it
    scored itself (merged from memory, read only by --resume) stay LZ4. A run that scored
    every chunk and then failed is resumed from both kinds to the tables of a clean run."""
    monkeypatch.setenv("INFERSIZE_MIN_PARALLEL_CELLS", "0")  # a worker even for this grid
    sweep = SMALL.replace("SPEEDUP", "leviathan").replace("chunk_cells: 5000", "chunk_cells: 1000")
    plan = plan_for(tmp_path, sweep)
    assert len(plan.chunks) > 4  # the worker is handed up to 4 chunks at once
    run_sweep(plan, tmp_path / "clean", RunOptions(jobs=1))
    out = tmp_path / "out"
    scored_unfinished(out, plan, monkeypatch, jobs=2)
    parts = sorted(out.glob(".generations/*.partial/parts/frontier/part-*.arrow"))
    assert len(parts) == len(plan.chunks)
    whole = {part.name for part in parts if _stored_whole(part)}
    assert "part-000000.arrow" not in whole  # the main process always scores the first chunk
    assert 0 < len(whole) < len(parts)
    manifest = run_sweep(plan, out, RunOptions(resume=True))
    assert manifest["chunks_resumed"] == len(plan.chunks)
    for name in TABLE_FILES:
        assert (out / name).read_bytes() == (tmp_path / "clean" / name).read_bytes()


@pytest.mark.parametrize(
    ("writer", "whole", "in_memory"),
    [
        ("main", False, True),  # the run's own: LZ4, and handed to the merge in memory
        ("loky worker", True, False),  # uncompressed, mapped by the main process
        ("dask worker", False, False),  # no main pid (another machine, maybe): LZ4
    ],
)
def test_who_writes_a_part_decides_its_codec(tmp_path, writer, whole, in_memory):
    """run_chunk writes a part uncompressed only for a loky worker, whose run's main process
    (alive, another pid) reads it back on the same machine; every part's CRC-32 is in its
    done-marker and sums its bytes."""
    import zlib

    from infersize.sweep.chunks import Where, chunk_tasks, run_chunk
    from infersize.sweep.tables import OUTPUT_TABLES

    plan = plan_for(tmp_path, SMALL.replace("SPEEDUP", "leviathan"))
    task = chunk_tasks(plan, 3, False)[0]
    out = tmp_path / "out"
    out.mkdir()
    run = generations.start(out, generations.new_run_id())
    for sub in (*OUTPUT_TABLES, "done"):
        (run.parts / sub).mkdir()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:  # a live process not this one: the main process a loky worker works for
        main_pid = {"main": os.getpid(), "loky worker": other.pid, "dask worker": 0}[writer]
        done = run_chunk(task, Where(str(out), run.run_id, main_pid))
    finally:
        other.kill()
        other.wait()
    part = run.parts / "frontier" / "part-000000.arrow"
    assert _stored_whole(part) is whole
    assert (done.parts is not None) is in_memory
    marker = json.loads((run.parts / "done" / "000000.json").read_text())
    assert marker["crc32"]["frontier"] == zlib.crc32(part.read_bytes())


def test_a_part_with_a_block_of_zeros_is_scored_again(tmp_path, monkeypatch):
    """An uncompressed part keeps its length and footer when a crash before the page cache
    reached the disk leaves a block of it zeros: it reads back, wrong. Its bytes no longer
    sum to the CRC-32 its done-marker recorded, so the resume scores its chunk again."""
    monkeypatch.setenv("INFERSIZE_MIN_PARALLEL_CELLS", "0")
    sweep = SMALL.replace("SPEEDUP", "leviathan").replace("chunk_cells: 5000", "chunk_cells: 1000")
    plan = plan_for(tmp_path, sweep)
    run_sweep(plan, tmp_path / "clean", RunOptions(jobs=1))
    out = tmp_path / "out"
    scored_unfinished(out, plan, monkeypatch, jobs=2)
    parts = sorted(out.glob(".generations/*.partial/parts/frontier/part-*.arrow"))
    damaged = next(part for part in parts if _stored_whole(part))
    data = bytearray(damaged.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 4096] = bytes(4096)
    damaged.write_bytes(bytes(data))
    manifest = run_sweep(plan, out, RunOptions(resume=True))
    assert manifest["chunks_resumed"] == len(plan.chunks) - 1
    for name in TABLE_FILES:
        assert (out / name).read_bytes() == (tmp_path / "clean" / name).read_bytes()


FEW_FILES = """
import resource, sys
from pathlib import Path
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[3]), hard))
from infersize.sweep.config import load_sweep
from infersize.sweep.plan import build_plan
from infersize.sweep.run import RunOptions, run_sweep
plan = build_plan(*load_sweep(Path(sys.argv[1])))
assert len(plan.chunks) > int(sys.argv[3]), len(plan.chunks)
run_sweep(plan, Path(sys.argv[2]), RunOptions(jobs=2))
"""


def test_a_run_of_more_chunks_than_it_may_open_files_publishes(tmp_path):
    """A worker's part read back uncompressed is a view of its memory map, which holds the
    file open: whatever keeps every part at once (the coverage table's merge, the capacity
    figures) reads them into memory instead, so a run of 152 chunks publishes with 96
    files allowed (a common limit is 1,024; a sweep may have 100,000 chunks)."""
    sweep = (
        SMALL.replace("SPEEDUP", "leviathan")
        .replace("chunk_cells: 5000", "chunk_cells: 1000")
        .replace("batch_sizes: [1, 16]", "batch_sizes: [1, 2, 4, 8, 16, 24, 32, 48, 64, 96]")
        .replace("context_lengths: [2048, 32768]", "context_lengths: [1024, 2048, 4096, 8192]")
    )
    (tmp_path / "sweep.yaml").write_text(sweep)
    env = {**os.environ, "INFERSIZE_MIN_PARALLEL_CELLS": "0"}
    argv = [sys.executable, "-c", FEW_FILES, str(tmp_path / "sweep.yaml"), str(tmp_path / "out")]
    done = subprocess.run([*argv, "96"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert pq.read_table(tmp_path / "out" / "coverage.parquet").num_rows > 0


def test_resume_with_another_config_is_refused(tmp_path):
    plan = plan_for(tmp_path, SMALL.replace("SPEEDUP", "leviathan"))
    out = tmp_path / "out"
    run_sweep(plan, out)
    other = generations.start(out, generations.new_run_id())  # unfinished, another config
    (other.work / "plan.json").write_text(json.dumps({"run_hash": "something else"}))
    with pytest.raises(Exception, match="another sweep or config; run without resume"):
        run_sweep(plan, out, RunOptions(resume=True))


BIG = (
    SMALL.replace("SPEEDUP", "roofline")
    .replace(
        "context_lengths: [2048, 32768]", "context_lengths: [1024, 2048, 4096, 8192, 16384, 32768]"
    )
    .replace("chunk_cells: 5000", "chunk_cells: 2000")
)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("whole")
    sweep = tmp / "big.yaml"
    sweep.write_text(BIG)
    done = cli_process(
        tmp, "sweep", "run", str(sweep), "--out", str(tmp / "out"), "--jobs", "2", "-q"
    )
    assert done.wait(timeout=300) == 0, (tmp / "stderr.log").read_text()
    n_chunks = json.loads((tmp / "out" / "manifest.json").read_text())["chunks"]
    return sweep, tmp / "out", n_chunks


def _kill_after(tmp_path: Path, sweep: Path, out: Path, finished: int, *extra: str) -> int:
    """Start a run, SIGKILL its whole process group once `finished` chunks are done; return
    how many chunks had finished by then."""
    proc = cli_process(
        tmp_path, "sweep", "run", str(sweep), "--out", str(out), "--jobs", "2", "-q", *extra
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if _done_markers(out) >= finished:
            break
        time.sleep(0.002)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert not (out / "manifest.json").exists()
    return _done_markers(out)


def _done_markers(out: Path) -> int:
    """Finished chunks of the folder's unfinished run."""
    return len(list(out.glob(".generations/*.partial/parts/done/*.json")))


@pytest.mark.parametrize("share", [0.0, 0.35, 0.7], ids=["first-chunk", "third", "two-thirds"])
def test_sigkill_then_resume_gives_the_same_tables(tmp_path, uninterrupted, share):
    sweep, whole, n_chunks = uninterrupted
    broken = tmp_path / "broken"
    survived = _kill_after(tmp_path, sweep, broken, max(1, int(share * n_chunks)))
    assert 1 <= survived < n_chunks
    # kill the resumed run too, a few chunks later, then resume again
    again = _kill_after(tmp_path, sweep, broken, min(survived + 2, n_chunks - 1), "--resume")
    assert again >= survived
    resumed = cli_process(
        tmp_path, "sweep", "run", str(sweep), "--out", str(broken), "--resume", "--jobs", "2", "-q"
    )
    assert resumed.wait(timeout=300) == 0, (tmp_path / "stderr.log").read_text()
    manifest = json.loads((broken / "manifest.json").read_text())
    assert manifest["chunks_resumed"] >= again
    for name in TABLE_FILES:
        assert (whole / name).read_bytes() == (broken / name).read_bytes(), name


def test_repeated_runs_give_the_same_bytes_and_manifests_record_the_config(tmp_path):
    plan = plan_for(tmp_path, SMALL.replace("SPEEDUP", "linear"))
    first = run_sweep(plan, tmp_path / "a", RunOptions(jobs=2))
    second = run_sweep(plan, tmp_path / "b", RunOptions(jobs=2))
    for name in TABLE_FILES:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert first["config_hash"] == second["config_hash"] == plan.config_hash()
    assert first["infersize_version"] and first["catalog_hash"] == second["catalog_hash"]


def test_cli_run_prints_the_summary_and_the_folder(runner, tmp_path):
    sweep = tmp_path / "s.yaml"
    sweep.write_text(SMALL.replace("SPEEDUP", "leviathan"))
    out = tmp_path / "o"
    result = runner.invoke(app, ["sweep", "run", str(sweep), "--out", str(out), "--jobs", "1"])
    assert result.exit_code == 0, result.output
    assert result.stdout.rstrip().endswith(str(out))
    title = "Best pair per GPU at context 2048, batch 1, α 0.7"
    assert title in result.stdout
    best = runner.invoke(
        app, ["best", str(out), "--gpu", "l4", "--target", "qwen2.5-7b", "--alpha", "0.9", "--json"]
    )
    data = json.loads(best.stdout)
    assert data["selection"]["acceptance_rate"] == 0.9
    assert {r["gpu"] for r in data["rows"]} == {"l4"}
    assert all(r["rank"] == 1 for r in data["rows"])


def test_best_refuses_a_selection_the_sweep_does_not_have(runner, small_run):
    _, out, _ = small_run
    result = runner.invoke(app, ["best", str(out), "--context-length", "5000"])
    assert result.exit_code == 2
    assert result.stderr == (
        "error: --context-length 5000 is not in the sweep; it has 2048, 32768\n"
    )


def test_crossover_is_a_nullable_integer_column(small_run):
    _, out, _ = small_run
    table = pq.read_table(out / "frontier.parquet")
    assert str(table.schema.field("crossover_batch_size").type) == "int64"


def test_best_errors(runner, tmp_path):
    result = runner.invoke(app, ["best", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: {tmp_path}: no best_pairs.parquet there; run 'infersize sweep run' first\n"
    )


def test_unwritable_output_folder(runner, tmp_path):
    sweep = tmp_path / "s.yaml"
    sweep.write_text(SMALL.replace("SPEEDUP", "leviathan"))
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = runner.invoke(app, ["sweep", "run", str(sweep), "--out", str(blocker / "out")])
    assert result.exit_code == 2
    assert result.stderr == f"error: {blocker / 'out'}: cannot create it (Not a directory)\n"


def test_a_second_run_on_the_same_folder_is_refused(runner, tmp_path):
    from infersize.sweep.store.folder import lock

    sweep = tmp_path / "s.yaml"
    sweep.write_text(SMALL.replace("SPEEDUP", "leviathan"))
    out = tmp_path / "o"
    out.mkdir()
    with lock(out):
        result = runner.invoke(app, ["sweep", "run", str(sweep), "--out", str(out)])
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: {out}: another infersize sweep (pid {os.getpid()}) is "
        "writing there; wait for it or choose another --out\n"
    )
    assert runner.invoke(app, ["sweep", "run", str(sweep), "--out", str(out)]).exit_code == 0


def test_a_failed_run_leaves_the_previous_tables_intact(tmp_path, monkeypatch):
    from infersize.sweep import run as run_module

    plan = plan_for(tmp_path, SMALL.replace("SPEEDUP", "leviathan"))
    out = tmp_path / "o"
    run_sweep(plan, out)
    before = {name: (out / name).read_bytes() for name in TABLE_FILES}

    def disk_full(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(run_module.TableMerge, "finish", disk_full)
    with pytest.raises(run_module.OutputError, match=r"writing failed \(No space left on device\)"):
        run_sweep(plan, out)
    assert {name: (out / name).read_bytes() for name in TABLE_FILES} == before


def test_sweep_rows_equal_spec_for_the_same_cell(runner, tmp_path):
    """One implementation: a best-pair row of a vLLM sweep and `spec --engine vllm` at the same
    cell (its optimal K) give the same memory, pool, speedup and throughput."""
    text = SMALL.replace("SPEEDUP", "roofline") + "engine: vllm\n"
    plan = plan_for(tmp_path, text)
    run_sweep(plan, tmp_path / "o")
    row = (
        pl.read_parquet(tmp_path / "o" / "best_pairs.parquet")
        .filter((pl.col("gpu") == "a100-40gb-sxm") & (pl.col("batch_size") == 16))
        .row(0, named=True)
    )
    args = [
        "spec",
        "--target",
        row["target"],
        "--target-quant",
        row["target_quant"],
        "--draft",
        row["draft"],
        "--draft-quant",
        row["draft_quant"],
        "--gpu",
        row["gpu"],
        "--tp",
        str(row["tp"]),
        "--kv-dtype",
        row["kv_dtype"],
        "--context-length",
        str(row["context_length"]),
        "--batch-size",
        str(row["batch_size"]),
        "--acceptance-rate",
        str(row["acceptance_rate"]),
        "--draft-k",
        str(row["optimal_k"]),
        "--max-k",
        "10",
        "--engine",
        "vllm",
        "--speedup-model",
        "roofline",
        "--json",
    ]
    spec = json.loads(runner.invoke(app, args).stdout)
    assert spec["combined_bytes"] / 2**30 == pytest.approx(row["combined_gib"], rel=1e-9)
    assert spec["kv_pool_bytes"] / 2**30 == pytest.approx(row["kv_pool_gib"], rel=1e-9)
    assert spec["max_concurrent_sequences"] == pytest.approx(row["max_concurrent_sequences"])
    assert spec["speedup"] == pytest.approx(row["speedup"], rel=1e-12)
    assert spec["optimal_k"] == row["optimal_k"]
    assert spec["speculative_tokens_per_s"] == pytest.approx(
        row["speculative_tokens_per_s"], rel=1e-12
    )
    assert spec["crossover_batch_size"] == row["crossover_batch_size"] or (
        spec["crossover_batch_size"] is None and row["crossover_batch_size"] is None
    )


def test_small_grids_run_in_one_process(monkeypatch):
    from infersize.sweep.workers import SMALL_GRID_CELLS, jobs_for

    monkeypatch.delenv("INFERSIZE_MIN_PARALLEL_CELLS", raising=False)
    assert jobs_for(2, SMALL_GRID_CELLS - 1, 10) == 1
    assert jobs_for(2, SMALL_GRID_CELLS, 10) == 2
    assert jobs_for(8, 10**9, 3) == 3  # never more workers than chunks


def test_the_resolved_config_is_compact_and_its_hash_stable(tmp_path):
    """The resolved config lists each axis once (the settings follow from it and the catalog):
    a few KiB whatever the grid, and the same hash for the same config."""
    plan = plan_for(tmp_path, SMALL.replace("SPEEDUP", "leviathan"))
    resolved = plan.resolved()
    assert resolved["settings"] == len(plan.settings) and len(json.dumps(resolved)) < 10_000
    again = plan_for(tmp_path, SMALL.replace("SPEEDUP", "leviathan"))
    assert again.config_hash() == plan.config_hash()
    other = plan_for(tmp_path, SMALL.replace("SPEEDUP", "leviathan").replace("[1, 16]", "[1, 8]"))
    assert other.config_hash() != plan.config_hash()
