"""The serving metrics' shortcuts give numpy's and metrics()' own numbers, bit for bit: the
percentiles taken from a sorted array are np.percentile's (its linear method), and a probe's
breaches, computed from the statistics its SLA reads, are those of the run's full metrics."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersize.core.serving.metrics import (
    PERCENTILES,
    linear_percentiles,
    metrics,
    run_breaches,
    sla_breaches,
    stats,
)
from infersize.core.serving.simulate import simulate
from infersize.core.serving.sla import parse_sla
from infersize.service.capacity.arm import load, make_arm
from infersize.service.capacity.request import Traffic
from tests.support.serving import INPUT, OUTPUT, prepared_for

LATENCIES = st.floats(min_value=0.0, max_value=1e4, allow_nan=False)


def _same(got: tuple[float, ...], want: np.ndarray) -> bool:
    """Equal bit for bit (NaN equal to NaN)."""
    return all((math.isnan(a) and math.isnan(b)) or a == b for a, b in zip(got, want, strict=True))


@settings(max_examples=300, deadline=None)
@given(st.lists(LATENCIES, min_size=1, max_size=400), st.integers(min_value=0, max_value=6))
def test_percentiles_of_the_sorted_values_are_numpys(values, digits):
    """Any length (one value included), ties (values rounded to a few digits) and spreads."""
    data = np.round(np.asarray(values), digits) if digits < 6 else np.asarray(values)
    assert _same(linear_percentiles(np.sort(data)), np.percentile(data, PERCENTILES))


@pytest.mark.parametrize(
    "values",
    [[1.0, math.nan, 2.0], [math.inf, 1.0, 2.0, math.inf], [3.0], [-0.0, 0.0, 5e-324, 7.0]],
)
def test_percentiles_keep_numpys_nan_and_infinity(values):
    """A NaN makes every percentile NaN; between two infinities, inf − inf is NaN in both."""
    data = np.asarray(values)
    with np.errstate(invalid="ignore"):
        want = np.percentile(data, PERCENTILES)
    assert _same(linear_percentiles(np.sort(data)), want)


def test_stats_mean_is_over_the_values_as_given():
    """The mean sums the values in their own order (numpy's pairwise sum), not sorted."""
    data = np.random.default_rng(3).exponential(1.0, 1001)
    got = stats(data)
    assert got.mean == float(data.mean())
    assert _same((got.p50, got.p90, got.p95, got.p99), np.percentile(data, PERCENTILES))


def _traffic(**given) -> Traffic:
    values = {
        "input_tokens": (INPUT,),
        "output_tokens": (OUTPUT, 1, OUTPUT * 2),  # one-token answers have no TPOT
        "request_rate": 1.0,
        "requests": 300,
        "seed": 5,
    } | given
    return Traffic(**values)


@pytest.mark.parametrize("rate", [0.5, 8.0, 40.0, 400.0, None])
@pytest.mark.parametrize(
    "sla",
    [
        "ttft:p99<=500ms;tpot:p99<=12ms",
        "tpot:p50<=8ms;e2e:p95<=3s",
        "ttft:mean<=200ms;itl:p90<=15ms",
        "e2e:p99<=100s",
    ],
)
def test_a_probes_breaches_are_those_of_its_full_metrics(catalog, rate, sla):
    """Light, heavy and overloaded open loops and a closed loop (rate None), under SLAs that
    read each metric and statistic: the same breaches, in the same words and order."""
    traffic = _traffic() if rate is not None else _traffic(request_rate=None, concurrency=16)
    arm = make_arm(prepared_for(catalog), traffic, 3)
    run = simulate(arm.replica, load(arm, traffic, rate))
    terms = parse_sla(sla)
    assert run_breaches(run, terms) == sla_breaches(metrics(run), terms)
