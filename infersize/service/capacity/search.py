"""The capacity search: the highest open-loop request rate per replica at which every SLA term
holds and the queue stays stable, found by the simulator, with how far it moves with the seed.

One replication: one request at a time first (an SLA that a lone request already breaks is an
answer of 0, and the term it comes closest to is the deployment's latency floor); then the mean-
field model guesses the rate, the simulator brackets it (rates rise or fall by a tenth until the
SLA flips) and bisects to 1 %. Nothing caps the search but the SLA and the queue: a load whose
queue grows breaks every SLA (core/serving/metrics.py), so the answer is never above the highest
stable rate, and a closed loop's saturation point, which an open loop can pass, bounds nothing.
The same traffic draws serve every probe of a replication (common random numbers).

Replications: the same search under independent draws (seeded from --seed and the replication's
number), each starting from the first one's answer and moving by 5 %, to within 1 %. The
answer is their mean, with a 95 % prediction interval for one run (core/serving/interval.py).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from infersize.core.serving.interval import mean, prediction_interval
from infersize.core.serving.meanfield import sustained_rate
from infersize.core.serving.metrics import (
    LatencyFloor,
    ServingMetrics,
    give_up_rule,
    latency_floor,
    run_breaches,
    sla_breaches,
)
from infersize.core.serving.simulate import simulate
from infersize.core.serving.sla import Sla
from infersize.record import record
from infersize.service.capacity.arm import Arm, load, mean_field_capacity, serve
from infersize.service.capacity.request import Traffic

BISECTION_TOLERANCE = 0.01  # stop when the bracket is within 1 % of its top
MAX_PROBES = 24
RATE_STEP = 1.1  # how far a bracketing probe moves the rate (the mean-field guess's error)
GUESSED_STEP = 1.05  # the same from a scaled guess (the mean-field ratio of two arms: ±5 %)
# a replication starts at the first one's answer and moves by about the replications' own
# spread (a few per cent), then bisects to the first one's tolerance (a coarser one would put
# the answers on a lattice around the first and understate their spread)
REPLICATION_STEP = 1.05
LONE_REQUESTS = 200  # requests served one at a time to find the latency floor


@record
class Capacity:
    max_request_rate: float  # per replica: the replications' mean; 0 when no rate meets the SLA
    replications: tuple[float, ...]  # each replication's answer
    interval: tuple[float, float] | None  # 95 % range of one replication (None: one only)
    why: str  # what bounds the first replication
    floor: LatencyFloor  # the SLA term one request alone comes closest to


def broken_terms(arm: Arm, traffic: Traffic, rate: float, sla: Sla) -> list[str]:
    """The SLA terms the arm breaks at `rate` (none: it meets the SLA and its queue is stable):
    a probe, which stops the run as soon as enough requests break a percentile that no later
    request can mend it."""
    requests = load(arm, traffic, rate)
    answers = int((requests.output_tokens > 1).sum())
    rule = give_up_rule(sla, traffic.requests, answers)
    run = simulate(arm.replica, dataclasses.replace(requests, give_up=rule))
    if run.gave_up:
        return [str(term) for term in sla.terms if term.metric == run.gave_up]
    return run_breaches(run, sla)


def alone(arm: Arm, traffic: Traffic, itl: bool = True) -> ServingMetrics:
    """The arm serving one request at a time: the latency no load can go below (`itl` False:
    without the inter-token latencies, which an SLA without an ITL term never reads)."""
    lone = Traffic(
        input_tokens=traffic.input_tokens,
        output_tokens=traffic.output_tokens,
        concurrency=1,
        requests=min(traffic.requests, LONE_REQUESTS),
        seed=traffic.seed,
    )
    return serve(arm, lone, itl=itl)


@dataclass
class _Probes:
    """One replication's probes: whether a rate holds, and what broke at the lowest rate that
    did not."""

    arm: Arm
    traffic: Traffic
    sla: Sla
    broken_at: float = math.inf
    broken: tuple[str, ...] = ()

    def holds(self, rate: float) -> bool:
        broken = broken_terms(self.arm, self.traffic, rate, self.sla)
        if broken and rate < self.broken_at:
            self.broken_at, self.broken = rate, tuple(broken)
        return not broken


def _bracket(holds: Callable[[float], bool], start: float, step: float) -> tuple[float, float]:
    """(a rate that holds, one that does not), moving from `start` by `step`; (0, rate) when no
    rate down to start / step^MAX_PROBES holds, (rate, inf) when none up to the same above it
    breaks."""
    if holds(start):
        low = start
        for _ in range(MAX_PROBES):
            high = low * step
            if not holds(high):
                return low, high
            low = high
        return low, math.inf
    high = start
    for _ in range(MAX_PROBES):
        low = high / step
        if holds(low):
            return low, high
        high = low
    return 0.0, high


def _search(probes: _Probes, start: float, step: float, tolerance: float) -> float:
    """The highest rate that holds, within `tolerance` of the lowest that does not."""
    low, high = _bracket(probes.holds, start, step)
    for _ in range(MAX_PROBES):
        if not math.isfinite(high) or high - low <= tolerance * high:
            break
        middle = (low + high) / 2.0
        low, high = (middle, high) if probes.holds(middle) else (low, middle)
    return low


def rate_text(rate: float) -> str:
    """Three significant digits, and never a bare '1' for 1.00."""
    text = f"{rate:.3g}"
    return f"{rate:.2f}" if rate < 100 and "." not in text and "e" not in text else text


def _why(probes: _Probes, answer: float) -> str:
    if answer <= 0.0:
        return f"no rate down to {rate_text(probes.broken_at)} requests/s meets the SLA"
    if not probes.broken:
        return (
            f"no rate up to {rate_text(answer)} requests/s broke the SLA (too few requests to tell)"
        )
    return f"above it, at {rate_text(probes.broken_at)} requests/s: {'; '.join(probes.broken)}"


def first_replication(arm: Arm, traffic: Traffic, sla: Sla, guess: float | None = None) -> Capacity:
    """One replication (the answer --draft-k auto compares), from `guess` when there is a good
    one (the mean-field capacity scaled by the simulator's for another K), else from the
    mean-field model's own."""
    lone = alone(arm, traffic, itl=sla.reads_itl)
    floor = latency_floor(lone, sla)
    breaks = sla_breaches(lone, sla)
    if breaks:
        why = f"one request alone already breaks the SLA ({'; '.join(breaks)})"
        return Capacity(
            max_request_rate=0.0, replications=(0.0,), interval=None, why=why, floor=floor
        )
    probes = _Probes(arm=arm, traffic=traffic, sla=sla)
    if guess is not None and guess > 0.0:
        answer = _search(probes, guess, GUESSED_STEP, BISECTION_TOLERANCE)
    else:
        ceiling = max(sustained_rate(arm.replica, arm.lengths), 1.0 / lone.e2e_s.mean)
        guess = mean_field_capacity(arm, sla, ceiling)
        answer = _search(probes, guess, RATE_STEP, BISECTION_TOLERANCE)
    return Capacity(
        max_request_rate=answer,
        replications=(answer,),
        interval=None,
        why=_why(probes, answer),
        floor=floor,
    )


def replicated(first: Capacity, arm: Arm, traffic: Traffic, sla: Sla, count: int) -> Capacity:
    """`first` with `count` − 1 more replications, each under its own draws; their mean and
    prediction interval."""
    answers = list(first.replications)
    if first.max_request_rate > 0.0:
        for replication in range(len(answers), count):
            other = dataclasses.replace(traffic, replication=replication)
            probes = _Probes(arm=dataclasses.replace(arm, traffic=other), traffic=other, sla=sla)
            start = first.replications[0]
            answers.append(_search(probes, start, REPLICATION_STEP, BISECTION_TOLERANCE))
    else:
        answers = [0.0] * count
    return dataclasses.replace(
        first,
        max_request_rate=mean(answers),
        replications=tuple(answers),
        interval=prediction_interval(answers),
    )


def capacity(arm: Arm, traffic: Traffic, sla: Sla, replications: int = 1) -> Capacity:
    """The highest open-loop rate whose SLA holds and whose queue is stable, over
    `replications` independent replications."""
    return replicated(first_replication(arm, traffic, sla), arm, traffic, sla, replications)


def simulated_score(limit: Capacity | None, measured: ServingMetrics | None) -> float:
    """The simulator's view of an arm, as screen_score's: its capacity at the SLA, else minus
    its mean e2e latency at the load."""
    if limit is not None:
        return limit.max_request_rate
    assert measured is not None
    return -measured.e2e_s.mean
