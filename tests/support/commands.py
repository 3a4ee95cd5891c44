"""The seed example's `spec` arguments, the small capacity deployment the attack tests load,
and the installed command run in its own process group."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

SEED_ARGS = [
    "spec",
    "--target",
    "qwen2.5-7b",
    "--target-quant",
    "fp16",
    "--draft",
    "qwen2.5-0.5b",
    "--draft-quant",
    "int4",
    "--gpu",
    "a100",
    "--context-length",
    "4096",
    "--acceptance-rate",
    "0.72",
    "--draft-k",
    "4",
]
# Qwen2.5-7B with its 0.5B draft on one H100: small enough to simulate in a test
QWEN_CAPACITY = ["capacity", "--target", "qwen2.5-7b", "--draft", "qwen2.5-0.5b", "--gpu", "h100"]
ALPHA = ["--acceptance-rate", "0.7"]


def cli_process(tmp_path: Path, *args: str) -> subprocess.Popen:
    """The installed command in its own process group (so a SIGKILL of the group reaches its
    workers too); stderr goes to tmp_path/stderr.log. It runs at a lower priority (nice 10,
    its workers too) so that the test that watches it is never starved of the CPU: a test that
    saw the first chunk done and was then kept off both cores for a second signalled a run
    that had already ended (exit 0 where 130 was due)."""
    exe = shutil.which("infersize")
    cmd = [exe] if exe else [sys.executable, "-c", "from infersize.cli import app; app()"]
    nice = shutil.which("nice")
    cmd = [nice, "-n", "10", *cmd] if nice else cmd
    env = {**os.environ, "INFERSIZE_MIN_PARALLEL_CELLS": "0"}  # workers even for a small grid
    with (tmp_path / "stderr.log").open("a") as log:
        return subprocess.Popen(
            [*cmd, *args], stdout=subprocess.DEVNULL, stderr=log, start_new_session=True, env=env
        )
