"""An arm: one way of serving a request's traffic (plain decoding, K = 0, or speculation at K)
as a replica the simulator serves; its requests at a load, its metrics, the mean-field model's
view of it, and the K that serves a load best."""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from functools import cached_property, lru_cache

import numpy as np

from infersize.core.arrays import floats
from infersize.core.profile import conditional_rates, iid_profile
from infersize.core.serving.meanfield import Lengths, mean_field, sustained_rate
from infersize.core.serving.metrics import ServingMetrics, metrics
from infersize.core.serving.replica import Load, Replica, check_fits, layout_floats
from infersize.core.serving.replica import replica as serving_replica
from infersize.core.serving.simulate import simulate
from infersize.core.serving.sla import Sla
from infersize.core.serving.traffic import replay, unit_gaps, verify_steps
from infersize.core.tree import tree_rates
from infersize.errors import InfersizeError
from infersize.record import record
from infersize.service.capacity.request import CapacityRequest, NoKvRoomError, Traffic
from infersize.service.request import Prepared


@record
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
        return drawn_steps(self.traffic, self.draft_k, self.rates)

    @cached_property
    def steps_by_k(self) -> dict[int, np.ndarray] | None:
        """With K switched by the batch: each request's steps at each K of the table, drawn as
        the arm at that K draws them (its rates a prefix of the largest K's)."""
        switch = self.replica.switch
        if switch is None:
            return None
        return {
            k: drawn_steps(self.traffic, k, self.rates[:k]) for k in sorted(set(switch.draft_k))
        }


@lru_cache(maxsize=256)
def drawn_steps(traffic: Traffic, draft_k: int, rates: tuple[float, ...]) -> np.ndarray:
    """The steps of each request of `traffic` at K drafts accepted at `rates`, drawn from the
    K's own stream: the same for every arm that asks (a capacity search makes many), so drawn
    once (read-only)."""
    outputs = replay(traffic.output_tokens, traffic.requests)
    steps = verify_steps(_rng(traffic, 1 + draft_k), outputs - 1, rates)
    steps.flags.writeable = False
    return steps


@lru_cache(maxsize=64)
def unit_arrivals(traffic: Traffic) -> np.ndarray:
    """The arrival times of `traffic`'s requests at one request per second, from stream 0:
    every probe of a search scales the same draws to its rate (common random numbers), drawn
    once (read-only)."""
    gaps = unit_gaps(_rng(traffic, 0), traffic.requests, traffic.arrival)
    arrivals = np.cumsum(gaps)
    arrivals.flags.writeable = False
    return arrivals


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


def replica_key(prepared: Prepared, draft_k: int) -> tuple[object, ...]:
    """What a replica depends on: the deployment, the engine, K and the drafts' shape."""
    dep = prepared.deployment
    return (
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
    key = replica_key(prepared, draft_k)
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
    if draft_k > 0:  # the drafter's weights and slots may leave a pool too small for a request
        longest = int(np.argmax(inputs + outputs))
        pool = layout_floats(replica.pool_kv)
        prompt, answer = [int(inputs[longest])], [int(outputs[longest])]
        try:
            check_fits(pool, replica.kv_capacity_bytes, prompt, answer, replica.lookahead)
        except InfersizeError as exc:
            raise NoKvRoomError(f"at K = {draft_k}, {exc}") from None
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
        arrivals, clients = unit_arrivals(traffic) / per_s, None
    return Load(
        input_tokens=inputs,
        output_tokens=outputs,
        steps=arm.steps[:n],
        arrivals=arrivals,
        concurrency=clients,
        steps_by_k=None
        if arm.steps_by_k is None
        else {k: s[:n] for k, s in arm.steps_by_k.items()},
    )


def serve(
    arm: Arm, traffic: Traffic, rate: float | None = None, itl: bool = True
) -> ServingMetrics:
    """The arm's metrics at `rate` (open loop), else at the traffic's own load; `itl` False
    leaves the inter-token latencies out (core/serving/metrics.py)."""
    return metrics(simulate(arm.replica, load(arm, traffic, rate)), itl=itl)


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
    return serve(arm, full, itl=False).requests_per_s


SCREEN_FINALISTS = 2  # the K the mean-field screen passes on to the simulator


def mean_field_capacity(arm: Arm, sla: Sla, ceiling: float) -> float:
    """The highest rate at which the mean-field model meets the SLA (bisection below
    `ceiling`, to 2^-14 of it: far inside the screen's own error)."""
    low, high = 0.0, ceiling
    for _ in range(14):
        middle = (low + high) / 2.0
        estimate = mean_field(arm.replica, arm.lengths, middle)
        ok = estimate.sustained and all(
            estimate.value(t.metric, t.statistic) <= t.limit_s for t in sla.terms
        )
        low, high = (middle, high) if ok else (low, middle)
    return max(low, ceiling / 100.0)


# the mean-field capacity of an arm at an SLA, by its replica (identity), lengths and SLA: a
# sweep screens each arm several times (its row's screen, then --draft-k auto's own, its scale
# and its searches' first guesses); the replica is held weakly, so no entry outlives it
_SCREENED: dict[tuple[int, Lengths, Sla], tuple[weakref.ref[Replica], float]] = {}
SCREENED_KEPT = 4096


def _sla_capacity(arm: Arm, sla: Sla) -> float:
    key = (id(arm.replica), arm.lengths, sla)
    found = _SCREENED.get(key)
    if found is not None and found[0]() is arm.replica:
        return found[1]
    ceiling = sustained_rate(arm.replica, arm.lengths)
    score = mean_field_capacity(arm, sla, ceiling) if ceiling > 0 else 0.0
    if len(_SCREENED) >= SCREENED_KEPT:
        _SCREENED.clear()
    _SCREENED[key] = (weakref.ref(arm.replica), score)
    return score


def screen_score(arm: Arm, traffic: Traffic, sla: Sla | None) -> float:
    """The mean-field model's view of an arm (higher is better): with an SLA the highest rate
    meeting it, else minus the mean e2e latency at the load (a closed loop of N clients as the
    rate N / e2e of one request alone)."""
    if sla is not None:
        return _sla_capacity(arm, sla)
    rate = traffic.request_rate
    if rate is None:
        alone = mean_field(arm.replica, arm.lengths, 1e-6).e2e_s.mean
        rate = float(traffic.concurrency or 1) / max(alone, 1e-9)
    estimate = mean_field(arm.replica, arm.lengths, rate)
    return -estimate.e2e_s.mean if estimate.sustained else -math.inf


def choose_draft_k(
    prepared: Prepared,
    req: CapacityRequest,
    simulated: Callable[[int], float],
    replicas: ReplicaCache | None = None,
) -> int:
    """The K that serves the load best: the mean-field model screens K = 1 .. max_k, the
    simulator decides between its two best and plain decoding (K = 0, also when speculation
    does not pay, or when no K leaves the draft room); ties go to the smaller K."""
    screened = {}
    for k in range(1, prepared.request.max_k + 1):
        try:
            arm = make_arm(prepared, req.traffic, k, replicas)
        except NoKvRoomError:  # the draft's weights and KV crowd out the pool at this K
            continue
        screened[k] = screen_score(arm, req.traffic, req.sla)
    finalists = sorted(sorted(screened, key=lambda k: -screened[k])[:SCREEN_FINALISTS])
    return max([0, *finalists], key=simulated)
