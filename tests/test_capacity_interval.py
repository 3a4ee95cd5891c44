"""Every capacity answer carries the range one run lands in: the prediction interval's maths,
and its coverage of other seeds' answers on the README's deployment."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from infersize.core.engines import EngineSettings
from infersize.core.serving.interval import T_975, prediction_interval
from infersize.core.serving.sla import parse_sla
from infersize.service.capacity.request import CapacityRequest, Traffic
from infersize.service.capacity.result import run_capacity
from infersize.service.request import SpecRequest
from infersize.service.resolve import DeploymentRequest


def test_the_t_table_is_students_t_at_0975():
    for df, value in enumerate(T_975, start=1):
        assert value == pytest.approx(stats.t.ppf(0.975, df), abs=6e-4)


def test_the_prediction_interval_of_five_replications():
    """1..5: mean 3, s = √2.5; t(0.975, 4) = 2.776; half-width 2.776 · √2.5 · √(1 + 1/5)."""
    low, high = prediction_interval([1.0, 2.0, 3.0, 4.0, 5.0]) or (0.0, 0.0)
    half = 2.776 * math.sqrt(2.5) * math.sqrt(1.2)
    assert low == pytest.approx(max(3 - half, 0.0)) and high == pytest.approx(3 + half)


def test_one_replication_has_no_interval_and_none_goes_below_zero():
    assert prediction_interval([4.2]) is None
    low, _ = prediction_interval([0.1, 5.0]) or (None, None)
    assert low == 0.0


def readme_request(seed: int) -> CapacityRequest:
    """The README's deployment: Llama-3.1-70B FP8 + Llama-3.2-1B on 2 H100 under vLLM, 1,024
    in / 256 out, p99 TTFT ≤ 2 s and p99 TPOT ≤ 50 ms, 20 requests/s (K 2, as auto picks)."""
    return CapacityRequest(
        spec=SpecRequest(
            deployment=DeploymentRequest(
                target="llama-3.1-70b",
                target_quant="fp8",
                draft="llama-3.2-1b",
                gpu="h100",
                tp=2,
            ),
            engine=EngineSettings(engine="vllm"),
            draft_k=2,
            context_length=1280,
        ),
        traffic=Traffic(input_tokens=(1024,), output_tokens=(256,), request_rate=2.0, seed=seed),
        sla=parse_sla("ttft:p99<=2000ms;tpot:p99<=50ms"),
        target_request_rate=20.0,
    )


def test_the_interval_holds_other_seeds_answers(catalog):
    """Seed 0's 95 % range holds at least 9 of the answers of seeds 1 to 10, for both arms:
    their capacities (each the mean of its replications) and their GPU counts; and at least 90
    % of the 50 single searches behind them (the range is a prediction interval for one)."""
    first = run_capacity(readme_request(0), catalog)
    others = [run_capacity(readme_request(seed), catalog) for seed in range(1, 11)]
    for name, arm in first.arms.items():
        assert arm.capacity is not None and arm.capacity.interval is not None
        assert arm.fleet is not None and arm.fleet.gpus_interval is not None
        low, high = arm.capacity.interval
        fewest, most = arm.fleet.gpus_interval
        answers = [other.arms[name] for other in others]
        means = [a.capacity.max_request_rate for a in answers if a.capacity]
        singles = [r for a in answers if a.capacity for r in a.capacity.replications]
        gpus = [a.fleet.gpus for a in answers if a.fleet and a.fleet.gpus is not None]
        assert sum(low <= m <= high for m in means) >= 9, (name, low, high, means)
        inside = sum(low <= s <= high for s in singles)
        assert inside >= 0.9 * len(singles) == 45, (name, low, high, singles)
        assert most is not None and fewest is not None
        assert sum(fewest <= g <= most for g in gpus) >= 9, (name, fewest, most, gpus)
