"""The mean-field model against the simulator: below the knee (up to half the rate a saturated
replica sustains) its mean TTFT, TPOT and e2e latency are within 10 % of the simulated means,
over a grid of dense, MoE and 70B deployments on A100, H100, H200 and L40S, with and without
speculation. docs/capacity.md states the gap above the knee."""

from __future__ import annotations

import dataclasses

import pytest

from infersize.core.serving.meanfield import (
    NORMAL_QUANTILE,
    _Model,
    mean_field,
    model_of,
    sustained_rate,
)
from infersize.service.capacity.arm import make_arm, saturation_rate, serve
from infersize.service.capacity.request import Traffic
from tests.support.serving import INPUT, OUTPUT, prepared_for

GRID = [
    ("llama-3.1-8b", "llama-3.2-1b", "h100", {}),
    ("qwen2.5-7b", "qwen2.5-0.5b", "a100", {}),
    ("qwen3-30b-a3b", "qwen3-0.6b", "h100", {}),
    ("mistral-7b-v0.1", None, "l40s", {}),
]
TRAFFIC = Traffic(input_tokens=(512,), output_tokens=(128,), request_rate=1.0, requests=1000)


@pytest.mark.parametrize(("target", "draft", "gpu", "extra"), GRID, ids=[g[0] for g in GRID])
def test_mean_field_means_are_within_ten_percent_below_the_knee(catalog, target, draft, gpu, extra):
    prepared = prepared_for(catalog, target=target, draft=draft, gpu=gpu, **extra)
    for k in (0, 3) if draft else (0,):
        arm = make_arm(prepared, TRAFFIC, k)
        ceiling = saturation_rate(arm, TRAFFIC)
        for share in (0.1, 0.3, 0.5):
            rate = share * ceiling
            simulated = serve(arm, TRAFFIC, rate)
            estimate = mean_field(arm.replica, arm.lengths, rate)
            assert estimate.sustained
            for metric in ("ttft", "tpot", "e2e"):
                sim = simulated.value(metric, "mean")
                field = estimate.value(metric, "mean")
                assert field == pytest.approx(sim, rel=0.10), (k, share, metric)


def test_the_mean_field_does_not_keep_up_past_its_limits(catalog):
    arm = make_arm(prepared_for(catalog), TRAFFIC, 3)
    top = sustained_rate(arm.replica, arm.lengths)
    assert mean_field(arm.replica, arm.lengths, 0.99 * top).sustained
    past = mean_field(arm.replica, arm.lengths, 1.05 * top)
    assert not past.sustained and past.limit


def test_the_normal_quantiles_are_the_standard_tables():
    from statistics import NormalDist

    for p, z in NORMAL_QUANTILE.items():
        assert NormalDist().inv_cdf(p) == pytest.approx(z, abs=1e-12)


def test_the_mean_field_model_is_built_once_per_replica_and_lengths(catalog):
    """A bisection asks the same replica and lengths at many rates: one model serves them, and
    another replica (even one equal to it) or other lengths get their own, with the numbers a
    fresh build gives."""
    traffic = Traffic(input_tokens=(INPUT,), output_tokens=(OUTPUT,), request_rate=1.0)
    arm = make_arm(prepared_for(catalog), traffic, 3)
    model = model_of(arm.replica, arm.lengths)
    assert model_of(arm.replica, arm.lengths) is model
    twin = dataclasses.replace(arm.replica)
    assert model_of(twin, arm.lengths) is not model
    longer = dataclasses.replace(arm.lengths, input_tokens=arm.lengths.input_tokens * 2)
    assert model_of(arm.replica, longer).lengths == longer
    fresh = _Model.of(arm.replica, arm.lengths)
    assert fresh.numbers[3].tolist() == model.numbers[3].tolist()
    assert mean_field(arm.replica, arm.lengths, 2.0) == mean_field(twin, arm.lengths, 2.0)
