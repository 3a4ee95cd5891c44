"""The cases of benchmarks/attack.py that take more than one command: the output folder (old
layouts, folders inside it, links, kills, signals, a full disk), the catalog cache and names
drawn in figures. Each lays out its folder, runs, and returns (outcome, note)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pickle
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from attack_tools import command, judge, lost, snapshot

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.support.sweeps import BIG, TINY
from tests.test_output_folder_attacks import KILL_AT

Outcome = tuple[str, str]
SCENARIOS: list[tuple[str, str, Callable[[Path], Outcome]]] = []
FLEET = Path(__file__).resolve().parent.parent / "sweeps" / "fleet.yaml"


def scenario(
    group: str, name: str
) -> Callable[[Callable[[Path], Outcome]], Callable[[Path], Outcome]]:
    def register(case: Callable[[Path], Outcome]) -> Callable[[Path], Outcome]:
        SCENARIOS.append((group, name, case))
        return case

    return register


def tiny(tmp: Path, speedup: str = "leviathan", extra: str = "") -> Path:
    path = tmp / f"{speedup}.yaml"
    path.write_text(TINY.replace("SPEEDUP", speedup) + extra)
    return path


def run(tmp: Path, sweep: Path, out: Path, *extra: str) -> Outcome:
    return judge(command(["sweep", "run", str(sweep), "--out", str(out), "-q", *extra], tmp), 0)


def refused(tmp: Path, argv: list[str], words: str, keep: Path) -> Outcome:
    """`argv` must be refused in one line, and nothing below `keep` lost."""
    before = snapshot(keep)
    outcome = judge(command(argv, tmp), 2, words)
    return ("data lost", ", ".join(gone[:3])) if (gone := lost(before, keep)) else outcome


def old_layout(folder: Path) -> None:
    (folder / "cells" / "gpu=l4").mkdir(parents=True)
    (folder / "cells" / "gpu=l4" / "part-000000.parquet").write_bytes(b"old cells")
    for name in ("frontier.parquet", "frontier.csv", "best_pairs.parquet", "schema.json"):
        (folder / name).write_text("old")
    (folder / "manifest.json").write_text(json.dumps({"infersize_version": "0.2.0"}))


@scenario("output folder", "adopted folder: user files where old ones were")
def adopted(tmp: Path) -> Outcome:
    out, sweep = tmp / "L", tiny(tmp, extra="output: {cells: true}\n")
    out.mkdir()
    old_layout(out)
    if (first := run(tmp, sweep, out))[0] != "clean":
        return first
    for name in ("cells", "schema.json"):
        (out / name).unlink()
    (out / "cells").mkdir()
    (out / "cells" / "notes.txt").write_text("mine")
    (out / "schema.json").write_text("my schema")
    return refused(tmp, ["sweep", "run", str(sweep), "--out", str(out), "-q"], "did not write", out)


for inside in (".generations/mine.partial", "current/x", ".generations"):

    @scenario("output folder", f"--out A/{inside}")
    def out_inside(tmp: Path, inside: str = inside) -> Outcome:
        """The run inside is refused; were it not, the next run on A must not delete it."""
        sweep, folder = tiny(tmp), tmp / "A"
        if (first := run(tmp, sweep, folder))[0] != "clean":
            return first
        ran = command(["sweep", "run", str(sweep), "--out", str(folder / inside), "-q"], tmp)
        inner = snapshot(folder / inside) if ran.code == 0 else {}  # the output made in there
        again = run(tmp, sweep, folder)
        if gone := lost(inner, folder / inside):
            return "data lost", ", ".join(gone[:3])
        outcome = judge(ran, 2, "is inside the infersize output folder")
        return outcome if outcome[0] != "clean" else again


@scenario("output folder", ".generations is a link")
def generations_link(tmp: Path) -> Outcome:
    sweep, folder, victim = tiny(tmp), tmp / "A", tmp / "V"
    if (first := run(tmp, sweep, folder))[0] != "clean":
        return first
    (victim / "backup.partial").mkdir(parents=True)
    (victim / "backup.partial" / "a.txt").write_text("mine")
    (folder / ".generations").rename(tmp / "kept")
    (folder / ".generations").symlink_to("../V")
    argv = ["sweep", "run", str(sweep), "--out", str(folder), "-q"]
    outcome = refused(tmp, argv, "is a symlink", victim)
    return ("data lost", "wrote into V") if len(list(victim.rglob("*"))) != 2 else outcome


@scenario("output folder", "user folders named like runs")
def named_like_runs(tmp: Path) -> Outcome:
    sweep, folder = tiny(tmp), tmp / "A"
    if (first := run(tmp, sweep, folder))[0] != "clean":
        return first
    (folder / ".generations" / "backup.partial").mkdir()
    (folder / ".generations" / "backup.partial" / "a.txt").write_text("mine")
    run_like = folder / ".generations" / "20260101T000000-0badcafe.partial"
    run_like.mkdir()
    (run_like / "notes.txt").write_text("mine too")
    before = snapshot(folder / ".generations")
    outcome = run(tmp, sweep, folder)
    gone = [n for n in before if "partial" in n and not (folder / ".generations" / n).exists()]
    return ("data lost", ", ".join(gone)) if gone else outcome


@scenario("output folder", "foreign folder")
def foreign(tmp: Path) -> Outcome:
    (tmp / "F").mkdir()
    (tmp / "F" / "thesis.tex").write_text("mine")
    return refused(
        tmp, ["sweep", "run", str(tiny(tmp)), "--out", str(tmp / "F")], "did not write", tmp / "F"
    )


@scenario("output folder", "user file in published cells/")
def user_file_in_cells(tmp: Path) -> Outcome:
    sweep, out = tiny(tmp, extra="output: {cells: true}\n"), tmp / "o"
    if (first := run(tmp, sweep, out))[0] != "clean":
        return first
    notes = out / "cells" / "notes.txt"
    notes.write_text("mine")
    real = notes.resolve()
    outcome = run(tmp, sweep, out)
    return outcome if real.is_file() and real.read_text() == "mine" else ("data lost", str(real))


@scenario("output folder", "lock is a symlink")
def lock_link(tmp: Path) -> Outcome:
    (tmp / "o").mkdir()
    (tmp / "victim").write_text("precious")
    (tmp / "o" / ".infersize.lock").symlink_to(tmp / "victim")
    return refused(tmp, ["sweep", "run", str(tiny(tmp)), "--out", str(tmp / "o")], "symlink", tmp)


@scenario("output folder", "lock is a FIFO")
def lock_fifo(tmp: Path) -> Outcome:
    (tmp / "o").mkdir()
    os.mkfifo(tmp / "o" / ".infersize.lock")
    return refused(tmp, ["sweep", "run", str(tiny(tmp)), "--out", str(tmp / "o")], "FIFO", tmp)


@scenario("output folder", "two runs at once")
def two_runs(tmp: Path) -> Outcome:
    """A second run while the first holds the folder's lock (held here, as a run holds it)."""
    sweep, out = tiny(tmp), tmp / "o"
    if (first := run(tmp, sweep, out))[0] != "clean":
        return first
    with (out / ".infersize.lock").open("r+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write(str(os.getpid()))
        held.flush()
        return judge(command(["sweep", "run", str(sweep), "--out", str(out)], tmp), 2, "another")


for phase in ("renamed", "switched"):

    @scenario("kills", f"killed when {phase}, then --resume")
    def killed_publish(tmp: Path, phase: str = phase) -> Outcome:
        sweep, out, clean = tiny(tmp), tmp / "o", tmp / "clean"
        killed = command(["python", "-c", KILL_AT, str(sweep), str(out), phase], tmp)
        if killed.code != 9:
            return judge(killed, 9)
        if (resumed := run(tmp, sweep, out, "--resume", "--cells"))[0] != "clean":
            return resumed
        run(tmp, sweep, clean, "--cells")
        return same_tables(out, clean) or strays(out) or resumed


def same_tables(out: Path, clean: Path) -> Outcome | None:
    for name in ("frontier.parquet", "best_pairs.csv", "coverage.parquet"):
        if (out / name).read_bytes() != (clean / name).read_bytes():
            return "wrong", f"{name} differs from an uninterrupted run's"
    return None


def strays(out: Path) -> Outcome | None:
    temps = [p.name for p in (out / "current").resolve().rglob("*") if ".tmp" in p.name]
    if temps or (out / ".files.json").is_symlink():
        return "wrong", f"left behind: {temps or '.files.json'}"
    return None


def _wait_for(tmp: Path, proc: subprocess.Popen[bytes], pattern: str) -> bool:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if list(tmp.glob(pattern)):
            return True
        time.sleep(0.002)
    return False


def _cli(tmp: Path, *argv: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "INFERSIZE_MIN_PARALLEL_CELLS": "0"}
    with (tmp / "stderr.log").open("ab") as log:
        return subprocess.Popen(
            ["infersize", *argv],
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
            env=env,
        )


@scenario("kills", "SIGKILL mid-chunk, then --resume")
def killed_mid_chunk(tmp: Path) -> Outcome:
    big, out = tmp / "big.yaml", tmp / "o"
    big.write_text(BIG + "output: {cells: true}\n")
    proc = _cli(tmp, "sweep", "run", str(big), "--out", str(out), "-j", "2", "-q")
    _wait_for(tmp, proc, "o/.generations/*.partial/parts/done/*.json")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    if (resumed := run(tmp, big, out, "--resume"))[0] != "clean":
        return resumed
    run(tmp, big, tmp / "clean")
    return same_tables(out, tmp / "clean") or strays(out) or resumed


def _workers(pid: int) -> list[int]:
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


def _gone_within(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while any(_cmdline(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.01)
    return not any(_cmdline(p) for p in pids)


for stop, when in [(s, "plan") for s in ("SIGTERM", "SIGHUP", "SIGINT")] + [
    ("SIGTERM", "scoring"),
    ("SIGKILL", "plan"),
    ("SIGKILL", "scoring"),
]:

    @scenario("signals", f"{stop} while {when}")
    def stopped(tmp: Path, stop: str = stop, when: str = when) -> Outcome:
        proc = _cli(tmp, "sweep", "run", str(FLEET), "--out", str(tmp / "o"), "-j", "2")
        workers: list[int] = []
        while not workers and proc.poll() is None:
            workers = _workers(proc.pid)
            time.sleep(0.002)
        if when == "scoring":
            _wait_for(tmp, proc, "o/.generations/*.partial/parts/done/*.json")
        os.kill(proc.pid, getattr(signal, stop))
        code = proc.wait(60)
        if not _gone_within(workers, 1.0 if stop != "SIGKILL" else 3.0):
            for pid in workers:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            return "hang", "workers outlived the run"
        log = (tmp / "stderr.log").read_text()
        if stop != "SIGKILL" and (code != 130 or log.count("\n") != 1 or "--resume" not in log):
            return "wrong", f"exit {code}: {log[-200:]!r}"
        return "clean", ""


@scenario("kills", "a worker killed (out of memory)")
def worker_killed(tmp: Path) -> Outcome:
    big, out = tmp / "big.yaml", tmp / "o"
    big.write_text(BIG)
    proc = _cli(tmp, "sweep", "run", str(big), "--out", str(out), "-j", "2", "-q")
    _wait_for(tmp, proc, "o/.generations/*.partial/parts/done/*.json")
    for worker in _workers(proc.pid):
        os.kill(worker, signal.SIGKILL)
    code, log = proc.wait(60), (tmp / "stderr.log").read_text()
    if code != 2 or log.count("\n") != 1:
        return "wrong", f"exit {code}: {log[-200:]!r}"
    return run(tmp, big, out, "--resume")


@scenario("kills", "full disk (file size limit)")
def full_disk(tmp: Path) -> Outcome:
    sweep = tmp / "big.yaml"
    sweep.write_text(BIG + "output: {formats: [parquet]}\n")

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))

    argv = ["sweep", "run", str(sweep), "--out", str(tmp / "o"), "-q", "-j", "1"]
    return judge(command(argv, tmp, preexec_fn=small_files), 2, "writing failed")


@scenario("cache", "pruning keeps a user's files")
def cache_pruning(tmp: Path) -> Outcome:
    cache = tmp / "cache"
    cache.mkdir(mode=0o700)
    (cache / "catalog-mydata.pickle").write_bytes(b"mine")
    os.utime(cache / "catalog-mydata.pickle", ns=(0, 0))
    env = {**os.environ, "INFERSIZE_CACHE_DIR": str(cache)}
    for tflops in range(100, 110):
        (tmp / "o.yaml").write_text(GPU.replace("100", str(tflops)))
        ran = command(
            [
                "spec",
                "--target",
                "qwen2.5-7b",
                "--draft",
                "none",
                "--gpu",
                "mine",
                "--catalog",
                str(tmp / "o.yaml"),
            ],
            tmp,
            env=env,
        )
        if ran.code != 0:
            return judge(ran, 0)
    return ("clean", "") if (cache / "catalog-mydata.pickle").is_file() else ("data lost", "")


GPU = (
    "gpus:\n  - {id: mine, name: Mine, memory_bytes: 85029027840, memory_source: t,\n"
    "     bandwidth_gb_per_s: 3350, fp16_tflops: 100}\n"
)


class RunsCode:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Callable[[str], int], tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


@scenario("cache", "an entry others could write holds a pickle")
def cache_code(tmp: Path) -> Outcome:
    cache, marker = tmp / "cache", tmp / "ran"
    cache.mkdir(mode=0o755)
    env = {**os.environ, "INFERSIZE_CACHE_DIR": str(cache)}
    spec = ["spec", "--target", "qwen2.5-7b", "--draft", "none", "--gpu", "h100"]
    command(spec, tmp, env=env, preexec_fn=lambda: os.umask(0))
    for entry in cache.iterdir():
        entry.write_bytes(pickle.dumps(RunsCode(str(marker))))
        entry.chmod(0o666)
    outcome = judge(command(spec, tmp, env=env), 0)
    return ("code run", "the cache ran a pickle") if marker.exists() else outcome


@scenario("names", "mathtext name in report and plot frontier")
def mathtext(tmp: Path) -> Outcome:
    folder = tmp / "d$\\frac{1}{$"
    folder.mkdir()
    from attack_cases import TINY_CONFIG

    (folder / "config.json").write_text(TINY_CONFIG)
    sweep = tmp / "s.yaml"
    sweep.write_text(
        "targets: [llama-3.1-8b]\ndrafts: ['d$\\frac{1}{$']\ngpus: [l4]\n"
        "context_lengths: [256]\nallow_cross_tokenizer: true\n"
    )
    if (first := run(tmp, sweep, tmp / "o"))[0] != "clean":
        return first
    if (report := judge(command(["report", "o", "--out", "r.html"], tmp), 0))[0] != "clean":
        return report
    return judge(command(["plot", "frontier", "o", "--gpu", "l4", "--out", "f.png"], tmp), 0)
