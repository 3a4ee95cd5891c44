"""`spec --draft auto`: every drafter the catalog has for the target (service/drafters.py),
each at its best K that fits, ranked by speedup at the batch and context asked; those that do
not fit last. Each loser says why it loses to the winner: memory, acceptance or the cost of
drafting and verifying."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from infersize.catalog.store import Catalog
from infersize.errors import InfersizeError
from infersize.record import record
from infersize.service.drafters import (
    Drafter,
    catalog_drafters,
    check_ranking_request,
    with_drafter,
)
from infersize.service.request import SpecRequest
from infersize.service.spec import run_spec, spec_json
from infersize.service.spec_result import SpecResult

ALPHA_GAP = 0.01  # acceptance rates closer than this do not explain a ranking


@record
class SpecCandidate:
    drafter: Drafter
    result: SpecResult | None  # None: the deployment could not be priced (`problem` says why)
    problem: str | None = None

    @property
    def speedup(self) -> float:
        """At the best K that fits (0 where nothing fits)."""
        if self.result is None or not self.result.fits:
            return 0.0
        return self.result.speedup_at_optimal_k or 0.0


@record
class SpecRanking:
    candidates: tuple[SpecCandidate, ...]  # best first
    why: tuple[str, ...]  # each candidate's place, in the same order
    notes: tuple[str, ...]
    best: SpecResult | None  # the winner's answer at its best K (None: it could not be priced)


def rank_spec_drafters(req: SpecRequest, catalog: Catalog) -> SpecRanking:
    """Every drafter at its best K, the fastest first."""
    check_ranking_request(req)
    drafters, notes = catalog_drafters(req, catalog)
    candidates = []
    for drafter in drafters:
        try:
            result = run_spec(with_drafter(req, drafter), catalog)
        except InfersizeError as error:
            candidates.append(SpecCandidate(drafter=drafter, result=None, problem=str(error)))
            continue
        candidates.append(SpecCandidate(drafter=drafter, result=result))
    if not candidates:
        raise InfersizeError(f"the catalog has no drafter for {req.deployment.target}")
    ranked = sorted(
        candidates,
        key=lambda c: (-c.speedup, c.drafter.method, c.drafter.drafter, c.drafter.draft_quant),
    )
    why = tuple(_why(c, ranked[0]) for c in ranked)
    return SpecRanking(
        candidates=tuple(ranked),
        why=why,
        notes=tuple(notes),
        best=_at_best_k(req, ranked[0], catalog),
    )


def _at_best_k(req: SpecRequest, winner: SpecCandidate, catalog: Catalog) -> SpecResult | None:
    """The winner's `spec` answer at the K it was ranked by."""
    result = winner.result
    if result is None or not result.fits or result.optimal_k is None:
        return result
    at_k = dataclasses.replace(with_drafter(req, winner.drafter), draft_k=result.optimal_k)
    return run_spec(at_k, catalog)


def _why(candidate: SpecCandidate, winner: SpecCandidate) -> str:
    """Why `candidate` ranks below `winner`: memory, acceptance or the drafting cost."""
    mine, best = candidate.result, winner.result
    if candidate is winner:
        return "the highest speedup at its best K"
    if mine is None:
        return f"cannot run: {candidate.problem}"
    if not mine.fits:
        return f"memory: does not fit ({mine.verdict}, {mine.utilization:.0%} of the GPU)"
    assert best is not None
    alpha, best_alpha = mine.acceptance_rate or 0.0, best.acceptance_rate or 0.0
    if alpha < best_alpha - ALPHA_GAP:
        return f"acceptance: α {alpha:.2f} against {best_alpha:.2f}"
    ratio, best_ratio = mine.latency_ratio or math.inf, best.latency_ratio or math.inf
    return f"verification cost: latency ratio {ratio:.1f} against {best_ratio:.1f}"


def candidate_json(candidate: SpecCandidate, why: str) -> dict[str, Any]:
    result = candidate.result
    fits = result is not None and result.fits
    return {
        "method": candidate.drafter.method,
        "drafter": candidate.drafter.drafter,
        "draft_quant": candidate.drafter.draft_quant
        if result is None or result.draft is None
        else result.draft.quant,
        "draft_k": result.optimal_k if fits and result is not None else None,
        "speedup": candidate.speedup if fits else None,
        "acceptance_rate": None if result is None else result.acceptance_rate,
        "fits": fits,
        "why": why,
    }


def ranking_json(ranking: SpecRanking) -> dict[str, Any]:
    """`spec --draft auto --json`: the winner's `spec --json` object with `candidates`."""
    data: dict[str, Any] = {} if ranking.best is None else spec_json(ranking.best)
    data["candidates"] = [
        candidate_json(c, why) for c, why in zip(ranking.candidates, ranking.why, strict=True)
    ]
    data["notes"] = list(data.get("notes", [])) + list(ranking.notes)
    return data
