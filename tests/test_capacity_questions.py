"""The questions a planner asks `infersize capacity`: which tensor-parallel size (--tp auto), how
many GPUs for a target rate alone, what a deployment at its latency floor needs, and with which
engine by default."""

from __future__ import annotations

import json

import pytest

from infersize.cli import app
from infersize.core.engines import EngineSettings
from infersize.core.serving.sla import parse_sla
from infersize.service.capacity.layouts import at_tp, run_capacity_tp_auto, tp_sizes
from infersize.service.capacity.request import CapacityRequest, Traffic
from infersize.service.capacity.result import run_capacity
from infersize.service.request import SpecRequest
from infersize.service.resolve import DeploymentRequest


def request(target="llama-3.1-8b", gpu="l4", tp=1, **given) -> CapacityRequest:
    values = {
        "spec": SpecRequest(
            deployment=DeploymentRequest(target=target, draft="llama-3.2-1b", gpu=gpu, tp=tp),
            engine=EngineSettings(engine="vllm"),
            acceptance_rate=0.7,
            draft_k=3,
            context_length=1280,
        ),
        "traffic": Traffic(input_tokens=(1024,), output_tokens=(256,), requests=400, seed=1),
        "sla": parse_sla("ttft:p99<=2000ms;tpot:p99<=60ms"),
        "target_request_rate": 20.0,
        "replications": 2,
    } | given
    return CapacityRequest(**values)


def test_tp_auto_is_the_best_of_separate_tp_calls(catalog):
    """Each arm's GPUs under --tp auto are the fewest any --tp N call gives for that arm, and its
    answer is that call's, byte for byte."""
    req = request()
    assert tp_sizes(req, catalog) == [1, 2, 4, 8]  # Llama-3.1-8B's 32 heads
    auto = run_capacity_tp_auto(req, catalog)
    separate = {tp: run_capacity(at_tp(req, tp), catalog) for tp in (1, 2, 4, 8)}
    for name, arm in auto.arms.items():
        assert arm.fleet is not None and arm.fleet.gpus is not None
        counts = [r.arms[name].fleet for r in separate.values()]
        best = min(f.gpus for f in counts if f is not None and f.gpus is not None)
        assert arm.fleet.gpus == best
        assert arm == separate[arm.tp].arms[name]
    assert auto.notes[0].startswith("--tp auto: TP 1, 2, 4, 8 searched; plain decoding is at TP ")


def test_a_target_rate_alone_is_measured_at_each_replicas_share(catalog):
    """No --request-rate: each arm is served at the target rate over its own replicas."""
    answer = run_capacity(request(gpu="h100"), catalog)
    for arm in answer.arms.values():
        assert arm.fleet is not None and arm.fleet.replicas is not None
        assert arm.load_request_rate == pytest.approx(20.0 / arm.fleet.replicas)
        assert arm.load.endswith("requests/s, its share of the target rate")
        assert arm.capacity is not None
        assert arm.load_request_rate <= arm.capacity.max_request_rate


def test_a_target_rate_alone_from_the_command_line(runner):
    args = [
        "capacity",
        "--target",
        "llama-3.1-8b",
        "--draft",
        "llama-3.2-1b",
        "--gpu",
        "h100",
        "--acceptance-rate",
        "0.7",
        "--draft-k",
        "3",
        "--input-tokens",
        "1024",
        "--output-tokens",
        "256",
        "--requests",
        "400",
        "--replications",
        "2",
        "--sla",
        "ttft:p99<=2000ms;tpot:p99<=60ms",
        "--target-request-rate",
        "20",
        "--json",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["workload"]["request_rate"] is None and data["engine"] == "vllm"
    for name in ("baseline", "speculative"):
        low, high = data["gpus_interval"][name]
        assert low <= data["gpus"][name] <= high
        low, high = data["max_request_rate_interval"][name]
        assert low <= data["max_request_rate"][name] <= high
        assert data[name]["tp"] == 1 and data[name]["latency_floor"]["term"]
    assert (
        "engine vllm: capacity's default (--engine sglang, trtllm or plain to change it)"
        in (data["notes"])
    )
    assert data["confidence"] == "high"
    for value in data["usd_per_hour"].values():
        assert value == round(value, 2)


def test_no_load_at_all_is_one_line_and_exit_2(runner):
    args = [
        "capacity",
        "--target",
        "llama-3.1-8b",
        "--draft",
        "none",
        "--gpu",
        "h100",
        "--input-tokens",
        "1024",
        "--output-tokens",
        "256",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert result.stderr == (
        "error: --request-rate or --concurrency sets the load (or --target-request-rate, "
        "measured at each replica's share of it)\n"
    )


def test_a_deployment_near_its_floor_names_it_and_what_lifts_it(catalog):
    """Llama-3.3-70B FP8 on four L40S, 1,024 in / 256 out at p99 TPOT ≤ 40 ms: one request
    alone already takes three quarters of the TPOT limit, so capacity swings on small changes;
    the answer says so, and that TP 8 lifts it."""
    req = CapacityRequest(
        spec=SpecRequest(
            deployment=DeploymentRequest(
                target="llama-3.3-70b", target_quant="fp8", draft="llama-3.2-1b", gpu="l40s", tp=4
            ),
            engine=EngineSettings(engine="vllm"),
            draft_k=2,
            context_length=1280,
        ),
        traffic=Traffic(input_tokens=(1024,), output_tokens=(256,), requests=1000),
        sla=parse_sla("ttft:p99<=1000ms;tpot:p99<=40ms"),
        target_request_rate=40.0,
        replications=2,
    )
    answer = run_capacity(req, catalog)
    floor = answer.baseline.latency_floor
    assert floor is not None and floor.term == "tpot:p99<=40ms" and floor.share >= 0.7
    assert answer.baseline.at_floor and answer.baseline.floor_remedy is not None
    assert answer.baseline.floor_remedy.startswith("TP 8")
    notes = [n for n in answer.notes if "latency floor" in n]
    assert notes and notes[0].startswith("plain decoding is near its latency floor: one request")
