"""The output folder under a second round of attack: an adopted folder's old files replaced by a
user's, `--out` inside an output folder, a `.generations` that is a link, folders a user named
like runs, publishes killed half-way, temp files left by a kill, a full disk, a FIFO for a lock,
integer overflow, empty list items, and signals in every phase. Nothing a user wrote is deleted
or replaced, every error is one line, and every interrupted run can be resumed."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from infersize.cli import app
from infersize.sweep.run import OutputError, RunOptions, run_sweep
from infersize.sweep.store import folder
from tests.support.commands import cli_process
from tests.support.sweeps import plan_of, published, temp_files


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """The tiny sweep run once, with cells, into a fresh folder: what resumed runs must equal."""
    tmp = tmp_path_factory.mktemp("clean")
    run_sweep(plan_of(tmp), tmp / "out", RunOptions(with_cells=True))
    return published(tmp / "out")


def _old_layout(folder: Path) -> None:
    """What infersize 0.2 wrote: tables at the top, cells/ of Parquet parts, a manifest."""
    (folder / "cells" / "gpu=l4").mkdir(parents=True)
    (folder / "cells" / "gpu=l4" / "part-000000.parquet").write_bytes(b"old cells")
    for name in ("frontier.parquet", "frontier.csv", "best_pairs.parquet", "schema.json"):
        (folder / name).write_text("old")
    (folder / "manifest.json").write_text(json.dumps({"infersize_version": "0.2.0"}))


def test_an_adopted_folder_keeps_user_files_put_where_its_old_files_were(tmp_path):
    """Data lost 1: after a run adopted an old layout, the user puts a cells/ folder with
    notes.txt and their own schema.json where the old ones were; the next run refused nothing
    and deleted both. Now it refuses them, as a never-adopted folder does."""
    plan, out = plan_of(tmp_path), tmp_path / "L"
    out.mkdir()
    _old_layout(out)
    run_sweep(plan, out, RunOptions(with_cells=True))
    assert (out / "cells").is_symlink() and (out / "schema.json").is_symlink()
    (out / "cells").unlink()
    (out / "cells").mkdir()
    (out / "cells" / "notes.txt").write_text("mine")
    (out / "schema.json").unlink()
    (out / "schema.json").write_text("my schema")
    with pytest.raises(OutputError, match="a file infersize did not write is where it publishes"):
        run_sweep(plan, out, RunOptions(with_cells=True))
    assert (out / "cells" / "notes.txt").read_text() == "mine"
    assert (out / "schema.json").read_text() == "my schema"


def test_an_adopted_folders_old_file_changed_before_its_first_run_is_kept(tmp_path, monkeypatch):
    """The old layout's files are recorded when the folder is adopted: one the user changes
    before the first run publishes is theirs, and is neither replaced nor deleted."""
    from infersize.sweep import run as run_module

    plan, out = plan_of(tmp_path), tmp_path / "L"
    out.mkdir()
    _old_layout(out)
    with monkeypatch.context() as patch:  # adopted, then the run fails before publishing
        patch.setattr(run_module.TableMerge, "finish", lambda *_: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            run_sweep(plan, out, RunOptions(with_cells=True))
    (out / "cells" / "gpu=l4" / "part-000000.parquet").write_bytes(b"my edit")
    (out / "frontier.csv").write_text("my table")
    with pytest.raises(OutputError, match=r"cells: a file infersize did not write"):
        run_sweep(plan, out, RunOptions(with_cells=True, resume=True))
    assert (out / "cells" / "gpu=l4" / "part-000000.parquet").read_bytes() == b"my edit"
    assert (out / "frontier.csv").read_text() == "my table"


@pytest.mark.parametrize(
    "inside",
    [".generations/mine.partial", ".generations", "current/x", ".generations/x/y"],
    ids=["a_partial_name", "generations", "through_current", "deeper"],
)
def test_out_inside_an_output_folder_is_refused(tmp_path, inside):
    """Data lost 2: `--out A/.generations/mine.partial` was accepted, and the next run on A
    deleted that whole output."""
    plan, folder = plan_of(tmp_path), tmp_path / "A"
    run_sweep(plan, folder)
    before = sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
    with pytest.raises(OutputError, match=f"is inside the infersize output folder {folder}"):
        run_sweep(plan, folder / inside)
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) == before


def test_a_generations_link_is_refused_and_its_target_untouched(tmp_path):
    """Data lost 3: with A/.generations -> ../V and V/backup.partial/a.txt, a run exited 0,
    deleted V/backup.partial/ and wrote into V."""
    plan, folder = plan_of(tmp_path), tmp_path / "A"
    run_sweep(plan, folder)
    victim = tmp_path / "V"
    (victim / "backup.partial").mkdir(parents=True)
    (victim / "backup.partial" / "a.txt").write_text("mine")
    (folder / ".generations").rename(tmp_path / "kept")
    (folder / ".generations").symlink_to("../V")
    with pytest.raises(OutputError, match="is a symlink or not a folder; infersize will not"):
        run_sweep(plan, folder)
    assert [p.name for p in victim.rglob("*")] == ["backup.partial", "a.txt"]


def test_folders_a_user_named_like_runs_keep_their_files(tmp_path):
    """`.generations/backup.partial/` is no run's folder: left alone. A run's own partial
    folder with a user's file in it loses only the run's files."""
    plan, folder = plan_of(tmp_path), tmp_path / "A"
    run_sweep(plan, folder)
    mine = folder / ".generations" / "backup.partial"
    mine.mkdir()
    (mine / "a.txt").write_text("mine")
    run_id = "20260101T000000-0badcafe"
    unfinished = folder / ".generations" / f"{run_id}.partial"
    (unfinished / "parts" / "done").mkdir(parents=True)
    (unfinished / "parts" / "done" / "000000.json").write_text("{}")
    (unfinished / "notes.txt").write_text("mine too")
    run_sweep(plan, folder)
    assert (mine / "a.txt").read_text() == "mine"
    assert [p.name for p in unfinished.rglob("*")] == ["notes.txt"]


KILL_AT = """
import os, sys
from pathlib import Path
from infersize.sweep.store import folder
from infersize.sweep.config import load_sweep
from infersize.sweep.plan import build_plan
from infersize.sweep.run import RunOptions, run_sweep

name = "link" if hasattr(folder, "link") else "_link"
real = getattr(folder, name)

def link(out_dir, link_name, target):
    if link_name == folder.CURRENT and sys.argv[3] == "renamed":
        os._exit(9)  # as SIGKILL would: no clean-up
    real(out_dir, link_name, target)
    if link_name == folder.CURRENT and sys.argv[3] == "switched":
        os._exit(9)

setattr(folder, name, link)
config, doc = load_sweep(Path(sys.argv[1]))
run_sweep(build_plan(config, doc), Path(sys.argv[2]), RunOptions(with_cells=True))
"""


@pytest.mark.parametrize("phase", ["renamed", "switched"])
def test_resume_recovers_a_publish_killed_half_way(tmp_path, clean, phase):
    """A kill between renaming the finished run and switching `current` left a folder where
    every --resume failed ("writing failed (No such file or directory)"); one between the
    switch and the tidy-up left the partial folder behind (and a resume then made a stray
    top-level .files.json link). Both now resume to the tables of an uninterrupted run."""
    plan_of(tmp_path)
    sweep, out = tmp_path / "leviathan.yaml", tmp_path / "out"
    killed = subprocess.run([sys.executable, "-c", KILL_AT, str(sweep), str(out), phase])
    assert killed.returncode == 9
    run_sweep(plan_of(tmp_path), out, RunOptions(with_cells=True, resume=True))
    assert published(out) == clean
    assert not (out / ".files.json").exists() and not (out / ".files.json").is_symlink()
    assert not temp_files(out)
    runs = [p.name for p in (out / folder.GENERATIONS).iterdir()]
    assert runs == [(out / folder.CURRENT).readlink().name]


def test_no_temp_file_is_published_after_a_kill(tmp_path, clean, monkeypatch):
    """A SIGKILL mid-chunk left a 0-byte .part-*.parquet.*.tmp in cells/ that the resumed run
    published. Temp files now live in the run's tmp/ folder, and a resume clears what a
    killed run (of this version or an older one) left anywhere in its folder."""
    from infersize.sweep import run as run_module

    plan, out = plan_of(tmp_path), tmp_path / "out"
    with monkeypatch.context() as patch:
        patch.setattr(run_module.TableMerge, "finish", lambda *_: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            run_sweep(plan, out, RunOptions(with_cells=True))
    (work,) = out.glob(".generations/*.partial")
    (work / "tmp" / ".frontier.csv.0123456789ab.tmp").write_text("half")
    cells = next((work / "gen" / "cells").iterdir())
    (cells / ".part-000001.parquet.killed.tmp").write_bytes(b"")  # where older versions put it
    run_sweep(plan, out, RunOptions(with_cells=True, resume=True))
    assert published(out) == clean
    assert not temp_files(out)


def test_a_full_disk_is_one_line_and_leaves_no_traceback(runner, tmp_path, monkeypatch):
    """On a full disk the right error line was followed by a ParquetWriter.__del__ traceback:
    the writer, failing to write its footer, was left open and failed again when collected.
    Here every close that would write to the file fails, as on a full disk."""
    from infersize.sweep import merge

    real_close = pq.ParquetWriter.close
    sink = getattr(merge, "_Sink", ())

    def full_disk_close(writer):
        if isinstance(writer.where, sink) and writer.where.dropped:
            return real_close(writer)  # closing into nothing needs no disk
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pq.ParquetWriter, "close", full_disk_close)
    ignored = []
    monkeypatch.setattr(sys, "unraisablehook", ignored.append)
    sweep = tmp_path / "s.yaml"
    plan_of(tmp_path)
    sweep.write_text((tmp_path / "leviathan.yaml").read_text())
    result = runner.invoke(app, ["sweep", "run", str(sweep), "--out", str(tmp_path / "o")])
    code, stderr = result.exit_code, result.stderr
    del result  # it holds the exception, and through it the writers
    gc.collect()
    assert code == 2
    assert stderr == (
        f"error: {tmp_path / 'o'}: writing failed (No space left on device); the tables there "
        "are the previous run's, untouched, and --resume continues this one\n"
    )
    assert [str(u.object) for u in ignored] == []


def test_a_fifo_at_the_lock_path_is_a_clean_error(runner, tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    os.mkfifo(out / folder.LOCK)
    plan_of(tmp_path)
    result = runner.invoke(
        app, ["sweep", "run", str(tmp_path / "leviathan.yaml"), "--out", str(out)]
    )
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"error: {out / folder.LOCK}: the lock is not a regular file (a FIFO, device or "
        "socket); remove it\n"
    )


@pytest.mark.parametrize(
    ("axis", "key"),
    [
        ("context_lengths: [9223372036854775807]", "context_lengths"),
        ("batch_sizes: [9223372036854775807]", "batch_sizes"),
        (
            "context_lengths: {start: 1, stop: 9223372036854775807, step: 4611686018427387904}",
            "context_lengths",
        ),
        ("gpus: [{name: h100, tp: [9223372036854775807]}]", "gpus.0.tp"),
    ],
    ids=["context", "batch", "context_range", "tp"],
)
def test_an_axis_value_that_overflows_is_an_error_naming_its_key(runner, tmp_path, axis, key):
    """`context_lengths: [9223372036854775807]` ended in an OverflowError (exit 1)."""
    lines = [
        "targets: [qwen2.5-7b]",
        "drafts: [qwen2.5-0.5b]",
        "gpus: [h100]",
        "context_lengths: [4096]",
    ]
    lines = [line for line in lines if line.split(":")[0] != axis.split(":")[0]] + [axis]
    sweep = tmp_path / "s.yaml"
    sweep.write_text("\n".join(lines) + "\n")
    result = runner.invoke(app, ["sweep", "run", str(sweep), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: {sweep}: line {len(lines)}: key '{key}': ")
    assert "at most 2,147,483,647" in result.stderr and result.stderr.count("\n") == 1


def test_a_grid_with_nothing_left_to_score_is_an_error(runner, tmp_path):
    """Every TP size skipped: the run ended in a polars ComputeError (exit 1)."""
    sweep = tmp_path / "s.yaml"
    sweep.write_text(
        "targets: [qwen2.5-7b]\ndrafts: [qwen2.5-0.5b]\ngpus: [{name: h100, tp: [3]}]\n"
        "context_lengths: [4096]\n"
    )
    result = runner.invoke(app, ["sweep", "run", str(sweep), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"error: {sweep}: no cell to score (skipped 1 tp sizes that do not divide the "
        "attention heads)\n"
    )


def test_a_price_of_1e308_is_refused_before_it_reaches_a_table(runner, tmp_path):
    """Rounding $/Mtok of a GPU priced at 1e308 overflowed, and a fleet of such GPUs costs an
    infinite number of dollars: the price is bounded where the sweep file is read."""
    sweep = tmp_path / "s.yaml"
    sweep.write_text(
        "targets: [qwen2.5-7b]\ndrafts: [qwen2.5-0.5b]\n"
        "gpus: [{name: h100, price_usd_per_hour: 1e308}]\ncontext_lengths: [4096]\n"
    )
    result = runner.invoke(app, ["sweep", "run", str(sweep), "--out", str(tmp_path / "o"), "-q"])
    assert (result.exit_code, result.stderr) == (
        2,
        f"error: {sweep}: line 3: key 'gpus.0.price_usd_per_hour': Input should be less than or "
        "equal to 1000000\n",
    )
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("rates", ["0.5,,0.3", "0.5,0.3,", ",0.5"])
def test_empty_items_in_acceptance_rates_are_an_error(runner, rates):
    """`--acceptance-rates 0.5,,0.3` was read as 0.5,0.3."""
    result = runner.invoke(
        app,
        [
            "spec",
            "--target",
            "llama-3.1-8b",
            "--method",
            "eagle3",
            "--gpu",
            "h100",
            "--acceptance-rates",
            rates,
            "--draft-k",
            "2",
        ],
    )
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"error: --acceptance-rates has an empty item between commas, got '{rates}': give one "
        "number per position (0.73,0.52,0.35)\n"
    )


def _workers_of(pid: int) -> list[int]:
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            children += [int(c) for c in (task / "children").read_text().split()]
    return [c for c in children if b"popen_loky_posix" in _cmdline(c)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _alive(pids: list[int]) -> list[int]:
    return [p for p in pids if _cmdline(p)]


def _start_with_workers(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen, list[int]]:
    """A --jobs 2 run of the fleet, once its worker has started (while the plan is built)."""
    fleet = Path(__file__).parent.parent / "sweeps" / "fleet.yaml"
    out = tmp_path / "out"
    proc = cli_process(tmp_path, "sweep", "run", str(fleet), "--out", str(out), "-j", "2", *extra)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        workers = _workers_of(proc.pid)
        if workers:
            return proc, workers
        time.sleep(0.005)
    raise AssertionError("the run started no worker")


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
@pytest.mark.parametrize("stop", ["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_signal_while_the_plan_is_built_stops_the_workers_and_says_how_to_resume(tmp_path, stop):
    """SIGTERM while the plan was built exited 143 with no message and left the workers alive
    for minutes (SIGHUP the same)."""
    proc, workers = _start_with_workers(tmp_path)
    try:
        os.kill(proc.pid, getattr(signal, stop))
        assert proc.wait(timeout=30) == 130
        deadline = time.monotonic() + 1.0
        while _alive(workers) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _alive(workers) == [], "workers outlived the run by a second"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    log = (tmp_path / "stderr.log").read_text()
    assert log.endswith("--out " + str(tmp_path / "out") + " --resume` continues\n"), log


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
def test_a_parent_killed_by_sigkill_leaves_no_worker(tmp_path):
    """SIGKILL of the main process alone, while its worker scores a chunk, left the worker
    alive for minutes: workers now watch their parent and exit within a fraction of a
    second."""
    proc, workers = _start_with_workers(tmp_path)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob("out/.generations/*.partial/parts/done/*.json")):
        assert time.monotonic() < deadline and proc.poll() is None, "no chunk was scored"
        time.sleep(0.002)
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 3.0
        while _alive(workers) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _alive(workers) == [], "workers outlived a killed run by three seconds"
    finally:
        for pid in _alive(workers):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
