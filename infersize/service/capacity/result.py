"""The answer of `infersize capacity`: both arms at the load asked, their capacity at the SLA with
its interval, their latency floor, and the fleet a target rate needs. Its JSON keys are a stable
contract (docs/capacity.md)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from infersize.catalog.store import Catalog
from infersize.core.serving.metrics import ServingMetrics, sla_breaches
from infersize.service.capacity.answer import ARMS, ArmResult, CapacityResult, k_schedule_json
from infersize.service.capacity.arm import (
    Arm,
    ReplicaCache,
    choose_draft_k,
    make_arm,
    screen_score,
    serve,
)
from infersize.service.capacity.fleet import Fleet, fleet
from infersize.service.capacity.floor import floor_remedy
from infersize.service.capacity.notes import capacity_confidence, capacity_notes
from infersize.service.capacity.request import CapacityRequest, NoKvRoomError, prepare_capacity
from infersize.service.capacity.search import (
    Capacity,
    alone,
    first_replication,
    rate_text,
    replicated,
    simulated_score,
)
from infersize.service.request import Prepared

Evaluated = tuple[Arm, Capacity | None]
BaselineKey = tuple[object, ...]
BaselineCache = dict[BaselineKey, ArmResult]


def baseline_key(prepared: Prepared, req: CapacityRequest) -> BaselineKey:
    """What plain decoding's answer depends on: the target as deployed, the engine, the
    traffic, the SLA and the fleet asked (not the drafter, nor its acceptance)."""
    dep = prepared.deployment
    return (
        dep.gpu.id,
        dep.target.tp,
        dep.target.model.id,
        dep.target.fmt.id,
        dep.kv_dtype.id,
        float(dep.numbers.price_usd_per_hour),
        prepared.engine,
        req.traffic,
        req.sla,
        req.target_request_rate,
        req.headroom,
        req.replications,
    )


def _price(prepared: Prepared) -> float | None:
    price = float(prepared.deployment.numbers.price_usd_per_hour)
    return None if math.isnan(price) else price


def _load_rate(req: CapacityRequest, fleet_: Fleet | None) -> float | None:
    """The open-loop rate the arm is measured at: the rate asked, else (a target rate alone)
    each replica's share of it; None for a closed loop, or when no rate meets the SLA."""
    traffic = req.traffic
    if traffic.request_rate is not None or traffic.concurrency is not None:
        return traffic.request_rate
    if fleet_ is None or fleet_.replicas is None or req.target_request_rate is None:
        return None
    return req.target_request_rate / fleet_.replicas


def _measure(
    arm: Arm, req: CapacityRequest, fleet_: Fleet | None
) -> tuple[ServingMetrics, str, float | None]:
    """The arm's metrics at the load (ITL if asked), what the load was, and its open-loop rate."""
    traffic, itl = req.traffic, req.itl_at_load
    rate = _load_rate(req, fleet_)
    if rate is not None:
        share = "" if traffic.request_rate is not None else ", its share of the target rate"
        return serve(arm, traffic, rate, itl), f"{rate_text(rate)} requests/s{share}", rate
    if traffic.concurrency is not None:
        return serve(arm, traffic, None, itl), f"{traffic.concurrency} concurrent clients", None
    return alone(arm, traffic, itl), "one request at a time (no rate meets the SLA)", None


def arm_result(
    prepared: Prepared, req: CapacityRequest, arm: Arm, first: Capacity | None
) -> ArmResult:
    """The arm's answer: the capacity's replications, its fleet, its metrics at the load."""
    sla = req.sla
    capacity = (
        None
        if sla is None or first is None
        else (replicated(first, arm, req.traffic, sla, req.replications))
    )
    tp = prepared.deployment.target.tp
    fleet_ = None
    if capacity is not None and req.target_request_rate is not None:
        fleet_ = fleet(
            req.target_request_rate,
            capacity.max_request_rate,
            capacity.interval,
            headroom=req.headroom,
            tp=tp,
            price=_price(prepared),
        )
    measured, load, rate = _measure(arm, req, fleet_)
    broken = list(sla_breaches(measured, sla)) if sla else []
    if capacity is not None and rate is not None and rate > capacity.max_request_rate > 0:
        broken.append(
            f"above this replica's capacity ({rate_text(capacity.max_request_rate)} requests/s)"
        )
    pool = arm.replica.pool_kv
    per_token = float(pool.full_bytes_per_token) + float(pool.window_bytes_per_token)
    return ArmResult(
        draft_k=arm.draft_k,
        tp=tp,
        load=load,
        load_request_rate=rate,
        ttft_ms=measured.ttft_s.scaled(1e3),
        tpot_ms=measured.tpot_s.scaled(1e3),
        itl_ms=measured.itl_s.scaled(1e3),
        e2e_latency_s=measured.e2e_s,
        output_tokens_per_s=measured.output_tokens_per_s,
        requests_per_s=measured.requests_per_s,
        mean_running_sequences=measured.mean_running_sequences,
        preemptions=measured.preemptions,
        meets_sla=None if sla is None else not broken,
        sla_breaches=tuple(broken),
        latency_floor=None if capacity is None else capacity.floor,
        capacity=capacity,
        fleet=fleet_,
        max_num_seqs=arm.replica.max_num_seqs,
        max_num_batched_tokens=arm.replica.max_num_batched_tokens,
        kv_pool_tokens=int(arm.replica.kv_capacity_bytes / max(per_token, 1e-9)),
    )


def _first(
    prepared: Prepared,
    req: CapacityRequest,
    k: int,
    scale: float | None = None,
    replicas: ReplicaCache | None = None,
) -> Evaluated:
    """An arm (K = 0: plain decoding) and its first replication's capacity at the SLA, the
    search starting from its mean-field capacity times `scale` when given."""
    arm = make_arm(prepared, req.traffic, k, replicas)
    if req.sla is None:
        return arm, None
    guess = None if scale is None else screen_score(arm, req.traffic, req.sla) * scale
    return arm, first_replication(arm, req.traffic, req.sla, guess)


def _screen_scale(
    prepared: Prepared,
    req: CapacityRequest,
    baseline: ArmResult,
    replicas: ReplicaCache | None = None,
) -> float | None:
    """Plain decoding's simulated capacity over its mean-field one: the mean-field model errs
    alike for both arms, so this scales speculation's mean-field capacity into a good first
    guess for its search."""
    if req.sla is None or baseline.capacity is None:
        return None
    screened = screen_score(make_arm(prepared, req.traffic, 0, replicas), req.traffic, req.sla)
    simulated = baseline.capacity.replications[0]
    return simulated / screened if screened > 0 and simulated > 0 else None


def plain_decoding(
    prepared: Prepared,
    req: CapacityRequest,
    cache: BaselineCache,
    replicas: ReplicaCache | None = None,
) -> ArmResult:
    """Plain decoding's arm as run_capacity answers it, computed once per key of the cache."""
    key = baseline_key(prepared, req)
    if key not in cache:
        cache[key] = arm_result(prepared, req, *_first(prepared, req, 0, None, replicas))
    return cache[key]


def speculative_k(
    prepared: Prepared,
    req: CapacityRequest,
    firsts: dict[int, Evaluated],
    scale: float | None,
    replicas: ReplicaCache | None = None,
) -> int:
    """The K asked, or with --draft-k auto the K that serves the load best (0: none)."""
    if not req.draft_k_auto:
        return req.spec.draft_k

    def score(k: int) -> float:
        if k not in firsts:
            firsts[k] = _first(prepared, req, k, scale, replicas)
        arm, first = firsts[k]
        return simulated_score(first, None if first else serve(arm, req.traffic, itl=False))

    return choose_draft_k(prepared, req, score, replicas)


def _rate(arm: ArmResult) -> float:
    return -math.inf if arm.capacity is None else arm.capacity.max_request_rate


def run_capacity(
    req: CapacityRequest,
    catalog: Catalog,
    baseline_cache: BaselineCache | None = None,
    replicas: ReplicaCache | None = None,
) -> CapacityResult:
    """Both arms at the load, their capacity at the SLA, the fleet for the target rate. A sweep's
    rows share plain decoding's answer (`baseline_cache`: rows differing only in the drafter)
    and replicas by deployment and K: the answer is the same with or without them."""
    prepared = prepare_capacity(req, catalog)
    cache = {} if baseline_cache is None else baseline_cache
    baseline = plain_decoding(prepared, req, cache, replicas)
    speculative = None
    if prepared.deployment.draft is not None:
        firsts: dict[int, Evaluated] = {}
        if baseline.capacity is not None:  # K = 0 needs no search again
            firsts[0] = (make_arm(prepared, req.traffic, 0, replicas), baseline.capacity)
        scale = _screen_scale(prepared, req, baseline, replicas)
        k = speculative_k(prepared, req, firsts, scale, replicas)
        first = firsts.get(k) or _first(prepared, req, k, scale, replicas)
        speculative = baseline if k == 0 else arm_result(prepared, req, *first)
        if req.draft_k_auto and _rate(speculative) < _rate(baseline):
            speculative = baseline  # over all replications K = 0 serves more: it is the answer
    baseline = _with_remedy(req, catalog, baseline)
    if speculative is not None:
        speculative = _with_remedy(req, catalog, speculative)
    return assemble(prepared, req, baseline, speculative)


def _with_remedy(req: CapacityRequest, catalog: Catalog, arm: ArmResult) -> ArmResult:
    if not arm.at_floor:
        return arm
    remedy = floor_remedy(req, catalog, arm.draft_k, arm.tp)
    return dataclasses.replace(arm, floor_remedy=remedy)


def assemble(
    prepared: Prepared, req: CapacityRequest, baseline: ArmResult, speculative: ArmResult | None
) -> CapacityResult:
    dep = prepared.deployment
    traffic = req.traffic
    workload = {
        "input_tokens": sum(traffic.input_tokens) / len(traffic.input_tokens),
        "output_tokens": sum(traffic.output_tokens) / len(traffic.output_tokens),
        "lengths_file": traffic.lengths_file,
        "request_rate": traffic.request_rate,
        "concurrency": traffic.concurrency,
        "arrival": traffic.arrival.label,
        "requests": traffic.requests,
        "seed": traffic.seed,
        "replications": req.replications,
    }
    arms = [baseline] + ([] if speculative is None else [speculative])
    confidence, reason = capacity_confidence(prepared, arms)
    return CapacityResult(
        target=dep.target.model.id,
        draft=None if dep.draft is None else dep.draft.model.id,
        method=None if dep.draft is None else prepared_method(prepared),
        gpu=dep.gpu.id,
        gpu_name=dep.gpu.name,
        engine=dep.engine.name,
        workload=workload,
        sla=req.sla,
        acceptance_rate=prepared.alpha if dep.draft else None,
        acceptance_source=None
        if dep.draft is None
        else (prepared.acceptance.source if prepared.acceptance else "given"),
        baseline=baseline,
        speculative=speculative,
        draft_fits=None if dep.draft is None else draft_fits(prepared, req),
        target_request_rate=req.target_request_rate,
        headroom=req.headroom,
        price_usd_per_hour=_price(prepared),
        confidence=confidence,
        confidence_reason=reason,
        notes=capacity_notes(prepared, req, arms),
    )


def prepared_method(prepared: Prepared) -> str | None:
    from infersize.core.methods import method_of

    draft = prepared.deployment.draft
    return None if draft is None else method_of(draft.model).name


def draft_fits(prepared: Prepared, req: CapacityRequest) -> bool:
    """Whether the draft and a KV cache fit beside the target at K = 1."""
    try:
        make_arm(prepared, req.traffic, 1)
    except NoKvRoomError:
        return False
    return True


def _by_arm(result: CapacityResult, value: Any) -> dict[str, Any]:
    return {kind.key: value(arm) for kind, arm in result.arms.items()}


def capacity_json(result: CapacityResult) -> dict[str, Any]:
    """The stable JSON object: each arm's metrics, the capacities and fleets by arm, with
    their intervals."""
    data: dict[str, Any] = {
        "target": result.target,
        "draft": result.draft,
        "method": result.method,
        "gpu": result.gpu,
        "gpu_name": result.gpu_name,
        "tp": result.tp,
        "engine": result.engine,
        "workload": result.workload,
        "sla": None if result.sla is None else str(result.sla),
        "acceptance_rate": result.acceptance_rate,
        "acceptance_source": result.acceptance_source,
    }
    for kind in ARMS:
        arm = result.arm(kind)
        data[kind.key] = None if arm is None else _arm_json(arm)
    with_sla = result.sla is not None
    with_fleet = with_sla and result.target_request_rate is not None
    capacity = {
        "max_request_rate": lambda a: a.capacity.max_request_rate,
        "max_request_rate_interval": lambda a: _pair(a.capacity.interval),
    }
    fleets = {
        "replicas": lambda a: a.fleet.replicas,
        "gpus": lambda a: a.fleet.gpus,
        "gpus_interval": lambda a: _pair(a.fleet.gpus_interval),
        "usd_per_hour": lambda a: a.fleet.usd_per_hour,
    }
    for key, value in capacity.items():
        data[key] = _by_arm(result, value) if with_sla else None
    for key, value in fleets.items():
        data[key] = _by_arm(result, value) if with_fleet else None
    data |= {
        "target_request_rate": result.target_request_rate,
        "headroom": result.headroom,
        "speculation_saves_gpus": result.speculation_saves_gpus,
        "price_usd_per_hour": result.price_usd_per_hour,
        "draft_fits": result.draft_fits,
        "confidence": result.confidence,
        "confidence_reason": result.confidence_reason,
        "notes": list(result.notes),
        "k_schedule": k_schedule_json(result.k_schedule),
    }
    return data


def _pair(values: tuple[Any, Any] | None) -> list[Any] | None:
    return None if values is None else list(values)


def _statistics(stats: Any) -> dict[str, float | None]:
    """A statistic over no request (the TPOT of one-token answers) is null, never NaN."""
    return {k: v if math.isfinite(v) else None for k, v in dataclasses.asdict(stats).items()}


def _arm_json(arm: ArmResult) -> dict[str, Any]:
    data: dict[str, Any] = {
        key: _statistics(getattr(arm, key))
        for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_latency_s")
    }
    data |= {
        "output_tokens_per_s": arm.output_tokens_per_s,
        "requests_per_s": arm.requests_per_s,
        "mean_running_sequences": arm.mean_running_sequences,
        "preemptions": arm.preemptions,
        "draft_k": arm.draft_k,
        "tp": arm.tp,
        "load": arm.load,
        "meets_sla": arm.meets_sla,
        "sla_breaches": list(arm.sla_breaches),
        "latency_floor": None
        if arm.latency_floor is None
        else {
            "term": arm.latency_floor.term,
            "share": arm.latency_floor.share,
            "near_floor": arm.latency_floor.near_floor,
            "at_floor": arm.latency_floor.at_floor,
            "remedy": arm.floor_remedy,
        },
        "max_request_rate": None if arm.capacity is None else arm.capacity.max_request_rate,
        "max_request_rate_why": None if arm.capacity is None else arm.capacity.why,
        "max_num_seqs": arm.max_num_seqs,
        "max_num_batched_tokens": arm.max_num_batched_tokens,
        "kv_pool_tokens": arm.kv_pool_tokens,
    }
    return data
