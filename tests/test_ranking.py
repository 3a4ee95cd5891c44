"""One ranking rule (tokens/s per GPU, then speedup, then memory) behind best_pairs, `best`, the
run summary, the frontier figure's ★ and the methods figure's points."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from infersize.cli import app
from infersize.core.ranking import ranking_order
from infersize.show.figures import frontier_plot
from infersize.sweep.best import Filters, best_pairs, frontier_rows
from infersize.sweep.methods_view import method_points

ROOT = Path(__file__).resolve().parent.parent


def test_the_rule_orders_by_tokens_per_gpu_then_speedup_then_memory():
    per_gpu = [100.0, 120.0, 120.0, 120.0]
    speedup = [3.0, 1.5, 1.5, 2.0]
    memory = [10.0, 30.0, 20.0, 40.0]
    assert ranking_order(per_gpu, speedup, memory).tolist() == [3, 2, 1, 0]


@given(st.lists(st.tuples(st.floats(1, 1e5), st.floats(1, 5), st.floats(1, 200)), min_size=1))
def test_the_first_row_delivers_the_most_per_gpu(rows):
    per_gpu, speedup, memory = (np.array(c) for c in zip(*rows, strict=True))
    first = ranking_order(per_gpu, speedup, memory)[0]
    assert per_gpu[first] == per_gpu.max()
    assert speedup[first] == speedup[per_gpu == per_gpu.max()].max()


@pytest.fixture(scope="module")
def methods_h100(tmp_path_factory) -> Path:
    """sweeps/methods.yaml on the H100 (TP 1, 2, 4), both KV dtypes, batches 1 and 16."""
    tmp = tmp_path_factory.mktemp("ranking")
    doc = yaml.safe_load((ROOT / "sweeps" / "methods.yaml").read_text())
    doc |= {
        "gpus": [{"name": "h100", "tp": [1, 2, 4]}],
        "batch_sizes": [1, 16],
        "kv_dtypes": ["fp16", "fp8"],
        "output": {"best_top_n": 50},
    }
    (tmp / "m.yaml").write_text(yaml.safe_dump(doc))
    from typer.testing import CliRunner

    result = CliRunner().invoke(
        app, ["sweep", "run", str(tmp / "m.yaml"), "--out", str(tmp / "out"), "-q"]
    )
    assert result.exit_code == 0, result.output
    return tmp / "out"


def _best(runner, out: Path, *args: str) -> list[dict[str, object]]:
    result = runner.invoke(app, ["best", str(out), "--gpu", "h100", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["rows"]


@pytest.mark.parametrize("batch", [1, 16])
def test_the_frontier_star_is_the_row_best_picks(runner, methods_h100, batch):
    rows = _best(runner, methods_h100, "--batch-size", str(batch))
    answer = best_pairs(methods_h100, Filters(gpu="h100", batch_size=batch), rank=50)
    assert answer.selection is not None
    frontier = frontier_rows(methods_h100, "h100-sxm", answer.selection)
    plot = frontier_plot(frontier, answer.rows, "h100-sxm", answer.selection.describe())
    stars = {s.name: s.best for s in plot.targets}
    for row in rows:  # ranks 1..50 were given to the figure: it stars the one `best` shows
        quant = "" if row["draft_quant"] == "none" else f" {row['draft_quant']}"
        name = f"{row['draft']}{quant} K={row['optimal_k']}"
        assert stars[row["target"]] == (name, row["combined_gib"], row["speedup"])


def test_the_methods_figure_ranks_as_best(runner, methods_h100):
    for batch in (1, 16):
        row = _best(runner, methods_h100, "--batch-size", str(batch), "--target", "llama-3.1-8b")[0]
        points = method_points(methods_h100, Filters(gpu="h100", target="llama-3.1-8b"))
        point = next(p for p in points[row["method"]] if p.batch_size == batch)
        tp = f" tp{row['tp']}" if row["tp"] != 1 else ""
        assert point.drafter == f"{row['draft']} K{row['optimal_k']}{tp}"
        assert point.speedup == row["speedup"]
    # the data tells the rules apart: the highest speedup is not what delivers most per GPU
    table = pl.read_parquet(methods_h100 / "best_pairs.parquet")
    one = table.filter((pl.col("target") == "llama-3.1-8b") & (pl.col("acceptance_scenario") == 1))
    fastest = one.sort("speedup", descending=True).unique("batch_size", keep="first")
    assert (fastest["rank"] > 1).any()


def test_best_shows_tp_and_kv_dtype(runner, methods_h100):
    result = runner.invoke(
        app,
        ["best", str(methods_h100), "--gpu", "h100", "--top", "50", "--target", "llama-3.3-70b"],
    )
    assert result.exit_code == 0, result.output
    header = next(line for line in result.stdout.splitlines() if "speedup" in line).split()
    assert header[:5] == ["rank", "gpu", "target", "tp", "KV"]
    rows = _best(runner, methods_h100, "--top", "50", "--target", "llama-3.3-70b")
    assert {r["kv_dtype"] for r in rows} == {"fp16", "fp8"}
