"""Rows at a context longer than a model holds (its max_position_embeddings) are marked in every
table, never rank in best_pairs or `infersize best`, and are counted in coverage."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import polars as pl
import pytest
import yaml

from infersize.catalog.store import load_catalog
from infersize.cli import app
from infersize.service.context import max_context_tokens
from infersize.sweep.config import load_sweep
from infersize.sweep.plan import build_plan
from infersize.sweep.run import RunOptions, run_sweep

ROOT = Path(__file__).resolve().parent.parent

# "best pair per GPU at context 8192, batch 16" as a user writes it over the tables
BEST_PER_GPU = """
SELECT gpu, target, draft, context_length, speculative_tokens_per_s_per_gpu
FROM read_parquet('{best}')
WHERE context_length = 8192 AND batch_size = 16 AND acceptance_scenario = 1
QUALIFY row_number() OVER (
    PARTITION BY gpu ORDER BY speculative_tokens_per_s_per_gpu DESC, speedup DESC, combined_gib
) = 1
ORDER BY gpu
"""


def _run(tmp: Path, doc: dict[str, object]) -> Path:
    (tmp / "sweep.yaml").write_text(yaml.safe_dump(doc))
    config, loaded = load_sweep(tmp / "sweep.yaml")
    run_sweep(build_plan(config, loaded), tmp / "out", RunOptions())
    return tmp / "out"


@pytest.fixture(scope="module")
def fleet_slice(tmp_path_factory) -> Path:
    """sweeps/fleet.yaml (llama-2 targets hold 4,096 tokens, llama-68m 2,048) at one slice."""
    doc = yaml.safe_load((ROOT / "sweeps" / "fleet.yaml").read_text())
    doc |= {"context_lengths": [2048, 8192], "batch_sizes": [16], "output": {"cells": False}}
    return _run(tmp_path_factory.mktemp("fleet"), doc)


def _limit(model: str) -> float:
    limit = max_context_tokens(load_catalog().model(model))
    return float("inf") if limit is None else limit


def test_duckdb_best_pair_per_gpu_is_never_beyond_a_models_context(fleet_slice):
    frontier = pl.read_parquet(fleet_slice / "frontier.parquet").filter(
        (pl.col("context_length") == 8192) & (pl.col("batch_size") == 16)
    )
    beyond = frontier.filter(~pl.col("within_max_context"))
    assert set(beyond["target"]) >= {"llama-2-7b", "llama-2-13b", "llama-2-70b"}
    assert "llama-68m" in set(beyond["draft"])  # the sweep does hold rows no model can run
    best = duckdb.sql(BEST_PER_GPU.format(best=fleet_slice / "best_pairs.parquet")).pl()
    assert best.height == 10  # every GPU of the fleet has an answer
    for row in best.iter_rows(named=True):
        assert row["context_length"] <= min(_limit(row["target"]), _limit(row["draft"])), row
    every = pl.read_parquet(fleet_slice / "best_pairs.parquet")
    assert every["within_max_context"].all()
    assert not every["target"].is_in(["llama-2-7b", "llama-2-13b", "llama-2-70b"]).any() or (
        every.filter(pl.col("target").str.starts_with("llama-2"))["context_length"].max() == 2048
    )


def test_the_limit_columns_are_the_catalogs(fleet_slice):
    frontier = pl.read_parquet(fleet_slice / "frontier.parquet")
    row = frontier.filter((pl.col("target") == "llama-2-7b") & (pl.col("draft") == "llama-68m"))
    assert set(row["target_max_context_tokens"]) == {4096}
    assert set(row["draft_max_context_tokens"]) == {2048}
    assert set(zip(row["context_length"], row["within_max_context"], strict=True)) == {
        (2048, True),
        (8192, False),
    }
    ngram = load_catalog().model("ngram")
    assert max_context_tokens(ngram) is None  # heads and n-gram lookup use the target's positions


def test_coverage_counts_rows_beyond_context(fleet_slice):
    coverage = pl.read_parquet(fleet_slice / "coverage.parquet")
    llama2 = coverage.filter(pl.col("target") == "llama-2-7b")
    # at 8192 every llama-2-7b row is beyond its 4,096 tokens: half the rows of two contexts
    assert (llama2["beyond_max_context_rows"] * 2 >= llama2["rows"]).all()
    assert (llama2["fitting_within_max_context_rows"] <= llama2["fitting_rows"]).all()
    qwen = coverage.filter(pl.col("target") == "qwen2.5-7b")  # 32,768 tokens: all within
    assert (qwen["beyond_max_context_rows"] == 0).all()
    limit = load_catalog().model("qwen2.5-7b").max_position_embeddings
    assert set(qwen["target_max_context_tokens"]) == {limit}


def test_best_says_when_a_target_has_no_row_within_context(runner, fleet_slice):
    args = ["best", str(fleet_slice), "--gpu", "h100", "--context-length", "8192"]
    result = runner.invoke(app, [*args, "--batch-size", "16", "--target", "llama-2-7b"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "no fitting draft pair in this selection",
        "note: llama-2-7b holds at most 4,096 tokens (max_position_embeddings): none of its "
        "rows is within max context at context 8,192",
    ]
    data = json.loads(runner.invoke(app, [*args, "--batch-size", "16", "--json"]).stdout)
    assert {r["target"] for r in data["rows"]}.isdisjoint({"llama-2-7b", "llama-2-13b"})
    assert any(n.startswith("llama-2-70b holds at most 4,096 tokens") for n in data["notes"])


def test_a_target_that_fits_only_beyond_its_context_says_so(runner, tmp_path):
    doc = {
        "name": "short",
        "pairs": [{"target": "llama-2-7b", "draft": "llama-68m", "acceptance_rates": [0.7]}],
        "gpus": ["h100"],
        "context_lengths": [8192],
        "batch_sizes": [1],
        "draft_k": {"start": 1, "stop": 4, "step": 1},
    }
    out = _run(tmp_path, doc)
    result = runner.invoke(app, ["best", str(out), "--target", "llama-2-7b"])
    assert result.exit_code == 2
    assert result.output.splitlines()[-1] == (
        "error: target llama-2-7b was swept but fits only at contexts longer than its target "
        "or draft holds (llama-2-7b: 4,096 tokens), so no row ranks"
    )


def test_the_run_summary_counts_rows_beyond_context(runner, tmp_path):
    doc = {
        "name": "mixed",
        "pairs": [
            {"target": "llama-2-7b", "draft": "llama-68m", "acceptance_rates": [0.7]},
            {"target": "llama-3.1-8b", "draft": "llama-3.2-1b", "acceptance_rates": [0.7]},
        ],
        "gpus": ["h100"],
        "context_lengths": [2048, 4096, 8192],
        "batch_sizes": [1],
        "draft_k": {"start": 1, "stop": 4, "step": 1},
    }
    (tmp_path / "mixed.yaml").write_text(yaml.safe_dump(doc))
    result = runner.invoke(
        app, ["sweep", "run", str(tmp_path / "mixed.yaml"), "--out", str(tmp_path / "out")]
    )
    assert result.exit_code == 0, result.output
    # llama-68m holds 2,048 tokens, llama-2-7b 4,096: the pair's 4096 and 8192 rows are beyond
    coverage = pl.read_parquet(tmp_path / "out" / "coverage.parquet")
    beyond = int(coverage["beyond_max_context_rows"].sum())
    rows = int(coverage["rows"].sum())
    assert beyond == rows // 3  # two of the six (pair, context) rows, at every precision
    assert (
        f"{beyond:,} of {rows:,} rows are at a context longer than their target or draft holds "
        "(within_max_context false): they never rank"
    ) in result.stderr
