"""Scale-out: the quickstart sweep on a real Dask cluster (distributed.LocalCluster) gives the
same bytes as the default loky backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from infersize.cli import app
from infersize.sweep.config import load_sweep
from infersize.sweep.plan import build_plan
from infersize.sweep.run import RunOptions, run_sweep

distributed = pytest.importorskip("distributed")
QUICKSTART = Path(__file__).resolve().parent.parent / "sweeps" / "quickstart.yaml"
TABLES = ["frontier.parquet", "frontier.csv", "best_pairs.parquet", "best_pairs.csv"]


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as local:
        yield local


def test_dask_cluster_gives_the_loky_bytes(cluster, tmp_path, runner):
    config, doc = load_sweep(QUICKSTART)
    plan = build_plan(config, doc)
    run_sweep(plan, tmp_path / "loky", RunOptions(jobs=2))
    result = runner.invoke(
        app,
        [
            "sweep",
            "run",
            str(QUICKSTART),
            "--out",
            str(tmp_path / "dask"),
            "--backend",
            "dask",
            "--scheduler",
            cluster.scheduler_address,
        ],
    )
    assert result.exit_code == 0, result.output
    for name in TABLES:
        assert (tmp_path / "loky" / name).read_bytes() == (tmp_path / "dask" / name).read_bytes()


def test_unreachable_scheduler_is_a_clear_error(runner, tmp_path):
    result = runner.invoke(
        app,
        [
            "sweep",
            "run",
            str(QUICKSTART),
            "--out",
            str(tmp_path / "o"),
            "--backend",
            "dask",
            "--scheduler",
            "tcp://127.0.0.1:9",
        ],
    )
    assert result.exit_code == 2
    assert result.stderr.startswith("error: cannot reach the Dask scheduler tcp://127.0.0.1:9")
