"""The request rate above which speculation stops paying: where the two arms' mean e2e
latencies meet in the mean-field model (service/capacity/breakeven.py)."""

from __future__ import annotations

from infersize.catalog.store import load_catalog
from infersize.core.engines import EngineSettings
from infersize.core.serving.meanfield import mean_field
from infersize.core.serving.sla import parse_sla
from infersize.service.capacity.arm import make_arm
from infersize.service.capacity.breakeven import break_even_rate
from infersize.service.capacity.request import CapacityRequest, Traffic, prepare_capacity
from infersize.service.request import SpecRequest
from infersize.service.resolve import DeploymentRequest


def _prepared(alpha: float, draft: str | None = "llama-3.2-1b"):
    spec = SpecRequest(
        deployment=DeploymentRequest(target="llama-3.1-8b", draft=draft, gpu="h100"),
        engine=EngineSettings("vllm"),
        acceptance_rate=alpha,
        context_length=640,
    )
    req = CapacityRequest(
        spec=spec,
        traffic=Traffic(input_tokens=(512,), output_tokens=(128,), request_rate=1.0),
        sla=parse_sla("tpot:p99<=50ms"),
    )
    return prepare_capacity(req, load_catalog(())), req


def _e2e(prepared, req, k, rate):
    arm = make_arm(prepared, req.traffic, k)
    return mean_field(arm.replica, arm.lengths, rate).e2e_s.mean


def test_speculation_pays_below_the_break_even_rate_and_not_above():
    prepared, req = _prepared(0.7)
    rate = break_even_rate(prepared, req, 3, {})
    assert rate is not None and rate > 0
    assert _e2e(prepared, req, 3, 0.9 * rate) < _e2e(prepared, req, 0, 0.9 * rate)
    assert _e2e(prepared, req, 3, 1.1 * rate) > _e2e(prepared, req, 0, 1.1 * rate)


def test_better_acceptance_pays_up_to_a_higher_rate():
    low = break_even_rate(*_prepared(0.6), 3, {})
    high = break_even_rate(*_prepared(0.85), 3, {})
    assert low is not None and high is not None
    assert high > low


def test_no_drafter_has_no_break_even():
    prepared, req = _prepared(0.7, draft=None)
    assert break_even_rate(prepared, req, 0, {}) is None


def test_a_drafter_that_never_pays_breaks_even_at_zero():
    # at α 0.02 a step emits 1.02 tokens for three draft passes and four verified tokens
    assert break_even_rate(*_prepared(0.02), 3, {}) == 0.0
