from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from typer.testing import CliRunner

from infersize.catalog import Catalog, load_catalog
from infersize.core.engines import get_engine

SEED_ARGS = [
    "spec", "--target", "qwen2.5-7b", "--target-quant", "fp16", "--draft", "qwen2.5-0.5b",
    "--draft-quant", "int4", "--gpu", "a100", "--context-length", "4096",
    "--acceptance-rate", "0.72", "--draft-k", "4",
]  # fmt: skip


# the parsed-catalog cache of the tests' own (and their subprocesses'), not the user's; made
# for this session and removed when it ends
if "INFERSIZE_CACHE_DIR" not in os.environ:
    os.environ["INFERSIZE_CACHE_DIR"] = tempfile.mkdtemp(prefix="infersize-test-cache-")
    atexit.register(shutil.rmtree, os.environ["INFERSIZE_CACHE_DIR"], ignore_errors=True)

# CI runs the property tests with a fixed seed: a red build is then a real, reproducible failure
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture
def plain():
    return get_engine("plain")


@pytest.fixture
def vllm():
    return get_engine("vllm")


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def cli_process(tmp_path: Path, *args: str) -> subprocess.Popen:
    """The installed command in its own process group (so a SIGKILL of the group reaches its
    workers too); stderr goes to tmp_path/stderr.log."""
    exe = shutil.which("infersize")
    cmd = [exe] if exe else [sys.executable, "-c", "from infersize.cli import app; app()"]
    env = {**os.environ, "INFERSIZE_MIN_PARALLEL_CELLS": "0"}  # workers even for a small grid
    with (tmp_path / "stderr.log").open("a") as log:
        return subprocess.Popen(
            [*cmd, *args], stdout=subprocess.DEVNULL, stderr=log, start_new_session=True, env=env
        )
