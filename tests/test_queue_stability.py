"""An open loop whose queue grows meets no SLA: the trend of the queue (arrived, not yet
admitted) against time, on runs built by hand and on the simulator's, and the capacity search
that never answers above the highest stable rate."""

from __future__ import annotations

import numpy as np
import pytest

from infersize.core.engines import EngineSettings
from infersize.core.serving.metrics import OVERLOAD_SHORTFALL, queue_trend
from infersize.core.serving.replica import Run
from infersize.core.serving.sla import parse_sla
from infersize.service.capacity.arm import make_arm, serve
from infersize.service.capacity.request import CapacityRequest, Traffic, prepare_capacity
from infersize.service.capacity.search import capacity
from infersize.service.request import SpecRequest
from infersize.service.resolve import DeploymentRequest


def hand_run(offered: float, taken: float, n: int = 2000, open_loop: bool = True) -> Run:
    """Requests arriving every 1/offered s and admitted every 1/taken s, first come first
    served (each no earlier than it arrives): a queue that grows when taken < offered."""
    arrival = np.arange(n) / offered
    admitted = np.maximum.accumulate(np.maximum(arrival, np.arange(n) / taken))
    finish = admitted + 1.0
    empty = np.zeros(0)
    return Run(
        arrival=arrival,
        admitted=admitted,
        first_token=admitted + 0.1,
        finish=finish,
        output_tokens=np.full(n, 10),
        running_seconds=0.0,
        span=float(finish[-1]),
        preemptions=0,
        itl_first=empty,
        itl_slope=empty,
        itl_steps=empty.astype(np.int64),
        itl_weight=empty.astype(np.int64),
        open_loop=open_loop,
    )


def test_a_queue_the_replica_keeps_up_with_does_not_grow():
    offered, taken, grows = queue_trend(hand_run(offered=4.0, taken=4.4))
    assert not grows
    assert offered == pytest.approx(4.0) and taken == pytest.approx(4.0)


def test_a_queue_taken_in_slower_than_it_arrives_grows_at_the_difference():
    """Arrivals at 4/s, admissions at 3/s: the queue grows by 1 request a second, so the slope
    of its length against time is 1 and the rate taken in 4 − 1 = 3."""
    offered, taken, grows = queue_trend(hand_run(offered=4.0, taken=3.0))
    assert grows
    assert offered == pytest.approx(4.0) and taken == pytest.approx(3.0, rel=0.01)


def test_a_shortfall_within_the_tolerance_is_not_overload():
    shortfall = OVERLOAD_SHORTFALL / 2
    _, _, grows = queue_trend(hand_run(offered=4.0, taken=4.0 * (1 - shortfall)))
    assert not grows


def test_a_closed_loop_has_no_trend():
    assert queue_trend(hand_run(offered=4.0, taken=3.0, open_loop=False)) is None


def _request(**spec) -> CapacityRequest:
    """DeepSeek-V3 (FP8, as published) on 8 H200 under vLLM, 2,048-token prompts and
    1,024-token answers: at 5.9 requests/s its TPOT stays under 100 ms while its queue grows."""
    return CapacityRequest(
        spec=SpecRequest(
            deployment=DeploymentRequest(target="deepseek-v3", gpu="h200", tp=8),
            engine=EngineSettings(engine="vllm"),
            context_length=3072,
            **spec,
        ),
        traffic=Traffic(
            input_tokens=(2048,), output_tokens=(1024,), request_rate=5.9, requests=1000
        ),
        sla=parse_sla("tpot:p99<=100ms"),
    )


def test_an_overloaded_load_breaks_a_tpot_only_sla_with_the_reason(runner):
    """The case a TPOT-only SLA used to call met: TTFT runs to tens of seconds, every request
    that is served decodes within its TPOT, and the queue grows without end."""
    from infersize.cli import app

    args = [
        "capacity",
        "--target",
        "deepseek-v3",
        "--draft",
        "none",
        "--gpu",
        "h200",
        "--tp",
        "8",
        "--engine",
        "vllm",
        "--input-tokens",
        "2048",
        "--output-tokens",
        "1024",
        "--request-rate",
        "5.9",
        "--requests",
        "1000",
        "--sla",
        "tpot:p99<=100ms",
        "--replications",
        "2",
        "--json",
    ]
    import json

    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    base = json.loads(result.stdout)["baseline"]
    assert base["tpot_ms"]["p99"] < 100.0  # the term alone would pass
    assert base["meets_sla"] is False
    assert base["sla_breaches"][0].startswith("overloaded: the queue grows (it takes in ")
    stable = base["max_request_rate"]
    assert stable < 5.9
    assert "overloaded" in base["max_request_rate_why"] or "tpot" in base["max_request_rate_why"]


def test_capacity_is_a_stable_rate_and_a_tenth_above_it_is_not(catalog):
    req = _request()
    prepared = prepare_capacity(req, catalog)
    arm = make_arm(prepared, req.traffic, 0)
    assert req.sla is not None
    answer = capacity(arm, req.traffic, req.sla)
    assert not serve(arm, req.traffic, answer.max_request_rate).overload
    assert serve(arm, req.traffic, answer.max_request_rate * 1.3).overload


def test_an_open_loop_may_sustain_more_than_a_closed_loop_of_max_num_seqs(catalog):
    """The closed loop's clients all start at once and move in step; an open loop's arrive
    apart. Capacity is the open loop's highest stable rate, never capped at the closed loop's
    throughput (Llama-3.1-8B on an H100, 1,000 in / 300 out, TPOT-only SLA)."""
    from infersize.service.capacity.arm import saturation_rate

    req = CapacityRequest(
        spec=SpecRequest(
            deployment=DeploymentRequest(target="llama-3.1-8b", gpu="h100"),
            engine=EngineSettings(engine="vllm", max_num_seqs=64),
        ),
        traffic=Traffic(
            input_tokens=(1000,), output_tokens=(300,), request_rate=1.0, requests=1000
        ),
        sla=parse_sla("tpot:p99<=1000ms"),
    )
    prepared = prepare_capacity(req, catalog)
    arm = make_arm(prepared, req.traffic, 0)
    assert req.sla is not None
    answer = capacity(arm, req.traffic, req.sla)
    closed = saturation_rate(arm, req.traffic)
    assert answer.max_request_rate > 0
    assert not serve(arm, req.traffic, answer.max_request_rate).overload
    assert answer.max_request_rate >= 0.97 * closed
