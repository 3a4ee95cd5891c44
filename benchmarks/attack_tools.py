"""What benchmarks/attack.py runs cases with: the installed command in a process of its own,
killed past a time limit, and the judgement of what it did."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HANG_S = 60  # no command of any case needs more on the development machine
OUTCOMES = ("clean", "data lost", "exit 1", "hang", "code run", "wrong")


@dataclass(frozen=True)
class Ran:
    code: int | None  # None: killed after the time limit
    stdout: str
    stderr: str
    seconds: float


def command(argv: list[str], cwd: Path, timeout: float = HANG_S, **popen: object) -> Ran:
    """The installed command (or python, for scripts) in its own session, killed whole past
    `timeout`."""
    exe = [shutil.which("infersize") or "infersize"] if argv[0] != "python" else [sys.executable]
    start = time.perf_counter()
    proc = subprocess.Popen(
        [*exe, *argv[1 if argv[0] == "python" else 0 :]],
        cwd=cwd,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        **popen,  # type: ignore[call-overload]
    )
    try:
        out, err = proc.communicate(timeout=timeout)
        return Ran(proc.returncode, out, err, time.perf_counter() - start)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return Ran(None, out, err, time.perf_counter() - start)


def judge(ran: Ran, code: int | set[int], words: str = "") -> tuple[str, str]:
    """(outcome, note) of one command that should end with `code` (2: one error line with
    `words` in it)."""
    codes = {code} if isinstance(code, int) else code
    tail = (ran.stderr.strip().splitlines() or [""])[-1][:160]
    if ran.code is None:
        return "hang", f"killed after {ran.seconds:.0f} s"
    if ran.code == 1 or "Traceback" in ran.stderr or "internal error" in ran.stderr:
        return "exit 1", tail
    if ran.code not in codes:
        return "wrong", f"exit {ran.code}: {tail}"
    if ran.code == 2 and (ran.stderr.count("\n") != 1 or not ran.stderr.startswith("error: ")):
        return "wrong", f"not one line: {ran.stderr[:160]!r}"
    if ran.code == 0 and "Warning" in ran.stderr:
        return "wrong", f"a warning: {tail}"
    if ran.code == 2 and words not in ran.stderr:
        return "wrong", f"expected {words!r}: {tail}"
    return "clean", f"{ran.seconds:.1f} s"


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every regular file below `folder` and its bytes (what a user put there; the lock, which
    holds the pid of the last run, is infersize's)."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in folder.rglob("*")
        if p.is_file() and p.name != ".infersize.lock"
    }


def lost(before: dict[str, bytes], folder: Path) -> list[str]:
    return [
        name
        for name, data in before.items()
        if not (folder / name).is_file() or (folder / name).read_bytes() != data
    ]
