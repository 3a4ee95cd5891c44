from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest
from hypothesis import settings
from typer.testing import CliRunner

from infersize.catalog import Catalog, load_catalog
from infersize.core.engines import get_engine
from tests.support.commands import SEED_ARGS, cli_process  # noqa: F401  (fixtures read them)

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
