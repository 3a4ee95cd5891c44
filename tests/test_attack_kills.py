"""A capacity sweep killed between the merge of its tables and their publish: the previous
tables stay as they were, and `--resume` finishes the run with the tables an uninterrupted run
writes, byte for byte (a sweep without cells has no cells folder left to remove)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from infersize.cli import app
from tests.support.sweeps import TWO_TARGETS

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
