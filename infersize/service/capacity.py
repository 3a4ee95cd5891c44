"""`infersize capacity`: how many GPUs a load needs at a latency target, with and without
speculation. A request names the deployment as `spec` does, the traffic and the SLA; each arm
(plain decoding, and speculation at its K) is a replica the simulator serves (core/simulate.py):
its metrics at the load asked, the highest request rate whose SLA percentiles hold (the search
is service/capacity_search.py), and the replicas and GPUs a target rate needs at that capacity.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from infersize.catalog.store import Catalog
from infersize.core.arrays import floats
from infersize.core.interval import MAX_REPLICATIONS
from infersize.core.meanfield import Lengths, mean_field, sustained_rate
from infersize.core.metrics import ServingMetrics, metrics
from infersize.core.profile import conditional_rates, iid_profile
from infersize.core.replica import Load, Replica
from infersize.core.replica import replica as serving_replica
from infersize.core.simulate import simulate
from infersize.core.sla import Sla
from infersize.core.traffic import Arrival, replay, unit_gaps, verify_steps
from infersize.core.tree import tree_rates
from infersize.defaults import DEFAULTS
from infersize.errors import InfersizeError, ValueRangeError
from infersize.service.request import Prepared, SpecRequest, prepare

BISECTION_TOLERANCE = 0.01  # stop when the bracket is within 1 % of its top
MAX_PROBES = 24
RATE_STEP = 1.1  # how far a bracketing probe moves the rate (the mean-field guess's error)


@dataclass(frozen=True, kw_only=True)
class Traffic:
    """The requests: lengths (one pair of means, or a trace replayed in order), and the load."""

    input_tokens: tuple[int, ...]
    output_tokens: tuple[int, ...]
    lengths_file: str | None = None
    request_rate: float | None = None  # open loop, requests per second
    concurrency: int | None = None  # closed loop: clients
    arrival: Arrival = field(default_factory=Arrival)
    requests: int = DEFAULTS.capacity_requests
    seed: int = DEFAULTS.seed
    replication: int = 0  # independent draws under the same seed (0: the seed's own)


@dataclass(frozen=True, kw_only=True)
class CapacityRequest:
    spec: SpecRequest  # the deployment, engine and acceptance, as `spec` takes them
    draft_k_auto: bool = False  # choose the K that serves the load best (0: no speculation)
    traffic: Traffic
    sla: Sla | None = None
    target_request_rate: float | None = None
    headroom: float = DEFAULTS.headroom
    replications: int = DEFAULTS.capacity_replications  # capacity searches under other draws
    tp_auto: bool = False  # each arm at the tensor-parallel size of fewest GPUs
    engine_by_default: bool = False  # the engine is capacity's default, not the user's


@dataclass(frozen=True, kw_only=True)
class Arm:
    """One way of serving: plain decoding (K = 0) or speculation at K."""

    draft_k: int
    replica: Replica
    lengths: Lengths
    traffic: Traffic
    rates: tuple[float, ...]  # r_1..r_K the steps are drawn from

    @cached_property
    def steps(self) -> np.ndarray:
        """Verification steps of each request after its first token (drawn when first asked:
        the mean-field screen needs none)."""
        n = self.traffic.requests
        outputs = replay(self.traffic.output_tokens, n)
        return verify_steps(_rng(self.traffic, 1 + self.draft_k), outputs - 1, self.rates)


# The ranges a capacity request's numbers must lie in: wide enough for any real fleet, narrow
# enough that no product of two of them overflows or underflows a float (a rate of 5e-324 makes
# every arrival time infinite; a headroom of 1e308 every replica count)
RATE_RANGE = (1e-6, 1e6)  # requests per second, per replica or for the fleet
FLEET_RATE_RANGE = (1e-6, 1e9)
HEADROOM_RANGE = (1.0, 1000.0)
MAX_CONCURRENCY = 1 << 20
MAX_REQUESTS = 1_000_000
MAX_TOKENS = 10_000_000  # a request's prompt or answer
SEED_RANGE = (0, 2**32 - 1)


def check_range(name: str, value: float, bounds: tuple[float, float], what: str = "") -> None:
    """`value` finite and within `bounds`, else one line naming the setting."""
    low, high = bounds
    if not (math.isfinite(value) and low <= value <= high):
        raise ValueRangeError(name, f"must be {what}in [{low:g}, {high:g}], got {value:g}")


def validate_traffic(traffic: Traffic, target_request_rate: float | None = None) -> None:
    if traffic.request_rate is not None and traffic.concurrency is not None:
        raise ValueRangeError(
            "request_rate", "or {concurrency} sets the load: give one of them, not both"
        )
    if traffic.request_rate is None and traffic.concurrency is None and not target_request_rate:
        raise ValueRangeError(
            "request_rate",
            "or {concurrency} sets the load (or {target_request_rate}, measured at each "
            "replica's share of it)",
        )
    if traffic.request_rate is not None:
        check_range("request_rate", traffic.request_rate, RATE_RANGE, "a number of requests/s ")
    if traffic.concurrency is not None:
        check_range("concurrency", traffic.concurrency, (1, MAX_CONCURRENCY))
    check_range("requests", traffic.requests, (1, MAX_REQUESTS))
    check_range("seed", traffic.seed, SEED_RANGE)
    if not traffic.input_tokens or len(traffic.input_tokens) != len(traffic.output_tokens):
        raise ValueRangeError("input_tokens", "and {output_tokens} need one length each")
    for name, lengths in (
        ("input_tokens", traffic.input_tokens),
        ("output_tokens", traffic.output_tokens),
    ):
        for value in (min(lengths), max(lengths)):
            check_range(name, value, (1, MAX_TOKENS))


def _rng(traffic: Traffic, stream: int) -> np.random.Generator:
    """Independent, seeded streams: 0 arrivals, 1 + K a K's acceptance draws; a replication
    past the first draws every stream anew."""
    key = [traffic.seed, stream] + ([traffic.replication] if traffic.replication else [])
    return np.random.default_rng(np.random.SeedSequence(key))


def acceptance_rates(prepared: Prepared, draft_k: int) -> tuple[float, ...]:
    """r_1..r_K: the profile asked (extended past its end), else α^i (i.i.d. acceptance); a
    tree's share of steps accepting at least i drafts (core/tree.py)."""
    if draft_k == 0:
        return ()
    if prepared.rates is not None:
        profile = floats(prepared.rates[:draft_k])
    else:
        profile = iid_profile(prepared.alpha, draft_k)
    if not prepared.tree.is_chain:
        profile = tree_rates(conditional_rates(profile), prepared.tree, draft_k)
    return tuple(float(r) for r in profile)


ReplicaCache = dict[tuple[object, ...], Replica]


class UnservableError(InfersizeError):
    """The deployment cannot serve at all: the GPU cannot run its precisions, or its weights
    leave no room for a KV cache (an answer of zero capacity in a sweep, not a failure)."""


class NoKvRoomError(UnservableError):
    """The weights (with the draft's, at K > 0) leave no room for a KV cache."""


def make_arm(
    prepared: Prepared, traffic: Traffic, draft_k: int, replicas: ReplicaCache | None = None
) -> Arm:
    """The arm at K. `replicas` shares replicas between requests of the same deployment and
    engine (a replica does not depend on the traffic or the acceptance)."""
    n = traffic.requests
    inputs, outputs = replay(traffic.input_tokens, n), replay(traffic.output_tokens, n)
    rates = acceptance_rates(prepared, draft_k)
    lengths = Lengths(
        input_tokens=float(inputs.mean()), output_tokens=float(outputs.mean()), rates=rates
    )
    dep = prepared.deployment
    key = (
        dep.gpu.id,
        dep.target.tp,
        dep.target.model.id,
        dep.target.fmt.id,
        dep.kv_dtype.id,
        None if dep.draft is None else (dep.draft.model.id, dep.draft.fmt.id),
        prepared.engine,
        draft_k,
        prepared.tree,
    )
    if replicas is not None and key in replicas:
        replica = replicas[key]
    else:
        replica = serving_replica(dep.numbers, prepared.engine, draft_k, prepared.tree)
        if replicas is not None:
            replicas[key] = replica
    if replica.kv_capacity_bytes <= 0 or replica.max_num_seqs < 1:
        models = dep.target.model.id + (
            f" + {dep.draft.model.id}" if dep.draft is not None and draft_k else ""
        )
        raise NoKvRoomError(
            f"{models} ({dep.target.fmt.id}) leaves no room for a KV cache on "
            f"{dep.gpu.name} at tensor parallel {dep.target.tp}: use more GPUs per replica or "
            "a lighter precision"
        )
    return Arm(draft_k=draft_k, replica=replica, lengths=lengths, traffic=traffic, rates=rates)


def load(arm: Arm, traffic: Traffic, rate: float | None = None) -> Load:
    """The requests of `traffic` as `arm` serves them: at `rate` (open loop), else at the
    traffic's own load."""
    n = traffic.requests
    inputs, outputs = replay(traffic.input_tokens, n), replay(traffic.output_tokens, n)
    if rate is None and traffic.concurrency is not None:
        arrivals, clients = None, traffic.concurrency
    else:
        per_s = rate if rate is not None else float(traffic.request_rate or 0.0)
        gaps = unit_gaps(_rng(traffic, 0), n, traffic.arrival)
        arrivals, clients = np.cumsum(gaps) / per_s, None
    return Load(
        input_tokens=inputs,
        output_tokens=outputs,
        steps=arm.steps[:n],
        arrivals=arrivals,
        concurrency=clients,
    )


def serve(arm: Arm, traffic: Traffic, rate: float | None = None) -> ServingMetrics:
    """The arm's metrics at `rate` (open loop), else at the traffic's own load."""
    return metrics(simulate(arm.replica, load(arm, traffic, rate)))


def saturation_rate(arm: Arm, traffic: Traffic) -> float:
    """Requests per second a replica completes when it is always full: a closed loop of as
    many clients as it runs sequences at once."""
    full = Traffic(
        input_tokens=traffic.input_tokens,
        output_tokens=traffic.output_tokens,
        concurrency=arm.replica.max_num_seqs,
        requests=traffic.requests,
        seed=traffic.seed,
    )
    return serve(arm, full).requests_per_s


SCREEN_FINALISTS = 2  # the K the mean-field screen passes on to the simulator


def mean_field_capacity(arm: Arm, sla: Sla, ceiling: float) -> float:
    """The highest rate at which the mean-field model meets the SLA (bisection below
    `ceiling`, to 2^-14 of it: far inside the screen's own error)."""
    low, high = 0.0, ceiling
    for _ in range(14):
        middle = (low + high) / 2.0
        estimate = mean_field(arm.replica, arm.lengths, middle)
        ok = estimate.sustained and all(
            getattr(estimate, f"{t.metric}_s")[t.statistic] <= t.limit_s for t in sla.terms
        )
        low, high = (middle, high) if ok else (low, middle)
    return max(low, ceiling / 100.0)


def screen_score(arm: Arm, traffic: Traffic, sla: Sla | None) -> float:
    """The mean-field model's view of an arm (higher is better): with an SLA the highest rate
    meeting it, else minus the mean e2e latency at the load (a closed loop of N clients as the
    rate N / e2e of one request alone)."""
    if sla is not None:
        ceiling = sustained_rate(arm.replica, arm.lengths)
        return mean_field_capacity(arm, sla, ceiling) if ceiling > 0 else 0.0
    rate = traffic.request_rate
    if rate is None:
        alone = mean_field(arm.replica, arm.lengths, 1e-6).e2e_s["mean"]
        rate = float(traffic.concurrency or 1) / max(alone, 1e-9)
    estimate = mean_field(arm.replica, arm.lengths, rate)
    return -estimate.e2e_s["mean"] if estimate.sustained else -math.inf


def choose_draft_k(
    prepared: Prepared, req: CapacityRequest, simulated: Callable[[int], float]
) -> int:
    """The K that serves the load best: the mean-field model screens K = 1 .. max_k, the
    simulator decides between its two best and plain decoding (K = 0, also when speculation
    does not pay, or when no K leaves the draft room); ties go to the smaller K."""
    screened = {}
    for k in range(1, prepared.request.max_k + 1):
        try:
            arm = make_arm(prepared, req.traffic, k)
        except NoKvRoomError:  # the draft's weights and KV crowd out the pool at this K
            continue
        screened[k] = screen_score(arm, req.traffic, req.sla)
    finalists = sorted(sorted(screened, key=lambda k: -screened[k])[:SCREEN_FINALISTS])
    return max([0, *finalists], key=simulated)


def replicas_for(rate: float, capacity_rate: float, headroom: float) -> int | None:
    """ceil(headroom × target / capacity); None when no rate meets the SLA."""
    if capacity_rate <= 0:
        return None
    return max(1, math.ceil(headroom * rate / capacity_rate - 1e-12))


def _check_vacuous(req: CapacityRequest) -> None:
    """An SLA term no request can break (a TPOT or ITL limit where every answer is one token:
    no request has a TPOT) would make every answer meaningless: refuse it."""
    if req.sla is None or max(req.traffic.output_tokens) > 1:
        return
    for term in req.sla.terms:
        if term.metric in ("tpot", "itl"):
            raise ValueRangeError(
                "sla",
                f"term '{term}' limits the time between tokens, but every answer is one token: "
                "no request has one (answers need at least 2 tokens, {output_tokens})",
            )


def prepare_capacity(req: CapacityRequest, catalog: Catalog) -> Prepared:
    validate_traffic(req.traffic, req.target_request_rate)
    if req.target_request_rate is not None and req.sla is None:
        raise ValueRangeError(
            "target_request_rate",
            "needs {sla}: the latency target decides what one replica serves, and so how many "
            "it takes",
        )
    if not 1 <= req.replications <= MAX_REPLICATIONS:
        raise ValueRangeError(
            "replications", f"must be in 1..{MAX_REPLICATIONS}, got {req.replications}"
        )
    check_range("headroom", req.headroom, HEADROOM_RANGE)
    if req.target_request_rate is not None:
        check_range(
            "target_request_rate",
            req.target_request_rate,
            FLEET_RATE_RANGE,
            "a number of requests/s ",
        )
    _check_vacuous(req)
    prepared = prepare(req.spec, catalog)
    if prepared.deployment.support.level == "unsupported":
        raise UnservableError(
            f"{prepared.deployment.gpu.name} cannot run this deployment: "
            f"{prepared.deployment.support.reason}"
        )
    return prepared
