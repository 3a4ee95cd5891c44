"""A capacity sweep's rows, answered: screen every row, then simulate where it counts.

Plain decoding is simulated (as `infersize capacity` answers it); speculation is screened by
the mean-field model (core/serving/meanfield.py), its capacity the arms' mean-field ratio times
plain decoding's simulated one, refused where its lone request breaks the SLA, and checked by
one simulated probe at (1 − PROBE_MARGIN) of it. Per group of rows that compete (a GPU type,
target, workload and SLA) the simulator then answers again every row the screen cannot stand for
(the probe broke, or plain decoding serves nothing to scale), every row near an edge (where an
error of EDGE in the arms' ratio would flip whether speculation saves GPUs at a target rate, or
the stated error could move a count of at most FEW_REPLICAS replicas), and the `simulate_top`
rows of most requests/s per GPU with speculation. A simulated row is what `infersize capacity
--draft-k auto` answers for the same request (a test holds the two equal). This module answers
one row each way and says whether it is near an edge; service/capacity/confirm.py's
answer_rows answers a sweep's rows with them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache as cache_calls
from functools import partial
from typing import NamedTuple

from infersize.catalog.store import Catalog
from infersize.core.serving.meanfield import mean_field, sustained_rate
from infersize.core.serving.metrics import sla_breaches
from infersize.record import record
from infersize.service.capacity.answer import ArmKind
from infersize.service.capacity.arm import Arm, ReplicaCache, make_arm, screen_score, serve
from infersize.service.capacity.fleet import replicas_for
from infersize.service.capacity.kschedule import schedule_capacity
from infersize.service.capacity.request import (
    CapacityRequest,
    NoKvRoomError,
    prepare_capacity,
)
from infersize.service.capacity.result import (
    BaselineCache,
    BaselineKey,
    baseline_key,
    plain_decoding,
    run_capacity,
)
from infersize.service.capacity.search import Capacity, alone, broken_terms
from infersize.service.request import Prepared

# The screen's error on the ratio of the two arms' capacities: its absolute capacities run a few
# per cent high, but alike for both arms (benchmarks/meanfield_gap.py); a verdict that an error
# of EDGE in the ratio would flip is left to the simulator
EDGE = 0.05
# Every screened speculative capacity is checked by one simulated probe at (1 − PROBE_MARGIN)
# of it (the first replication's draws), and a row that fails it is simulated. A screened row's
# stated error adds the replications' own spread to the probe's margin: at least SCREEN_ERROR,
# and as wide as plain decoding's simulated range where that is wider (draws that spread plain
# decoding's answer spread speculation's alike); the simulator's answer lies within it
# (benchmarks/capacity_screen_gap.py measures it on sweeps/capacity.yaml, docs/capacity.md)
PROBE_MARGIN = 0.10
SCREEN_ERROR = 0.15
# at most this many replicas, the stated error can move the count by one: such rows near a
# count's edge are simulated (above it, the range columns carry the count's error)
FEW_REPLICAS = round(1 / SCREEN_ERROR)
Interval = tuple[float, float]


class Latency(NamedTuple):
    """A load's latencies, named as the capacity table's columns (less the arm)."""

    ttft_p50_ms: float
    ttft_p99_ms: float
    tpot_p50_ms: float
    tpot_p99_ms: float


@record
class RowArm:
    """One arm of a row: its capacity per replica, that capacity's 95 % range (None: none), and
    its latencies at each target rate's load per replica (None where no rate meets the SLA)."""

    max_request_rate: float
    interval: Interval | None
    latency_ms: dict[float, Latency | None]


@record
class RowAnswer:
    """Both arms of a row (speculation at `draft_k`; 0: it does not pay, and the arms agree)."""

    draft_k: int
    baseline: RowArm
    speculative: RowArm
    simulated: bool
    # the rate per replica above which speculation stops paying (service/capacity/breakeven.py)
    break_even_request_rate: float | None = None
    # a simulated row's capacity with K by the running batch (the auto table; None: not served)
    k_schedule_request_rate: float | None = None
    # the screen cannot stand in for the simulator here: plain decoding serves nothing (the
    # arms' ratio scales nothing), or the simulator breaks the SLA below the screened capacity
    unsure: bool = False
    # a screened row that does not speculate (K = 0): the capacity the screen gives its best K,
    # scaled as a speculative row's is (None: no K to rate, or plain decoding's capacity to
    # scale); the simulator could find speculation serving up to EDGE above it
    best_k_request_rate: float | None = None

    def arm(self, kind: ArmKind) -> RowArm:
        return self.speculative if kind.speculates else self.baseline


def _screen_rate(arm: Arm, request: CapacityRequest) -> float:
    """The mean-field capacity of an arm (0 when it cannot keep up at any rate)."""
    if sustained_rate(arm.replica, arm.lengths) <= 0:
        return 0.0
    return screen_score(arm, request.traffic, request.sla)


@dataclass
class RowCache:
    """What the rows of one chunk share: replicas by deployment and K; plain decoding's
    simulated answer, mean-field capacity and simulated latencies (per load) by target
    deployment, traffic and SLA."""

    replicas: ReplicaCache = field(default_factory=dict)
    plain: BaselineCache = field(default_factory=dict)
    plain_screen: dict[BaselineKey, float] = field(default_factory=dict)
    plain_latency: dict[tuple[BaselineKey, float], Latency] = field(default_factory=dict)


def _plain(
    prepared: Prepared, request: CapacityRequest, cache: RowCache
) -> tuple[Arm, Capacity, Callable[[float], Latency]]:
    """Plain decoding as `infersize capacity` answers it: its arm, its capacity, and its
    latencies at a load (each simulated once per target deployment, traffic and SLA)."""
    key = baseline_key(prepared, request)
    limit = plain_decoding(prepared, request, cache.plain).capacity
    assert limit is not None  # a capacity request always has an SLA
    arm = make_arm(prepared, request.traffic, 0, cache.replicas)

    def latency(load: float) -> Latency:
        if (key, load) not in cache.plain_latency:
            cache.plain_latency[key, load] = _simulated_latency(arm, request, load)
        return cache.plain_latency[key, load]

    return arm, limit, latency


def screen_row(
    prepared: Prepared, request: CapacityRequest, rates: tuple[float, ...], cache: RowCache
) -> RowAnswer:
    """Plain decoding simulated; speculation screened: the K of the highest mean-field
    capacity (0 when none beats plain decoding's), its capacity the mean-field ratio of the two
    arms times plain decoding's simulated capacity (the mean-field model errs alike for both
    arms, so its ratio holds where its absolute rates run high)."""
    base_arm, limit, plain_latency = _plain(prepared, request, cache)
    base = limit.max_request_rate
    key = baseline_key(prepared, request)
    if key not in cache.plain_screen:
        cache.plain_screen[key] = _screen_rate(base_arm, request)
    base_screened = cache.plain_screen[key]
    scores = {}
    if prepared.deployment.draft is not None:
        for k in range(1, prepared.request.max_k + 1):
            try:
                arm = make_arm(prepared, request.traffic, k, cache.replicas)
            except NoKvRoomError:  # as capacity --draft-k auto: this K does not fit
                continue
            scores[k] = _screen_rate(arm, request)
    k = max(scores, key=lambda k: (scores[k], -k)) if scores else 0
    best_k = best_k_rate(scores[k] if k else None, base, base_screened)
    spec_interval, checked = limit.interval, True
    if k and _breaks_alone(make_arm(prepared, request.traffic, k, cache.replicas), request):
        k = 0  # as the simulator: a K whose lone request breaks the SLA serves nothing
    if k == 0 or scores[k] <= base_screened:  # speculation does not pay: K = 0
        spec, spec_latency, k = base, plain_latency, 0
    else:
        scale = base / base_screened if base > 0 and base_screened > 0 else 1.0
        spec = scores[k] * scale
        spec_arm = make_arm(prepared, request.traffic, k, cache.replicas)
        spec_latency = partial(_mean_field_latency, spec_arm)
        error = _stated_error(limit)
        spec_interval = (spec * (1.0 - error), spec * (1.0 + error))
        assert request.sla is not None
        checked = base > 0 and not broken_terms(
            spec_arm, request.traffic, spec * (1.0 - PROBE_MARGIN), request.sla
        )
    return RowAnswer(
        draft_k=k,
        baseline=_row_arm(base, limit.interval, plain_latency, request, rates),
        speculative=_row_arm(spec, spec_interval, spec_latency, request, rates),
        simulated=False,
        unsure=not checked,
        best_k_request_rate=None if k else best_k,
    )


def best_k_rate(score: float | None, base: float, base_screened: float) -> float | None:
    """The capacity the screen gives the best K (its mean-field `score`), scaled as a
    speculative row's is: by plain decoding's simulated capacity over its mean-field one
    (plain decoding's own where that ratio is not there to scale by); None where no K was
    rated or plain decoding serves nothing."""
    if score is None or base <= 0:
        return None
    return score * (base / base_screened) if base_screened > 0 else base


def _breaks_alone(arm: Arm, request: CapacityRequest) -> bool:
    """Whether one request alone already breaks the SLA on this arm."""
    assert request.sla is not None
    return bool(sla_breaches(alone(arm, request.traffic, itl=request.sla.reads_itl), request.sla))


def simulate_row(
    request: CapacityRequest, catalog: Catalog, rates: tuple[float, ...], cache: RowCache
) -> RowAnswer:
    """The simulator's answer: exactly `infersize capacity --draft-k auto`'s, and the auto K
    table's capacity beside it."""
    result = run_capacity(request, catalog, cache.plain, cache.replicas)
    prepared = prepare_capacity(request, catalog)
    _arm, limit, plain_latency = _plain(prepared, request, cache)
    base = limit.max_request_rate
    spec_arm = result.speculative or result.baseline
    k = spec_arm.draft_k
    assert spec_arm.capacity is not None
    spec_rate = spec_arm.capacity.max_request_rate
    spec_latency = plain_latency
    if k > 0:  # rates whose loads per replica coincide share a run
        at_k = make_arm(prepared, request.traffic, k, cache.replicas)
        spec_latency = cache_calls(partial(_simulated_latency, at_k, request))
    return RowAnswer(
        draft_k=k,
        baseline=_row_arm(base, limit.interval, plain_latency, request, rates),
        speculative=_row_arm(spec_rate, spec_arm.capacity.interval, spec_latency, request, rates),
        simulated=True,
        k_schedule_request_rate=schedule_capacity(prepared, request, catalog, cache.replicas),
    )


def _simulated_latency(arm: Arm, request: CapacityRequest, load: float) -> Latency:
    m = serve(arm, request.traffic, load, itl=False)
    return Latency(
        ttft_p50_ms=m.ttft_s.p50 * 1e3,
        ttft_p99_ms=m.ttft_s.p99 * 1e3,
        tpot_p50_ms=m.tpot_s.p50 * 1e3,
        tpot_p99_ms=m.tpot_s.p99 * 1e3,
    )


def _mean_field_latency(arm: Arm, load: float) -> Latency:
    f = mean_field(arm.replica, arm.lengths, load)
    return Latency(
        ttft_p50_ms=f.ttft_s.p50 * 1e3,
        ttft_p99_ms=f.ttft_s.p99 * 1e3,
        tpot_p50_ms=f.tpot_s.p50 * 1e3,
        tpot_p99_ms=f.tpot_s.p99 * 1e3,
    )


def _row_arm(
    capacity: float,
    interval: Interval | None,
    latency: Callable[[float], Latency],
    request: CapacityRequest,
    rates: tuple[float, ...],
) -> RowArm:
    """An arm at a capacity per replica: its latencies at each target rate's load per replica
    (rate / replicas); None where no rate meets the SLA."""
    latency_ms: dict[float, Latency | None] = {}
    for rate in rates:
        replicas = replicas_for(rate, capacity, request.headroom)
        latency_ms[rate] = None if replicas is None else latency(rate / replicas)
    return RowArm(max_request_rate=capacity, interval=interval, latency_ms=latency_ms)


def near_edge(answer: RowAnswer, rates: tuple[float, ...], headroom: float) -> bool:
    """Whether the screen's verdict (does speculation save GPUs at a target rate?) could flip
    at any of the workload's target rates if the ratio of the arms' capacities were off by
    EDGE, or (a screened speculative arm) its stated error could move a count of at most
    FEW_REPLICAS replicas by one. A screened row that does not speculate flips only where its
    best K, EDGE above the screen's capacity for it, would save GPUs: the simulator answers
    K = 0 wherever speculation serves less than plain decoding, so the verdict cannot flip
    the other way, and plain decoding's capacity is the simulator's already."""
    base, spec = answer.baseline.max_request_rate, answer.speculative.max_request_rate

    def saving(rate: float, b: float, s: float) -> int:
        gb, gs = replicas_for(rate, b, headroom), replicas_for(rate, s, headroom)
        if gb is None or gs is None:
            return (gb is None) - (gs is None)  # only one arm meets the SLA: it saves
        return (gb > gs) - (gb < gs)

    if answer.draft_k == 0 and not answer.simulated:  # no best K: reaches nothing
        reach = (answer.best_k_request_rate or 0.0) * (1 + EDGE)
        return any(saving(rate, base, reach) > 0 for rate in rates)
    bent = (spec * (1 + EDGE), spec * (1 - EDGE))
    flips = any(saving(rate, base, s) != saving(rate, base, spec) for rate in rates for s in bent)
    if flips or answer.simulated or answer.draft_k == 0:
        return flips
    interval = answer.speculative.interval
    return interval is not None and any(_count_edge(rate, interval, headroom) for rate in rates)


def _stated_error(plain: Capacity) -> float:
    """A screened row's relative error: SCREEN_ERROR, or plain decoding's simulated range's
    half-width over its capacity where wider."""
    if plain.interval is None or plain.max_request_rate <= 0:
        return SCREEN_ERROR
    low, high = plain.interval
    return max(SCREEN_ERROR, (high - low) / (2.0 * plain.max_request_rate))


def _count_edge(rate: float, interval: Interval, headroom: float) -> bool:
    """Whether the screened row's range could move a small replica count by one."""
    low = replicas_for(rate, interval[1], headroom)
    high = replicas_for(rate, interval[0], headroom)
    return low is not None and low <= FEW_REPLICAS and low != high
