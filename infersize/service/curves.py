"""Curves for the figures, through the same evaluation as `spec`: speedup against K for several
α, and speedup against batch size for one deployment."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from infersize.catalog.store import Catalog
from infersize.core.arrays import BoolArray, FloatArray, IntArray, floats
from infersize.core.engines import configure_engine
from infersize.core.evaluate import MAX_K, Workload, evaluate
from infersize.core.limits import BATCH_LADDER, crossover_batch
from infersize.core.speculative import optimal_k_leviathan
from infersize.core.speedup import StepTimes, get_speedup_model
from infersize.errors import ValueRangeError
from infersize.service.acceptance import resolve_alpha
from infersize.service.resolve import Deployment, resolve_deployment
from infersize.service.spec import SpecRequest, validate_request


@dataclass(frozen=True)
class KCurve:
    """Leviathan's S(K) at one α and γ, with its optimal K (the Lambert-W closed form)."""

    alpha: float
    ks: IntArray
    speedup: FloatArray
    best_k: int

    @property
    def best_speedup(self) -> float:
        return float(self.speedup[self.best_k - 1])


def speedup_vs_k(alphas: list[float], latency_ratio: float, max_k: int) -> list[KCurve]:
    if any(not 0.0 <= a <= 1.0 for a in alphas):
        raise ValueRangeError("alpha", "values must be in [0, 1]")
    if not (math.isfinite(latency_ratio) and latency_ratio > 0):
        raise ValueRangeError("latency_ratio", f"must be a finite number > 0, got {latency_ratio}")
    if not 1 <= max_k <= MAX_K:
        raise ValueRangeError("max_k", f"must be in 1..{MAX_K}, got {max_k}")
    model = get_speedup_model("leviathan")
    ks = np.arange(1, max_k + 1)
    times = StepTimes.from_latency_ratio(latency_ratio)
    curves = []
    for alpha in alphas:
        speedup = model.speedup(floats(alpha), floats(ks), times)
        best = int(optimal_k_leviathan(alpha, latency_ratio, max_k))
        curves.append(KCurve(alpha, ks, speedup, best))
    return curves


@dataclass(frozen=True, kw_only=True)
class BatchCurve:
    """Roofline speedup of one deployment against batch size at one α and K."""

    deployment: Deployment
    alpha: float
    batches: FloatArray
    speedup: FloatArray
    fits: BoolArray  # the batch fits in memory at this K
    crossover: int | None  # first batch at which speculation stops paying


def speedup_vs_batch(req: SpecRequest, catalog: Catalog) -> BatchCurve:
    validate_request(req)
    engine = configure_engine(req.engine)
    dep = resolve_deployment(req.deployment, catalog, engine)
    if dep.draft is None:
        raise ValueRangeError("draft", "is needed for a speedup curve")
    alpha, _ = resolve_alpha(req.acceptance_rate, dep, catalog)
    work = Workload(context=req.context_length, batch=BATCH_LADDER, alpha=alpha, ks=[req.draft_k])
    point = evaluate(dep.numbers, engine, get_speedup_model("roofline"), work).at(0)
    cross = float(crossover_batch(dep.numbers, engine, req.context_length, alpha, req.draft_k))
    return BatchCurve(
        deployment=dep,
        alpha=alpha,
        batches=floats(BATCH_LADDER),
        speedup=point.speed.speedup,
        fits=point.memory.fits,
        crossover=None if math.isnan(cross) else int(cross),
    )
