"""α as a property of the pair: the published figures (configs/acceptance.yaml, each with its
source) and the prior fitted to them, in spec and in sweeps."""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl
import pytest

from infersize.catalog.store import load_catalog
from infersize.cli import app
from infersize.core.acceptance import fit_prior, prior_alpha
from infersize.service.acceptance import pair_acceptance
from infersize.sweep.config import load_sweep
from infersize.sweep.plan import build_plan
from infersize.sweep.run import run_sweep
from tests.support.commands import SEED_ARGS

CATALOG = load_catalog()
FITTED = CATALOG.prior_rows


def test_the_catalog_prior_is_the_fit_of_its_published_rows():
    fit = fit_prior(
        [r.draft_params_b for r in FITTED],
        [r.target_params_b for r in FITTED],
        [r.alpha for r in FITTED],
    )
    prior = CATALOG.prior
    assert (prior.intercept, prior.slope) == (round(fit.intercept, 4), round(fit.slope, 4))
    assert (prior.rmse, prior.max_abs_error) == (round(fit.rmse, 4), round(fit.max_abs_error, 4))
    # the same least squares, computed apart from fit_prior: numpy's polyfit on the rows, and the
    # RMSE and the largest error of its residuals written out
    x = np.array([math.log10(r.draft_params_b / r.target_params_b) for r in FITTED])
    y = np.array([r.alpha for r in FITTED])
    slope, intercept = np.polyfit(x, y, 1)
    residuals = [a - (intercept + slope * xi) for xi, a in zip(x, y, strict=True)]
    rmse = math.sqrt(sum(e * e for e in residuals) / len(residuals))
    assert (fit.intercept, fit.slope) == pytest.approx((intercept, slope), abs=1e-12)
    assert fit.rmse == pytest.approx(rmse, abs=1e-12)
    assert fit.max_abs_error == pytest.approx(max(abs(e) for e in residuals), abs=1e-12)
    assert prior.pairs_fitted == fit.pairs == len(FITTED) >= 30
    assert 0.05 <= prior.slope <= 0.15  # α rises by about 0.1 per tenfold draft size


def test_published_pairs_are_reproduced_within_the_stated_error():
    prior = CATALOG.prior
    errors = np.array(
        [prior_alpha(prior, r.draft_params_b, r.target_params_b) - r.alpha for r in FITTED]
    )
    assert np.abs(errors).max() <= prior.max_abs_error + 1e-4
    assert np.sqrt(np.mean(errors**2)) == pytest.approx(prior.rmse, abs=1e-4)
    assert np.mean(np.abs(errors) <= 2 * prior.rmse) >= 0.9


def test_every_published_row_has_a_source_and_a_conversion():
    for row in CATALOG.published_acceptance:
        assert row.source and row.conversion and row.metric and row.value, row.target
        if row.use_for_fit:
            assert row.why_not_fitted is None
        else:
            assert row.why_not_fitted


def test_published_pair_uses_its_figures():
    # Spec-Bench and EAGLE-3's SpS rows: Vicuna-13B with the vicuna-68m draft
    known = pair_acceptance(CATALOG.model("vicuna-13b-v1.3"), CATALOG.model("vicuna-68m"), CATALOG)
    rows = [
        r.alpha for r in FITTED if r.target_id == "vicuna-13b-v1.3" and r.draft_id == "vicuna-68m"
    ]
    assert known.source == "published" and len(rows) == 11
    assert known.expected == pytest.approx(sum(rows) / len(rows), abs=1e-4)
    assert (known.low, known.high) == (min(rows), max(rows))


def test_prior_grows_with_the_draft_and_shrinks_with_the_target():
    def alpha(target, draft):
        return pair_acceptance(CATALOG.model(target), CATALOG.model(draft), CATALOG)

    small, large = alpha("qwen2.5-72b", "qwen2.5-0.5b"), alpha("qwen2.5-72b", "qwen2.5-3b")
    assert small.source == large.source == "prior"
    assert small.expected < large.expected
    assert alpha("qwen2.5-7b", "qwen2.5-0.5b").expected > small.expected
    prior = CATALOG.prior
    ratio = 494032768 / 72706203648  # qwen2.5-0.5b / qwen2.5-72b (tests/data/published_params.csv)
    assert small.expected == pytest.approx(
        prior.intercept + prior.slope * math.log10(ratio), abs=1e-4
    )
    assert small.high - small.expected == pytest.approx(prior.rmse, abs=1e-4)


def test_spec_uses_the_prior_when_no_alpha_is_given(runner):
    args = list(SEED_ARGS)
    i = args.index("--acceptance-rate")
    del args[i : i + 2]
    data = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    assert data["acceptance_source"] == "prior"
    assert data["acceptance_rate"] == pytest.approx(
        pair_acceptance(
            CATALOG.model("qwen2.5-7b"), CATALOG.model("qwen2.5-0.5b"), CATALOG
        ).expected
    )
    assert data["notes"][0].startswith(f"α {data['acceptance_rate']:.3f} is the prior for a draft ")
    given = json.loads(runner.invoke(app, [*SEED_ARGS, "--json"]).stdout)
    assert given["acceptance_source"] == "given" and given["acceptance_rate"] == 0.72


FLEET = """\
targets: [qwen2.5-7b, qwen2.5-32b, qwen2.5-72b, llama-3.1-70b]
drafts: [qwen2.5-0.5b, qwen2.5-1.5b, llama-3.2-1b, llama-3.2-3b]
target_quants: [bf16, fp8, int4]
draft_quants: [bf16, int4]
gpus: [l4, {name: a100-40gb, tp: [1, 2, 4, 8]}, {name: a100, tp: [1, 2, 4, 8]},
       {name: h100, tp: [1, 2, 4, 8]}]
context_lengths: [4096]
batch_sizes: [1, 4, 16, 64]
draft_k: {start: 1, stop: 8, step: 1}
"""


def test_a_sweep_with_the_prior_picks_the_draft_by_target_and_gpu(tmp_path):
    (tmp_path / "f.yaml").write_text(FLEET)
    config, doc = load_sweep(tmp_path / "f.yaml")
    plan = build_plan(config, doc)
    assert plan.scenarios == 3 and {s.alpha_source for s in plan.settings} == {"prior"}
    run_sweep(plan, tmp_path / "out")
    best = pl.read_parquet(tmp_path / "out" / "best_pairs.parquet").filter(
        (pl.col("rank") == 1) & (pl.col("acceptance_scenario") == 1)
    )
    # every pair has its own α: a bigger draft accepts more
    alphas = best.group_by("target", "draft").agg(pl.col("acceptance_rate").unique())
    assert all(len(a) == 1 for a in alphas["acceptance_rate"])
    drafts = best.group_by("target").agg(pl.col("draft").unique().sort())
    chosen = dict(zip(drafts["target"], drafts["draft"].to_list(), strict=True))
    # small targets keep the smallest draft; the 72B target is better served, on some GPUs and
    # batches, by the 1.5B draft at int4 (about the bytes of the 0.5B at bf16) whose higher α
    # pays for its cost
    assert chosen["qwen2.5-7b"] == ["qwen2.5-0.5b"]
    assert chosen["qwen2.5-72b"] == ["qwen2.5-0.5b", "qwen2.5-1.5b"]
    at_4 = best.filter((pl.col("target") == "qwen2.5-72b") & (pl.col("batch_size") == 4))
    by_gpu = dict(zip(at_4["gpu"], at_4["draft"], strict=True))
    # on the 40 GB A100 the 72B target needs TP 2, where the cheaper draft wins; on one 80 GB
    # A100 or H100 the 1.5B draft does
    assert by_gpu == {
        "a100-40gb-sxm": "qwen2.5-0.5b",
        "a100-80gb-sxm": "qwen2.5-1.5b",
        "h100-sxm": "qwen2.5-1.5b",
    }
    at_64 = best.filter((pl.col("target") == "qwen2.5-72b") & (pl.col("batch_size") == 64))
    assert set(at_64["draft"]) == {"qwen2.5-0.5b"}  # verification dominates at batch 64
