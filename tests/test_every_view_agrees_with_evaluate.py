"""Every number a user sees comes from `evaluate()` with the deployment's own speedup model,
batch and memory: the panel, `spec --json`, a sweep row, `spec --plot`, `plot batch` and the
crossover batch are each checked against one direct `evaluate()` call at the same cell. The cells:
Llama-3.1-8B + Llama-3.2-1B on an H100 at batch 64 (where the roofline model's 1.20x and
Leviathan's 1.44x differ: verification costs more than a decode step there) and at batch 256
(which does not fit in 80 GB at 4,096 tokens)."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from infersize.core.engines import get_engine
from infersize.core.evaluate import Grid, evaluate
from infersize.core.limits import BATCH_LADDER, crossover_batch
from infersize.core.speedup import get_speedup_model
from infersize.core.tree import CHAIN, Tree
from infersize.service.resolve import DeploymentRequest, resolve_deployment
from infersize.show import figures
from infersize.sweep.config import load_sweep
from infersize.sweep.plan import build_plan
from infersize.sweep.run import RunOptions, run_sweep

ALPHA, K, CONTEXT = 0.7, 4, 4096
PAIR = ["--target", "llama-3.1-8b", "--draft", "llama-3.2-1b", "--gpu", "h100"]


def direct(catalog, batch, model="roofline", ks=range(1, 17)):
    """The reference: the core's evaluate() called by hand on the resolved deployment."""
    engine = get_engine("plain")
    dep = resolve_deployment(
        DeploymentRequest(target="llama-3.1-8b", draft="llama-3.2-1b", gpu="h100"),
        catalog,
        engine,
    )
    grid = Grid(context=CONTEXT, batch=batch, alpha=ALPHA, ks=np.asarray(list(ks)))
    return evaluate(dep.numbers, engine, get_speedup_model(model), grid)


def spec_args(batch, model):
    return [
        "spec",
        *PAIR,
        "--batch-size",
        str(batch),
        "--acceptance-rate",
        str(ALPHA),
        "--draft-k",
        str(K),
        "--context-length",
        str(CONTEXT),
        "--speedup-model",
        model,
    ]


@pytest.mark.parametrize("model", ["roofline", "leviathan"])
@pytest.mark.parametrize("batch", [64, 256])
def test_spec_json_and_panel_are_evaluate_at_the_cell(runner, catalog, batch, model):
    ev = direct(catalog, batch, model)
    data = json.loads(runner.invoke(app_(), [*spec_args(batch, model), "--json"]).stdout)
    fits = bool(ev.memory.fits[K - 1])
    assert data["fits"] is fits
    panel = runner.invoke(app_(), spec_args(batch, model)).stdout
    if fits:
        speedup = float(ev.speed.speedup[K - 1])
        assert data["speedup"] == pytest.approx(speedup, rel=1e-12)
        assert data["optimal_k"] == int(ev.optimal.k)
        assert data["speedup_at_optimal_k"] == pytest.approx(float(ev.optimal.speed.speedup))
        assert f"Leviathan Speedup:  {speedup:.2f}x" in panel
    else:
        assert data["speedup"] is None and data["optimal_k"] is None
        assert "none: it does not fit" in panel
    assert data["combined_bytes"] == int(ev.memory.combined[K - 1])


def test_the_two_models_differ_at_batch_64(catalog):
    """The cells above test something: the models disagree there by more than 10 %."""
    roofline = float(direct(catalog, 64, "roofline").speed.speedup[K - 1])
    leviathan = float(direct(catalog, 64, "leviathan").speed.speedup[K - 1])
    assert leviathan / roofline > 1.1


@pytest.mark.parametrize("model", ["roofline", "leviathan"])
def test_spec_plot_draws_evaluate_over_k_with_the_k_that_do_not_fit(
    runner, catalog, monkeypatch, tmp_path, model
):
    drawn = []
    original = figures.speedup_vs_k_figure
    monkeypatch.setattr(
        figures,
        "speedup_vs_k_figure",
        lambda curves, *a, **k: drawn.extend(curves) or original(curves, *a, **k),
    )
    batch = 96  # K 1-7 fit at 4,096 tokens, longer K do not (lookahead slots and logits grow)
    ev = direct(catalog, batch, model)
    result = runner.invoke(app_(), [*spec_args(batch, model), "--plot", str(tmp_path / "k.png")])
    assert result.exit_code == 0, result.stderr
    (curve,) = drawn
    assert np.array_equal(curve.speedup, ev.speed.speedup)
    assert np.array_equal(curve.fits, ev.fits_k)
    assert curve.best_k == int(ev.optimal.k)
    assert curve.model.name == model
    assert curve.fits.any() and not curve.fits.all()


def test_plot_batch_draws_evaluate_over_the_batch_ladder(runner, catalog, monkeypatch, tmp_path):
    drawn = []
    original = figures.speedup_vs_batch_figure
    monkeypatch.setattr(
        figures, "speedup_vs_batch_figure", lambda c, label: drawn.append(c) or original(c, label)
    )
    args = ["plot", "batch", *PAIR, "--acceptance-rate", str(ALPHA), "--draft-k", str(K)]
    result = runner.invoke(app_(), [*args, "--out", str(tmp_path / "b.png")])
    assert result.exit_code == 0, result.stderr
    (curve,) = drawn
    ev = direct(catalog, BATCH_LADDER, ks=range(1, 17))
    assert np.array_equal(curve.speedup, ev.speed.speedup[:, K - 1])
    assert np.array_equal(curve.fits, ev.memory.fits[:, K - 1])
    assert not curve.fits.all()  # the ladder runs past the memory limit


@pytest.mark.parametrize("model", ["roofline", "leviathan"])
def test_the_crossover_batch_is_where_evaluate_first_falls_below_one(runner, catalog, model):
    """At 256 tokens verification turns compute-bound within the ladder (roofline); Leviathan's
    model never prices verification above one step, so it never crosses."""
    ctx = 256
    engine = get_engine("plain")
    dep = resolve_deployment(
        DeploymentRequest(target="llama-3.1-8b", draft="llama-3.2-1b", gpu="h100"),
        catalog,
        engine,
    )
    grid = Grid(context=ctx, batch=BATCH_LADDER, alpha=ALPHA, ks=np.arange(1, 17))
    speedup = evaluate(dep.numbers, engine, get_speedup_model(model), grid).speed.speedup
    below = np.flatnonzero(speedup[:, K - 1] < 1.0)
    expected = int(BATCH_LADDER[below[0]]) if below.size else None
    args = [*spec_args(1, model), "--context-length", str(ctx), "--json"]
    data = json.loads(runner.invoke(app_(), args).stdout)
    assert data["crossover_batch_size"] == expected
    if model == "roofline":
        assert expected is not None


@pytest.mark.parametrize(
    "tree, rates",
    [
        (CHAIN, None),
        (CHAIN, [0.8, 0.6, 0.45, 0.3, 0.2, 0.12]),
        (Tree(topk=2, num_draft_tokens=8), None),
    ],
    ids=["alpha", "profile", "tree"],
)
def test_the_crossover_of_many_rows_is_evaluate_over_the_ladder_at_each_rows_k(
    catalog, tree, rates
):
    """Rows of different context, α and K at once (as a sweep asks): each row's crossover is
    where evaluate() over the batch ladder, at that row's K, first falls below one."""
    engine, model = get_engine("plain"), get_speedup_model("roofline")
    dep = resolve_deployment(
        DeploymentRequest(target="llama-3.1-8b", draft="llama-3.2-1b", gpu="h100"),
        catalog,
        engine,
    ).numbers
    context = np.array([256.0, 1024.0, 4096.0, 256.0, 32768.0])
    alpha = np.array([0.5, 0.7, 0.9, 0.95, 0.6])
    k = np.array([1, 3, 6, 2, 4])
    profile = None if rates is None else np.broadcast_to(rates, (5, len(rates)))
    got = crossover_batch(dep, engine, model, context, alpha, k, rates=profile, tree=tree)
    assert np.isfinite(got).any() and np.isnan(got).any()  # rows that cross and rows that don't
    for row in range(5):
        grid = Grid(
            context=context[row],
            batch=BATCH_LADDER,
            alpha=alpha[row],
            ks=np.arange(1, 7),
            rates=None if rates is None else np.asarray(rates)[None, :],
            tree=tree,
        )
        speedup = evaluate(dep, engine, model, grid).speed.speedup[:, k[row] - 1]
        below = np.flatnonzero(speedup < 1.0)
        assert (got[row] == BATCH_LADDER[below[0]]) if below.size else np.isnan(got[row]), row


def test_a_sweep_row_is_evaluate_at_its_cell(catalog, tmp_path):
    """batch 64, the roofline model: the best-pair row's K is evaluate()'s best fitting K and
    its speedup and memory are evaluate()'s there."""
    sweep = tmp_path / "one.yaml"
    sweep.write_text(
        "targets: [llama-3.1-8b]\ndrafts: [llama-3.2-1b]\ngpus: [h100]\ntarget_quants: [bf16]\n"
        f"draft_quants: [bf16]\ncontext_lengths: [{CONTEXT}]\nbatch_sizes: [64]\n"
        f"acceptance_rates: [{ALPHA}]\ndraft_k: {{start: 1, stop: 16, step: 1}}\n"
    )
    config, doc = load_sweep(sweep)
    run_sweep(build_plan(config, doc), tmp_path / "out", RunOptions(jobs=1))
    row = pl.read_parquet(tmp_path / "out" / "best_pairs.parquet").row(0, named=True)
    ev = direct(catalog, 64)
    assert row["optimal_k"] == int(ev.optimal.k)
    assert row["speedup"] == pytest.approx(float(ev.optimal.speed.speedup), rel=1e-12)
    assert row["combined_gib"] * 2**30 == pytest.approx(float(ev.optimal.memory.combined))
    assert row["speedup_model"] == "roofline"


def app_():
    from infersize.cli import app

    return app
