"""Sweeps killed and signalled: a capacity sweep killed between the merge of its tables and
their publish is finished by `--resume` with the tables an uninterrupted run writes, byte for
byte (a sweep without cells has no cells folder left to remove); a hang-up or Ctrl-C of the
whole process group ends the run in its one line."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infersize.cli import app
from tests.support.commands import cli_process
from tests.support.sweeps import BIG, TWO_TARGETS, wait_for_chunks

TABLES = (
    "frontier.parquet",
    "frontier.csv",
    "best_pairs.parquet",
    "best_pairs.csv",
    "coverage.parquet",
    "capacity.parquet",
    "capacity.csv",
    "sweep.resolved.yaml",
)
SMALL = TWO_TARGETS.replace("requests: 200", "requests: 100")

# The sweep run in a process of its own that kills itself (SIGKILL: no clean-up of any kind)
# where it would publish the generation it has merged
KILLED_AT_PUBLISH = """
import os, signal, sys
from infersize.sweep.store import generations
generations.publish = lambda generation: os.kill(os.getpid(), signal.SIGKILL)
from infersize.cli import app
sys.argv = ["infersize", *sys.argv[1:]]
app()
"""


def _tables(out: Path) -> dict[str, bytes]:
    return {name: (out / name).read_bytes() for name in TABLES}


def test_a_capacity_sweep_killed_before_its_publish_resumes_to_the_same_bytes(tmp_path, runner):
    sweep = tmp_path / "capacity.yaml"
    sweep.write_text(SMALL)
    clean, out = tmp_path / "clean", tmp_path / "out"
    assert (
        runner.invoke(app, ["sweep", "run", str(sweep), "--out", str(clean), "-q"]).exit_code == 0
    )
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_AT_PUBLISH, "sweep", "run", str(sweep), "--out", str(out)],
        capture_output=True,
        timeout=600,
    )
    assert killed.returncode == -signal.SIGKILL
    assert not (out / "capacity.parquet").exists()  # nothing published, nothing half-published
    resumed = runner.invoke(app, ["sweep", "run", str(sweep), "--out", str(out), "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert _tables(out) == _tables(clean)
    assert json.loads((out / "manifest.json").read_text())["chunks_resumed"] > 0


@pytest.mark.parametrize("stop", ["SIGHUP", "SIGINT"])
def test_a_hangup_or_ctrl_c_of_the_whole_group_ends_in_one_line(tmp_path, stop):
    """A terminal's hang-up and Ctrl-C reach every process of its group: loky's resource
    tracker died of SIGHUP and its successor printed six tracebacks after the right line. Now
    the run alone hears them: exit 130, the one line, and no worker left behind."""
    big = tmp_path / "big.yaml"
    big.write_text(BIG)
    out = tmp_path / "out"
    proc = cli_process(tmp_path, "sweep", "run", str(big), "--out", str(out), "--jobs", "2", "-q")
    try:
        wait_for_chunks(out, proc, 1)
        os.killpg(proc.pid, getattr(signal, stop))
        assert proc.wait(timeout=60) == 130
        time.sleep(1)  # loky's tracker and workers, if any were left, print as they end
        log = (tmp_path / "stderr.log").read_text()
        assert log == f"interrupted: `infersize sweep run {big} --out {out} --resume` continues\n"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
