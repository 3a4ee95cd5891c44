"""sweep/workers.py shares chunks out between the calling process and its workers: every item
done once, the caller taking part (lowest item first), no worker given more than AHEAD ahead,
errors from either side reaching the caller. A thread pool stands in for loky here; the real
loky workers run in test_sweep_run.py (byte-identical tables at --jobs 1 and 2)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersize.sweep.workers import AHEAD, share_out


class CountingPool(ThreadPoolExecutor):
    """A thread pool that records how many items it holds (submitted, not finished)."""

    def __init__(self, workers: int) -> None:
        super().__init__(max_workers=workers)
        self.held, self.most_held = 0, 0
        self.lock = threading.Lock()

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        with self.lock:
            self.held += 1
            self.most_held = max(self.most_held, self.held)
        future = super().submit(fn, *args, **kwargs)
        future.add_done_callback(lambda _: self._release())
        return future

    def _release(self) -> None:
        with self.lock:
            self.held -= 1


def who_did(items: list[int], pool: Executor | None, workers: int, pause_s: float = 0.0):
    """Run share_out over `items`; returns {item: thread ident} in the order yielded."""

    def work(item: int) -> tuple[int, int]:
        time.sleep(pause_s)
        return item, threading.get_ident()

    return dict(share_out(items, work, pool, workers))


@settings(max_examples=40, deadline=None)
@given(n_items=st.integers(0, 30), workers=st.integers(0, 3))
def test_every_item_is_done_exactly_once(n_items, workers):
    pool = ThreadPoolExecutor(max_workers=workers) if workers else None
    try:
        done = list(share_out(list(range(n_items)), lambda i: i * 10, pool, workers))
    finally:
        if pool:
            pool.shutdown()
    assert Counter(done) == Counter(i * 10 for i in range(n_items))


def test_without_workers_the_caller_does_all_in_order():
    done = who_did(list(range(12)), None, 0)
    assert list(done) == list(range(12))
    assert set(done.values()) == {threading.get_ident()}


def test_the_caller_takes_part_starting_with_the_lowest_item():
    with ThreadPoolExecutor(max_workers=1) as pool:
        done = who_did(list(range(24)), pool, 1, pause_s=0.005)
    me = threading.get_ident()
    assert done[0] == me  # the merge waits on nobody for the first chunk
    mine = [item for item, ident in done.items() if ident == me]
    assert 2 <= len(mine) <= 22  # both sides did a share
    assert sorted(done) == list(range(24))


@pytest.mark.parametrize("workers", [1, 3])
def test_no_worker_is_given_more_than_ahead(workers):
    pool = CountingPool(workers)
    with pool:
        who_did(list(range(60)), pool, workers, pause_s=0.002)
    assert 1 <= pool.most_held <= AHEAD * workers


def test_few_items_left_stay_with_the_caller():
    """With three items, one worker is given at most two of them (so both end together):
    never all, and the caller always does the first."""
    pool = CountingPool(1)
    with pool:
        done = who_did([0, 1, 2], pool, 1, pause_s=0.01)
    assert done[0] == threading.get_ident()
    assert pool.most_held <= 2


@pytest.mark.parametrize("failing", [0, 5])
def test_an_error_in_the_caller_or_a_worker_reaches_the_caller(failing):
    def work(item: int) -> int:
        time.sleep(0.002)
        if item == failing:
            raise ValueError(f"item {item} failed")
        return item

    with ThreadPoolExecutor(max_workers=1) as pool, pytest.raises(ValueError, match="failed"):
        list(share_out(list(range(10)), work, pool, 1))


def test_a_worker_run_dry_is_given_the_items_left_while_the_caller_hands_results_on():
    """Six items, one worker: it is given items 1-3 (the rest stay with the caller) and
    finishes them while the consumer (the merge) is slow with item 0; the items left then go
    to the idle worker, not to the caller after its merges."""
    me = threading.get_ident()

    def work(item: int) -> tuple[int, int]:
        time.sleep(0.005)
        return item, threading.get_ident()

    done = {}
    with ThreadPoolExecutor(max_workers=1) as pool:
        for item, ident in share_out(list(range(6)), work, pool, 1):
            done[item] = ident
            time.sleep(0.08)  # the caller merging
    assert [item for item, ident in done.items() if ident == me] == [0]
    assert sorted(done) == list(range(6))


def _python(code: str) -> subprocess.CompletedProcess[str]:
    """`code` run by a new Python process in the project's root, its output kept."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=Path(__file__).parents[1],
    )


def test_a_run_without_workers_never_imports_joblib_or_loky(tmp_path):
    """--jobs 1 starts no loky executor, so releasing workers at the end must not import
    loky (or joblib, 0.1 s) to find none."""
    code = (
        "import sys\nfrom infersize.cli import app\n"
        "try:\n    app("
        + repr(
            [
                "sweep",
                "run",
                "sweeps/quickstart.yaml",
                "--out",
                str(tmp_path / "out"),
                "--jobs",
                "1",
                "-q",
            ]
        )
        + ")\n"
        "except SystemExit as exit:\n    print('EXIT', exit.code, file=sys.stderr)\n"
        "print('POOL', sorted({'joblib', 'loky'} & set(sys.modules)), file=sys.stderr)"
    )
    done = _python(code)
    assert "EXIT 0" in done.stderr and "POOL []" in done.stderr, done.stderr
    assert (tmp_path / "out" / "frontier.parquet").exists()


INTERRUPTED_START = """
import multiprocessing, sys
from loky.backend.process import LokyProcess
from loky.reusable_executor import _ReusablePoolExecutor
from infersize.sweep.workers import loky_workers, stop_workers
submit = _ReusablePoolExecutor.submit
def submit_then_interrupted(self, *args, **kwargs):
    submit(self, *args, **kwargs)
    raise KeyboardInterrupt
_ReusablePoolExecutor.submit = submit_then_interrupted
def workers():
    return [p for p in multiprocessing.active_children() if isinstance(p, LokyProcess)]
try:
    loky_workers(1)
except KeyboardInterrupt:
    print("INTERRUPTED")
print("STARTED", len(workers()))
stop_workers(wait=True)
print("LEFT", len(workers()))
"""


def test_workers_interrupted_while_they_start_are_stopped():
    """A Ctrl-C that arrives while the workers start is delivered when their start unmasks
    it, after loky made them: the run's clean-up (stop_workers) must still find and kill
    them, not leave them importing while the process exits. In a process of its own: no
    worker of another test is there."""
    done = _python(INTERRUPTED_START)
    assert done.stdout.split("\n")[:3] == ["INTERRUPTED", "STARTED 1", "LEFT 0"], done.stderr


def test_a_run_leaves_its_objects_frozen_for_the_exit(tmp_path):
    """After `sweep run`, the process's exit does not walk every object it holds once more
    (the interpreter's last full collection, 0.1 s after a 100 M-cell run): they are frozen
    by then. An exit handler registered before the run runs after the run's own."""
    code = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print('FROZEN', gc.get_freeze_count() > 0, file=sys.stderr))\n"
        "from infersize.cli import app\n"
        f"app(['sweep', 'run', 'sweeps/quickstart.yaml', '--out', {str(tmp_path / 'out')!r},"
        " '-q'])\n"
    )
    done = _python(code)
    assert done.returncode == 0 and "FROZEN True" in done.stderr, done.stderr


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="POSIX signal masks")
def test_workers_start_deaf_to_a_hangup_and_ctrl_c_of_the_group():
    """A terminal's hang-up and Ctrl-C reach every process of the group; only the run may
    hear them. CPython 3.11's multiprocessing resource tracker, started by loky beside its
    own, unblocks SIGINT when it has launched (SIG_UNBLOCK rather than restoring the mask),
    so the workers loky started next heard Ctrl-C: one still importing printed its
    KeyboardInterrupt after the run's line. A new process, as a run is, so that tracker is
    not already running."""
    probe = (
        "import json, signal\n"
        "from infersize.sweep.workers import loky_workers, stop_workers\n"
        "mask = loky_workers(1).submit(signal.pthread_sigmask, signal.SIG_BLOCK, set()).result()\n"
        "print(json.dumps([signal.Signals(s).name for s in mask]))\n"
        "stop_workers(wait=True)\n"
    )
    done = _python(probe)
    assert {"SIGHUP", "SIGINT"} <= set(json.loads(done.stdout)), done.stdout


def test_stopping_the_workers_leaves_the_callers_other_children_alone():
    """A run that fails or is interrupted kills its loky workers, never the processes its
    caller started itself (run_sweep is called from Python too)."""
    probe = (
        "import multiprocessing, time\n"
        "from infersize.sweep.workers import loky_workers, stop_workers\n"
        "if __name__ == '__main__':\n"
        "    other = multiprocessing.get_context('spawn').Process(target=time.sleep, args=(30,))\n"
        "    other.start()\n"
        "    loky_workers(1).submit(time.sleep, 0.01).result()\n"
        "    stop_workers(wait=True)\n"
        "    print(other.is_alive(), other.exitcode)\n"
        "    other.kill()\n"
    )
    done = _python(probe)
    assert done.stdout.split() == ["True", "None"], done.stdout + done.stderr


def _python(probe: str) -> subprocess.CompletedProcess[str]:
    """`probe` run by a new Python process, as a run's own process is."""
    return subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
