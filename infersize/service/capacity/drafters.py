"""`capacity --draft auto`: every drafter the catalog has for the target (service/drafters.py)
served at the load, each at the K that serves it best (`--draft-k auto`), and ranked as a
planner pays for them: the fewest GPUs for the target rate, then the fewest dollars an hour,
then the highest request rate per replica at the SLA. Each is exactly the answer `capacity`
gives for that drafter alone (the same request, the same draws); plain decoding's answer is
computed once and shared. Each loser says why it loses to the winner: memory (its weights
shrink the KV pool, or leave none), acceptance, or the cost of drafting and verifying."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from infersize.catalog.store import Catalog
from infersize.errors import InfersizeError
from infersize.record import record
from infersize.service.capacity.answer import ArmResult, CapacityResult
from infersize.service.capacity.layouts import run_capacity_tp_auto
from infersize.service.capacity.request import CapacityRequest
from infersize.service.capacity.result import BaselineCache, run_capacity
from infersize.service.drafters import (
    Drafter,
    catalog_drafters,
    check_ranking_request,
    with_drafter,
)

ALPHA_GAP = 0.01  # acceptance rates closer than this do not explain a ranking
POOL_GAP = 0.03  # a KV pool this much smaller than the winner's is what costs capacity


@record
class CapacityCandidate:
    drafter: Drafter
    result: CapacityResult | None  # None: the deployment cannot be served (`problem` says why)
    problem: str | None = None

    @property
    def arm(self) -> ArmResult | None:
        """What this drafter serves with: speculation at its K (K = 0 where it does not pay)."""
        return None if self.result is None else self.result.speculative

    def rank_key(self) -> tuple[float, float, float, str, str, str]:
        """Fewest GPUs, then dollars, then the highest capacity; unservable last."""
        arm, drafter = self.arm, self.drafter
        names = (drafter.method, drafter.drafter, drafter.draft_quant)
        if arm is None:
            return (math.inf, math.inf, math.inf, *names)
        gpus = math.inf if arm.fleet is None or arm.fleet.gpus is None else arm.fleet.gpus
        usd = arm.fleet.usd_per_hour if arm.fleet and arm.fleet.usd_per_hour is not None else 0.0
        rate = 0.0 if arm.capacity is None else arm.capacity.max_request_rate
        return (gpus, usd, -rate, *names)


@record
class CapacityRanking:
    candidates: tuple[CapacityCandidate, ...]  # best first
    why: tuple[str, ...]  # each candidate's place, in the same order
    notes: tuple[str, ...]


def rank_capacity_drafters(req: CapacityRequest, catalog: Catalog) -> CapacityRanking:
    """Every drafter served at the load, the cheapest first."""
    check_ranking_request(req.spec)
    if req.sla is None:
        raise InfersizeError(
            "{draft} auto ranks drafters by what they serve at the SLA: give {sla}",
            settings=("draft", "sla"),
        )
    drafters, notes = catalog_drafters(req.spec, catalog)
    shared: BaselineCache = {}
    candidates = [_serve(req, drafter, catalog, shared) for drafter in drafters]
    if not candidates:
        raise InfersizeError(f"the catalog has no drafter for {req.spec.deployment.target}")
    ranked = sorted(candidates, key=CapacityCandidate.rank_key)
    if ranked[0].result is None:
        raise InfersizeError(f"no drafter can serve this load: {ranked[0].problem}")
    why = tuple(_why(c, ranked[0]) for c in ranked)
    return CapacityRanking(candidates=tuple(ranked), why=why, notes=tuple(notes))


def drafter_request(req: CapacityRequest, drafter: Drafter) -> CapacityRequest:
    """The request `capacity --draft DRAFTER --draft-quant Q --draft-k auto` makes."""
    return dataclasses.replace(req, spec=with_drafter(req.spec, drafter), draft_k_auto=True)


def _serve(
    req: CapacityRequest, drafter: Drafter, catalog: Catalog, shared: BaselineCache
) -> CapacityCandidate:
    one = drafter_request(req, drafter)
    try:
        if one.tp_auto:
            result = run_capacity_tp_auto(one, catalog)
        else:
            result = run_capacity(one, catalog, shared)
    except InfersizeError as error:
        return CapacityCandidate(drafter=drafter, result=None, problem=str(error))
    return CapacityCandidate(drafter=drafter, result=result)


def _why(candidate: CapacityCandidate, winner: CapacityCandidate) -> str:
    """Why `candidate` ranks where it does against `winner`."""
    if candidate is winner:
        return "the fewest GPUs, then dollars, for the load at the SLA"
    mine, best = candidate.result, winner.result
    if mine is None or best is None:
        return f"cannot serve: {candidate.problem}"
    arm, top = mine.speculative, best.speculative
    assert arm is not None and top is not None
    if mine.draft_fits is False:
        return "memory: the drafter leaves no room for a KV cache beside the target"
    if arm.draft_k == 0:
        return "verification cost: no K pays at this load (K = 0)"
    alpha, best_alpha = mine.acceptance_rate or 0.0, best.acceptance_rate or 0.0
    if alpha < best_alpha - ALPHA_GAP:
        return f"acceptance: α {alpha:.2f} against {best_alpha:.2f}"
    if arm.kv_pool_tokens < top.kv_pool_tokens * (1.0 - POOL_GAP):
        return f"memory: KV pool {arm.kv_pool_tokens:,} tokens against {top.kv_pool_tokens:,}"
    return f"verification cost: p50 TPOT {arm.tpot_ms.p50:.1f} ms against {top.tpot_ms.p50:.1f}"


def candidate_json(candidate: CapacityCandidate, why: str) -> dict[str, Any]:
    """One row of `candidates`: the drafter, its K, its fleet and why it ranks there."""
    arm = candidate.arm
    fleet = None if arm is None else arm.fleet
    result = candidate.result
    return {
        "method": candidate.drafter.method,
        "drafter": candidate.drafter.drafter,
        "draft_quant": candidate.drafter.draft_quant,
        "draft_k": None if arm is None else arm.draft_k,
        "tp": None if arm is None else arm.tp,
        "gpus": None if fleet is None else fleet.gpus,
        "usd_per_hour": None if fleet is None else fleet.usd_per_hour,
        "max_request_rate": None
        if arm is None or arm.capacity is None
        else arm.capacity.max_request_rate,
        "acceptance_rate": None if result is None else result.acceptance_rate,
        "why": why,
    }
