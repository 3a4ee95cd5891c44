"""The capacity sweep's screen stands in for the simulator only where it may: a seeded sample of
the rows sweeps/capacity.yaml leaves screened, each answered again by the simulator, agrees on
whether the row can be served and on its GPUs within the row's stated error (its range: at least
the screen's 15 %, as wide as plain decoding's simulated range where wider)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from infersize.catalog.store import load_catalog
from infersize.core.engines import EngineSettings
from infersize.core.serving.sla import parse_sla
from infersize.service.capacity.arm import make_arm
from infersize.service.capacity.confirm import Row, leaders, rate_leaders
from infersize.service.capacity.fleet import replicas_for
from infersize.service.capacity.request import (
    CapacityRequest,
    NoKvRoomError,
    Traffic,
    UnservableError,
    prepare_capacity,
)
from infersize.service.capacity.screen import (
    EDGE,
    SCREEN_ERROR,
    RowAnswer,
    RowArm,
    RowCache,
    best_k_rate,
    near_edge,
    screen_row,
    simulate_row,
)
from infersize.service.request import SpecRequest
from infersize.service.resolve import DeploymentRequest
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


def test_a_k_whose_pool_cannot_hold_the_longest_request_is_screened_out_not_an_error():
    """Llama-3.3-70B bf16 on 2×H100 (vLLM) holds a 6,000-token prompt and 300-token answer
    alone; beside a Llama-3.2-1B draft its pool at K = 1 holds 3,042 tokens, fewer than that
    request. That K does not fit, as one whose weights leave no pool: the screen passes over
    it (the row is answered) where the simulator used to stop the whole sweep."""
    catalog = load_catalog(())
    spec = SpecRequest(
        deployment=DeploymentRequest(
            target="llama-3.3-70b", target_quant="bf16", draft="llama-3.2-1b", gpu="h100", tp=2
        ),
        engine=EngineSettings("vllm"),
        acceptance_rate=0.7,
        context_length=6300,
    )
    traffic = Traffic(input_tokens=(6000,), output_tokens=(300,), request_rate=1.0, requests=200)
    request = CapacityRequest(spec=spec, traffic=traffic, sla=parse_sla("tpot:p99<=100ms"))
    prepared = prepare_capacity(request, catalog)
    make_arm(prepared, traffic, 0)  # plain decoding holds it
    with pytest.raises(NoKvRoomError, match=r"^at K = 1, a request of 6,301 tokens"):
        make_arm(prepared, traffic, 1)
    answer = screen_row(prepared, request, (1.0,), RowCache())
    assert answer.draft_k == 0


def _row(base: float, spec: float, draft_k: int, best_k: float | None = None) -> RowAnswer:
    def arm(rate: float) -> RowArm:
        return RowArm(max_request_rate=rate, interval=None, latency_ms={})

    return RowAnswer(
        draft_k=draft_k,
        baseline=arm(base),
        speculative=arm(spec),
        simulated=False,
        best_k_request_rate=best_k,
    )


def test_a_row_without_speculation_is_bent_around_its_best_k_not_plain_decoding():
    """Plain decoding serves 10 requests/s a replica: 20.5 requests/s take 3 replicas, and 5 %
    more capacity (10.5) would take 2. The old rule bent a K = 0 row around plain decoding's
    own capacity, so this row went to the simulator. But the simulator answers K = 0 unless a
    K serves more than plain decoding, and the best K the screen rated serves 9 (10 % less):
    even EDGE above that (9.45) it takes 3 replicas, so no error of the screen's ratio can
    make speculation save one, and the row stays screened."""
    rates = (20.5,)
    assert replicas_for(20.5, 10.0, 1.0) == 3 and replicas_for(20.5, 10.0 * (1 + EDGE), 1.0) == 2
    assert not near_edge(_row(10.0, 10.0, 0, best_k=9.0), rates, 1.0)
    # a best K within EDGE of saving a replica (9.9 · 1.05 = 10.4: 2 replicas) is simulated
    assert near_edge(_row(10.0, 10.0, 0, best_k=9.9), rates, 1.0)
    # no K to rate (no drafter, or none fits beside the KV cache): nothing can flip
    assert not near_edge(_row(10.0, 10.0, 0, best_k=None), rates, 1.0)
    # a speculating row is bent around its own capacity, as before
    assert near_edge(_row(10.0, 10.45, 3), rates, 1.0)
    assert not near_edge(_row(10.0, 12.0, 3), (5.0,), 1.0)


def test_a_row_without_speculation_keeps_its_best_k_scaled_as_a_speculative_rows():
    """The best K's mean-field capacity times plain decoding's simulated over its mean-field
    capacity (the ratio a speculative row is scaled by); plain decoding's own where there is
    no mean-field capacity to scale by, and none where plain decoding serves nothing."""
    assert best_k_rate(9.0, base=4.0, base_screened=12.0) == 9.0 * (4.0 / 12.0)
    assert best_k_rate(9.0, base=4.0, base_screened=0.0) == 4.0
    assert best_k_rate(9.0, base=0.0, base_screened=12.0) is None
    assert best_k_rate(None, base=4.0, base_screened=12.0) is None


def _answer(capacity: float) -> RowAnswer:
    arm = RowArm(max_request_rate=capacity, interval=None, latency_ms={})
    return RowAnswer(draft_k=2, baseline=arm, speculative=arm, simulated=False)


def test_at_each_target_rate_the_rows_of_fewest_gpus_lead():
    """best --request-rate takes the fewest GPUs at the rate asked, in whole replicas: at 5
    requests/s a TP 1 replica of 0.5623 requests/s needs ceil(5 / 0.5623) = 9 GPUs, a TP 2
    replica of 1.2329 needs ceil(5 / 1.2329) = 5 replicas, 10 GPUs, though it serves more per
    GPU (0.616 against 0.562); at 1 request/s the TP 2 replica needs 2 GPUs, the TP 1 row 2."""
    rows = [
        Row(request=None, rates=(1.0, 5.0), group="g", tp=1),
        Row(request=None, rates=(1.0, 5.0), group="g", tp=2),
        Row(request=None, rates=(1.0, 5.0), group="g", tp=1),
    ]
    answers = [_answer(0.5623), _answer(1.2329), _answer(0.30)]
    assert leaders({1: 1.2329 / 2, 0: 0.5623, 2: 0.30}, 1) == {1}  # per GPU alone misses row 0
    assert rate_leaders([0, 1, 2], answers, rows, 1.0, 1) == {0, 1}
    # at 1 request/s rows 0 and 1 both need 2 GPUs: the higher capacity per replica leads
    assert rate_leaders([0, 1, 2], answers, rows, 1.0, 0) == set()
    no_sla = [_answer(0.0), _answer(0.0), _answer(0.0)]
    assert rate_leaders([0, 1, 2], no_sla, rows, 1.0, 2) == set()


def test_the_leaders_are_the_top_rows_and_every_row_that_ties_one():
    """Rows screened at K = 0 tie every other of their deployment at plain decoding's
    capacity; the simulator may lift any of them a hair above it, and `best` takes the higher
    capacity of a tie: a tie with a leader is a leader."""
    scores = {0: 3.0, 1: 2.5, 2: 2.5, 3: 2.5, 4: 1.0, 5: 0.0}
    assert leaders(scores, 1) == {0}
    assert leaders(scores, 2) == {0, 1, 2, 3}
    assert leaders({7: 2.0, 3: 2.0, 5: 2.0}, 1) == {3, 5, 7}
    assert leaders(scores, 0) == set()
    assert leaders({}, 2) == set()
