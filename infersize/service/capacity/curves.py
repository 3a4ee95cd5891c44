"""Latency against request rate for each arm of a capacity request: what `capacity --plot`
and `plot capacity` draw, from the same simulator as the capacity search."""

from __future__ import annotations

import numpy as np

from infersize.catalog.store import Catalog
from infersize.core.serving.metrics import ServingMetrics
from infersize.record import record
from infersize.service.capacity.answer import BASELINE, SPECULATIVE, ArmKind
from infersize.service.capacity.arm import make_arm, saturation_rate, serve
from infersize.service.capacity.request import CapacityRequest, prepare_capacity

LADDER_POINTS = 12
LOWEST_SHARE = 0.05  # of the busiest arm's saturation rate
HIGHEST_SHARE = 1.10


@record
class LatencyCurve:
    arm: ArmKind
    draft_k: int
    rates: tuple[float, ...]  # requests per second, open loop
    measured: tuple[ServingMetrics, ...]


def capacity_curves(
    req: CapacityRequest, catalog: Catalog, draft_k: int | None
) -> list[LatencyCurve]:
    """Each arm (the speculative one at `draft_k`, None: none) served at a ladder of rates up
    to just past the faster arm's saturation."""
    prepared = prepare_capacity(req, catalog)
    arms = [(BASELINE, make_arm(prepared, req.traffic, 0))]
    if draft_k is not None:
        arms.append((SPECULATIVE, make_arm(prepared, req.traffic, draft_k)))
    top = max(saturation_rate(arm, req.traffic) for _, arm in arms)
    rates = tuple(
        float(r) for r in np.geomspace(LOWEST_SHARE * top, HIGHEST_SHARE * top, LADDER_POINTS)
    )
    return [
        LatencyCurve(
            arm=kind,
            draft_k=arm.draft_k,
            rates=rates,
            measured=tuple(serve(arm, req.traffic, rate) for rate in rates),
        )
        for kind, arm in arms
    ]
