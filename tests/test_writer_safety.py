"""The sweep writer under attack: killed runs, failing writes at every
step, foreign files, resumes of another configuration, and paths that try to leave the folder.
Nothing a user wrote is ever deleted or half-replaced, and the published tables are always one
whole run's."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest

from infersize.cli import app
from infersize.sweep.config import load_sweep
from infersize.sweep.plan import build_plan
from infersize.sweep.run import OutputError, RunOptions, run_sweep
from infersize.sweep.store import folder, walk
from tests.support.commands import cli_process
from tests.support.sweeps import (
    BIG,
    TINY,
    plan_of,
    published,
    scored_unfinished,
    temp_files,
    wait_for_chunks,
)


@pytest.fixture(scope="module")
def clean_runs(tmp_path_factory):
    """Each configuration run once into a fresh folder: what every other run must equal."""
    tmp = tmp_path_factory.mktemp("clean")
    runs = {}
    for speedup in ("leviathan", "linear"):
        out = tmp / speedup
        run_sweep(plan_of(tmp, speedup), out, RunOptions(with_cells=True))
        runs[speedup] = published(out)
    return runs


class FailAt:
    """Makes the n-th file operation of a run fail as a full disk would: every temp file the
    writer creates and every rename or link it makes counts."""

    def __init__(self, n: int) -> None:
        self.n, self.calls = n, 0

    def tick(self) -> None:
        self.calls += 1
        if self.calls == self.n:
            raise OSError(28, "No space left on device")

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        mkstemp, rename = tempfile.mkstemp, Path.rename
        replace, symlink = Path.replace, Path.symlink_to
        new_temp, move = walk.new_temp, walk.move

        def counted(real):
            def call(*args, **kwargs):
                self.tick()
                return real(*args, **kwargs)

            return call

        monkeypatch.setattr(tempfile, "mkstemp", counted(mkstemp))
        monkeypatch.setattr(Path, "rename", counted(rename))
        monkeypatch.setattr(Path, "replace", counted(replace))
        monkeypatch.setattr(Path, "symlink_to", counted(symlink))
        monkeypatch.setattr(walk, "new_temp", counted(new_temp))  # below .generations
        monkeypatch.setattr(walk, "move", counted(move))


def test_a_failure_at_every_write_leaves_one_whole_generation(tmp_path, monkeypatch, clean_runs):
    """Item 2. The previous run is published; a new run of another configuration fails at its
    n-th file operation, for every n until it succeeds. Each time the folder shows the old run
    whole or the new run whole, never a mix, and holds no temp file; a resume then finishes."""
    base = tmp_path / "base"
    run_sweep(plan_of(tmp_path, "leviathan"), base, RunOptions(with_cells=True))
    new_plan = plan_of(tmp_path, "linear")
    n = 0
    while True:
        n += 1
        out = tmp_path / f"run{n}"
        shutil.copytree(base, out, symlinks=True)
        with monkeypatch.context() as patch:
            FailAt(n).install(patch)
            try:
                run_sweep(new_plan, out, RunOptions(with_cells=True))
                failed = False
            except OutputError as exc:
                failed = True
                assert "the tables there are the previous run's, untouched" in str(exc)
        assert not temp_files(out), (n, temp_files(out))
        expected = clean_runs["leviathan"] if failed else clean_runs["linear"]
        assert published(out) == expected, f"mixed tables after a failure at operation {n}"
        if not failed:
            break
        run_sweep(new_plan, out, RunOptions(with_cells=True, resume=True))
        assert published(out) == clean_runs["linear"]
        shutil.rmtree(out)
    assert n > 20  # every chunk's parts, the merges, the manifest and the switch were hit


def test_a_user_file_in_the_cells_folder_is_never_deleted(tmp_path):
    """Item 3. A file put into the published cells/ lives in that generation: the next run
    publishes beside it and keeps the old generation rather than delete the user's file; an
    older layout's folder with a foreign file in cells/ is refused, not adopted."""
    plan = plan_of(tmp_path)
    out = tmp_path / "out"
    run_sweep(plan, out, RunOptions(with_cells=True))
    notes = out / "cells" / "notes.txt"
    notes.write_text("mine")
    real = notes.resolve()
    run_sweep(plan, out, RunOptions(with_cells=True))
    assert real.read_text() == "mine"
    assert not (out / "cells" / "notes.txt").exists()  # the new generation's cells/
    legacy = tmp_path / "legacy"
    (legacy / "cells" / "gpu=l4").mkdir(parents=True)
    (legacy / "cells" / "notes.txt").write_text("mine")
    (legacy / "manifest.json").write_text(json.dumps({"infersize_version": "0.1.0"}))
    with pytest.raises(OutputError, match=r"holds files infersize did not write \(cells"):
        run_sweep(plan, legacy)
    assert (legacy / "cells" / "notes.txt").read_text() == "mine"


def test_a_foreign_folder_is_refused_and_an_old_layout_is_adopted(tmp_path):
    plan = plan_of(tmp_path)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("mine")
    with pytest.raises(OutputError, match=r"holds files infersize did not write \(thesis.tex\)"):
        run_sweep(plan, foreign)
    assert [p.name for p in foreign.iterdir()] == ["thesis.tex"]
    old = tmp_path / "old"  # what infersize 0.2 wrote: plain files at the top
    old.mkdir()
    for name in ("frontier.parquet", "frontier.csv", "best_pairs.parquet", "schema.json"):
        (old / name).write_text("old")
    (old / "manifest.json").write_text(json.dumps({"infersize_version": "0.2.0"}))
    run_sweep(plan, old)
    assert (old / "frontier.parquet").is_symlink() and (old / "schema.json").read_text() != "old"


def _resumable(tmp_path: Path, plan, monkeypatch, **settings) -> Path:
    """A run that scored every chunk and then failed merging: an unfinished run to resume."""
    out = tmp_path / "out"
    scored_unfinished(out, plan, monkeypatch, **settings)
    return out


@pytest.mark.parametrize(
    "change",
    [{"best_top_n": 1}, {"with_cells": True}, {"formats": ("parquet",)}],
    ids=["best_top_n", "cells", "formats"],
)
def test_resume_refuses_a_run_of_other_outputs(tmp_path, monkeypatch, change):
    """Item 4: the hash a resume must match covers every output setting."""
    plan = plan_of(tmp_path)
    out = _resumable(tmp_path, plan, monkeypatch, best_top_n=3)
    with pytest.raises(OutputError, match="another sweep or config; run without resume"):
        run_sweep(plan, out, RunOptions(resume=True, **{"best_top_n": 3, **change}))


def test_resume_refuses_a_changed_overlay_catalog(tmp_path, monkeypatch):
    overlay = tmp_path / "mine.yaml"
    overlay.write_text("gpus: []\n")
    path = tmp_path / "s.yaml"
    path.write_text(TINY.replace("SPEEDUP", "leviathan") + f"catalog: [{overlay}]\n")
    config, doc = load_sweep(path)
    plan = build_plan(config, doc, (str(overlay),))
    out = _resumable(tmp_path, plan, monkeypatch)
    overlay.write_text("gpus: []\nmodels: []\n")  # same keys, other bytes
    from infersize.catalog.store import load_catalog

    load_catalog.cache_clear()
    with pytest.raises(OutputError, match="another sweep or config"):
        run_sweep(plan, out, RunOptions(resume=True))


def test_resume_drops_the_half_written_tables_of_a_killed_run(tmp_path, monkeypatch, clean_runs):
    """Tables are appended to while chunks are scored (sweep/merge.py): a run killed then
    leaves temp files in its generation, which its resume removes instead of publishing."""
    plan = plan_of(tmp_path)
    out = _resumable(tmp_path, plan, monkeypatch, with_cells=True)
    (gen,) = out.glob(".generations/*.partial/gen")
    (gen / ".frontier.csv.killed.tmp").write_text("gpu,half a row")
    run_sweep(plan, out, RunOptions(resume=True, with_cells=True))
    assert not temp_files(out)
    assert published(out) == clean_runs["leviathan"]


def test_resume_rescores_a_damaged_part(tmp_path, monkeypatch, clean_runs):
    plan = plan_of(tmp_path)
    out = _resumable(tmp_path, plan, monkeypatch, with_cells=True)
    parts = sorted(out.glob(".generations/*.partial/parts/frontier/part-*.arrow"))
    parts[0].write_bytes(parts[0].read_bytes()[:50])  # truncated
    manifest = run_sweep(plan, out, RunOptions(resume=True, with_cells=True))
    assert manifest["chunks_resumed"] == manifest["chunks"] - 1
    assert published(out) == clean_runs["leviathan"]


def test_a_planted_lock_symlink_is_refused_and_its_target_untouched(tmp_path):
    """Item 5."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / folder.LOCK).symlink_to(victim)
    with pytest.raises(OutputError, match="is a symlink; infersize will not write through it"):
        run_sweep(plan_of(tmp_path), out)
    assert victim.read_text() == "precious"


def test_names_and_folders_stay_where_they_are_put(runner, tmp_path, monkeypatch):
    sweep = tmp_path / "s.yaml"
    monkeypatch.chdir(tmp_path)
    for name in ("../../x", "/tmp/x", "..", "a/b"):
        sweep.write_text(TINY.replace("SPEEDUP", "leviathan").replace("tiny", name, 1))
        result = runner.invoke(app, ["sweep", "run", str(sweep)])
        assert result.exit_code == 2 and "key 'name'" in result.stderr, name
    sweep.write_text(TINY.replace("SPEEDUP", "leviathan"))
    result = runner.invoke(app, ["sweep", "run", str(sweep), "--out", ""])
    assert result.exit_code == 2
    assert result.stderr == "error: --out must name a folder, got the current folder\n"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    sweep.write_text(TINY.replace("SPEEDUP", "leviathan") + "output: {dir: ~/tables}\n")
    assert runner.invoke(app, ["sweep", "run", str(sweep), "-q"]).exit_code == 0
    assert (tmp_path / "home" / "tables" / "frontier.parquet").is_file()
    assert not (tmp_path / "~").exists()


def test_report_never_writes_through_a_fifo_or_a_device(runner, tmp_path):
    out = tmp_path / "out"
    run_sweep(plan_of(tmp_path), out)
    fifo = tmp_path / "pipe.html"
    os.mkfifo(fifo)
    for target in (fifo, Path("/dev/null")):
        result = runner.invoke(app, ["report", str(out), "--out", str(target)])
        assert result.exit_code == 2
        assert (
            result.stderr == f"error: {target}: cannot write (exists and is not a regular file)\n"
        )
    assert fifo.exists() and not fifo.is_file()


def test_workers_of_a_killed_run_write_nothing_into_the_next(tmp_path):
    """Item 1. SIGKILL reaches only the main process: its workers are orphaned and would
    finish their chunks. A new run of another configuration in the same folder must publish
    exactly its own tables, and nothing appears in the folder after it ends."""
    big, other = tmp_path / "big.yaml", tmp_path / "other.yaml"
    big.write_text(BIG)
    other.write_text(BIG.replace("roofline", "leviathan"))
    clean = tmp_path / "clean"
    assert (
        cli_process(tmp_path, "sweep", "run", str(other), "--out", str(clean), "-q").wait(300) == 0
    )
    out = tmp_path / "out"
    proc = cli_process(tmp_path, "sweep", "run", str(big), "--out", str(out), "--jobs", "2", "-q")
    try:
        wait_for_chunks(out, proc, 1)
        os.kill(proc.pid, signal.SIGKILL)  # the main process only
        proc.wait(timeout=30)
        second = cli_process(tmp_path, "sweep", "run", str(other), "--out", str(out), "-q")
        assert second.wait(timeout=300) == 0, (tmp_path / "stderr.log").read_text()
        time.sleep(3)  # time for any orphan to try
        for name in ("frontier.parquet", "best_pairs.parquet", "coverage.parquet"):
            assert (out / name).read_bytes() == (clean / name).read_bytes(), name
        assert [p.name for p in (out / folder.GENERATIONS).iterdir()] == [
            (out / folder.CURRENT).readlink().name
        ]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def test_sigterm_kills_the_workers_and_says_how_to_resume(tmp_path):
    """Item 11: SIGTERM (and Ctrl-C) end the run with exit 130, one line, no worker left."""
    big = tmp_path / "big.yaml"
    big.write_text(BIG)
    out = tmp_path / "out"
    proc = cli_process(tmp_path, "sweep", "run", str(big), "--out", str(out), "--jobs", "2", "-q")
    wait_for_chunks(out, proc, 1)
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=60) == 130
    log = (tmp_path / "stderr.log").read_text()
    assert f"interrupted: `infersize sweep run {big} --out {out} --resume` continues" in log
    done = out.glob(".generations/*.partial/parts/done/*.json")
    before = sorted((p.name, p.stat().st_mtime_ns) for p in done)
    time.sleep(3)
    after = sorted(
        (p.name, p.stat().st_mtime_ns) for p in out.glob(".generations/*.partial/parts/done/*.json")
    )
    assert after == before  # no worker finished a chunk after the run ended
    resumed = cli_process(tmp_path, "sweep", "run", str(big), "--out", str(out), "--resume", "-q")
    assert resumed.wait(timeout=300) == 0


def _loky_workers_of(pid: int) -> list[int]:
    """The loky worker processes among `pid`'s children."""
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children += [int(c) for c in (task / "children").read_text().split()]
    return [
        child
        for child in children
        if b"popen_loky_posix" in Path(f"/proc/{child}/cmdline").read_bytes()
    ]


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
def test_a_killed_worker_ends_the_run_in_one_line_and_resume_finishes_it(tmp_path):
    """The kernel's out-of-memory killer takes a worker: exit 2 and one line that says so, the
    previous tables untouched, and --resume gives the tables of an uninterrupted run."""
    big = tmp_path / "big.yaml"
    big.write_text(BIG)
    clean, out = tmp_path / "clean", tmp_path / "out"
    run = ["sweep", "run", str(big), "-q", "--jobs", "2"]
    assert cli_process(tmp_path, *run, "--out", str(clean)).wait(300) == 0
    proc = cli_process(tmp_path, *run, "--out", str(out))
    try:
        wait_for_chunks(out, proc, 1)
        workers = _loky_workers_of(proc.pid)
        assert workers, "the run has no worker to kill"
        for worker in workers:
            os.kill(worker, signal.SIGKILL)
        assert proc.wait(timeout=60) == 2
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    log = (tmp_path / "stderr.log").read_text().splitlines()
    assert log[-1] == (
        f"error: {out}: a worker process was killed (SIGKILL(-9)), most often by the kernel's "
        "out-of-memory killer: try fewer --jobs or a smaller chunk_cells; the tables there are "
        "the previous run's, untouched, and --resume continues this one"
    )
    assert not (out / "frontier.parquet").exists()  # nothing was published
    assert cli_process(tmp_path, *run, "--out", str(out), "--resume").wait(300) == 0
    resumed, uninterrupted = published(out), published(clean)
    rows = [json.loads(d.pop("manifest"))["rows"] for d in (resumed, uninterrupted)]
    assert rows[0] == rows[1]
    assert resumed == uninterrupted
