"""The capacity sweep's screen stands in for the simulator only where it may: a seeded sample of
the rows sweeps/capacity.yaml leaves screened, each answered again by the simulator, agrees on
whether the row can be served and on its GPUs within the row's stated error (its range: at least
the screen's 15 %, as wide as plain decoding's simulated range where wider)."""

from __future__ import annotations

import random
from pathlib import Path

from infersize.catalog.store import load_catalog
from infersize.service.capacity.fleet import replicas_for
from infersize.service.capacity.request import UnservableError, prepare_capacity
from infersize.service.capacity.screen import (
    SCREEN_ERROR,
    RowCache,
    near_edge,
    screen_row,
    simulate_row,
)
from infersize.sweep.capacity.rows import capacity_request, iter_cases
from infersize.sweep.config import load_sweep
from infersize.sweep.plan import build_plan

SWEEP = Path(__file__).resolve().parent.parent / "sweeps" / "capacity.yaml"


def test_screened_rows_agree_with_the_simulator_within_the_stated_error():
    plan = build_plan(*load_sweep(SWEEP))
    assert plan.capacity is not None
    catalog = load_catalog()
    cases = list(iter_cases(plan.settings, plan.capacity, plan.scenarios))
    cache, checked = RowCache(), 0
    for case in random.Random(11).sample(cases, len(cases)):
        request = capacity_request(case, plan.scoring, max(plan.ks), plan.capacity)
        rates = case.workload.target_request_rates
        try:
            screened = screen_row(prepare_capacity(request, catalog), request, rates, cache)
        except UnservableError:
            continue
        if screened.unsure or near_edge(screened, rates, plan.capacity.headroom):
            continue  # the sweep hands these to the simulator
        truth = simulate_row(request, catalog, rates, cache).speculative.max_request_rate
        guess = screened.speculative.max_request_rate
        assert (truth > 0) == (guess > 0), case
        low, high = screened.speculative.interval or (guess, guess)
        if screened.draft_k > 0:  # a screened speculative arm: at least the screen's error
            assert low <= guess * (1 - SCREEN_ERROR) * 1.0001
        for rate in rates:
            fewest = replicas_for(rate, high, plan.capacity.headroom)
            most = replicas_for(rate, low, plan.capacity.headroom)
            real = replicas_for(rate, truth, plan.capacity.headroom)
            assert real is None or fewest is None or most is None or fewest <= real <= most, (
                case,
                rate,
                guess,
                truth,
            )
        checked += 1
        if checked == 8:
            break
    assert checked == 8
