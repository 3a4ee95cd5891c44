"""`infersize best` and the tables it reads: acceptance scenarios (pairs with their own α),
filters, a target that was swept but never fits, and ranks beyond what was kept."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from infersize.cli import app
from infersize.sweep.config import load_sweep
from infersize.sweep.plan import build_plan
from infersize.sweep.run import RunOptions, run_sweep

PAIRS = """\
name: pairs
pairs:
  - {target: llama-3.1-70b, draft: llama-3.2-1b, acceptance_rates: [0.6, 0.7, 0.8]}
  - {target: llama-3.1-70b, draft: llama-3.2-3b, acceptance_rates: [0.65, 0.75, 0.85]}
  - {target: llama-3.1-8b, draft: llama-3.2-1b, acceptance_rates: [0.55, 0.62, 0.71]}
gpus: [h100, {name: a100, tp: [1, 2, 4]}, l4]
target_quants: [bf16, fp8, int4]
context_lengths: [4096, 16384]
batch_sizes: [1, 8]
draft_k: {start: 1, stop: 8, step: 1}
output: {best_top_n: 3}
"""


@pytest.fixture(scope="module")
def pairs_run(tmp_path_factory) -> Path:
    """Every pair brings its own α list and there is no top-level acceptance_rates."""
    tmp = tmp_path_factory.mktemp("pairs")
    (tmp / "pairs.yaml").write_text(PAIRS)
    config, doc = load_sweep(tmp / "pairs.yaml")
    run_sweep(build_plan(config, doc), tmp / "out", RunOptions(best_top_n=3))
    return tmp / "out"


def best_json(runner, out, *args):
    result = runner.invoke(app, ["best", str(out), *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_top_3_returns_ranks_1_to_3_in_every_scenario(runner, pairs_run):
    for scenario in (0, 1, 2):
        data = best_json(runner, pairs_run, "--scenario", str(scenario), "--top", "3")
        assert data["selection"]["acceptance_scenario"] == scenario
        rows = pl.DataFrame(data["rows"])
        for (_gpu, _target), group in rows.group_by(["gpu", "target"]):
            assert group["rank"].to_list() == list(range(1, group.height + 1))
            assert group["acceptance_scenario"].unique().to_list() == [scenario]
        full = rows.group_by(["gpu", "target"]).len().filter(pl.col("len") == 3)
        assert full.height >= 3  # most groups have three options beating plain decoding


def test_each_pair_keeps_its_own_alpha_within_a_scenario(pairs_run):
    best = pl.read_parquet(pairs_run / "best_pairs.parquet")
    own = {
        ("llama-3.1-70b", "llama-3.2-1b"): [0.6, 0.7, 0.8],
        ("llama-3.1-70b", "llama-3.2-3b"): [0.65, 0.75, 0.85],
        ("llama-3.1-8b", "llama-3.2-1b"): [0.55, 0.62, 0.71],
    }
    for row in best.iter_rows(named=True):
        assert (
            row["acceptance_rate"] == own[(row["target"], row["draft"])][row["acceptance_scenario"]]
        )
        assert row["acceptance_source"] == "pair"


def test_default_selection_is_the_middle_scenario(runner, pairs_run):
    data = best_json(runner, pairs_run)
    assert data["selection"]["acceptance_scenario"] == 1
    assert data["selection"]["acceptance_rate"] is None  # each pair has its own α
    text = runner.invoke(app, ["best", str(pairs_run)]).stdout
    assert "acceptance scenario 1 (each pair's own α)" in text


def test_alpha_is_refused_when_pairs_have_their_own(runner, pairs_run):
    result = runner.invoke(app, ["best", str(pairs_run), "--alpha", "0.7"])
    assert result.exit_code == 2
    assert result.stderr == (
        "error: this sweep gives each pair its own α: choose --scenario 0..2 instead of --alpha\n"
    )


def test_filters(runner, pairs_run):
    rows = best_json(runner, pairs_run, "--gpu", "a100", "--tp", "2", "--top", "3")["rows"]
    assert rows and {r["tp"] for r in rows} == {2} and {r["gpu"] for r in rows} == {"a100-80gb-sxm"}
    rows = best_json(
        runner,
        pairs_run,
        "--target-quant",
        "int4",
        "--context-length",
        "16384",
        "--batch-size",
        "8",
    )["rows"]
    assert rows and all(
        r["target_quant"] == "int4" and r["context_length"] == 16384 and r["batch_size"] == 8
        for r in rows
    )
    assert best_json(runner, pairs_run, "--engine", "plain")["rows"]
    bad = runner.invoke(app, ["best", str(pairs_run), "--tp", "8"])
    assert (bad.exit_code, bad.stderr) == (2, "error: --tp 8 is not in the sweep; it has 1, 2, 4\n")


def test_a_target_swept_but_never_fitting_says_what_came_closest(runner, pairs_run):
    # Llama-3.1-70B never fits on one 24 GB L4 (int4 weights alone are 37 GiB)
    result = runner.invoke(
        app, ["best", str(pairs_run), "--gpu", "l4", "--target", "llama-3.1-70b"]
    )
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "error: gpu l4 target llama-3.1-70b was swept but never fits: the closest, "
    )
    assert "llama-3.1-70b int4 tp1 with llama-3.2-1b bf16 (KV fp16) on l4 at context 4096" in (
        result.stderr
    )
    coverage = pl.read_parquet(pairs_run / "coverage.parquet")
    row = coverage.filter((pl.col("gpu") == "l4") & (pl.col("target") == "llama-3.1-70b"))
    assert row["fitting_rows"].item() == 0 and row["closest_share_of_budget"].item() > 1
    absent = runner.invoke(app, ["best", str(pairs_run), "--target", "qwen2.5-7b"])
    assert (absent.exit_code, absent.stderr) == (
        2,
        "error: --target qwen2.5-7b is not in this sweep; it has llama-3.1-70b, llama-3.1-8b\n",
    )
    unknown = runner.invoke(app, ["best", str(pairs_run), "--target", "qwen9-7b"])
    assert unknown.exit_code == 2 and "unknown target 'qwen9-7b'" in unknown.stderr


def test_a_catalog_gpu_not_swept_is_not_in_this_sweep(runner, pairs_run):
    result = runner.invoke(app, ["best", str(pairs_run), "--gpu", "t4"])
    assert (result.exit_code, result.stderr) == (
        2,
        "error: --gpu t4 is not in this sweep; it has a100-80gb-sxm, h100-sxm, l4\n",
    )
    typo = runner.invoke(app, ["best", str(pairs_run), "--gpu", "t44"])
    assert typo.exit_code == 2 and typo.stderr.startswith("error: unknown gpu 't44'")


def test_top_beyond_what_was_kept_says_so(runner, pairs_run):
    data = best_json(runner, pairs_run, "--top", "5")
    assert data["notes"] == ["only the top 3 of each group were kept (output.best_top_n: 3)"]
    text = runner.invoke(app, ["best", str(pairs_run), "--top", "5"]).stdout
    assert "note: only the top 3 of each group were kept (output.best_top_n: 3)" in text


def test_report_and_frontier_figure_work_with_scenarios(runner, pairs_run, tmp_path):
    report = runner.invoke(app, ["report", str(pairs_run), "--out", str(tmp_path / "r.html")])
    assert report.exit_code == 0, report.output
    html = (tmp_path / "r.html").read_text()
    assert html.count('<section class="gpu"') == 3  # h100, a100 and the l4 (8B only)
    figure = runner.invoke(
        app, ["plot", "frontier", str(pairs_run), "--gpu", "h100", "--out", str(tmp_path / "f.png")]
    )
    assert figure.exit_code == 0, figure.output
