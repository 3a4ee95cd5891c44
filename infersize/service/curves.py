"""Curves for the figures, from the same evaluation as `spec` (`Prepared.evaluate`): speedup
against K for one deployment (K that do not fit marked), against batch size, and Leviathan's
S(K) at a given γ for several α (no deployment: the theorem `spec --latency-ratio` uses)."""

from __future__ import annotations

import math

import numpy as np

from infersize.catalog.store import Catalog
from infersize.core.arrays import BoolArray, FloatArray, IntArray, floats
from infersize.core.evaluate import MAX_K
from infersize.core.limits import BATCH_LADDER
from infersize.core.speedup import SpeedupModel, StepTimes, get_speedup_model
from infersize.defaults import DEFAULTS
from infersize.errors import ValueRangeError
from infersize.record import record
from infersize.service.request import SpecRequest, prepare
from infersize.service.resolve import Deployment


@record
class KCurve:
    """S(K) at one α: the speedup at each K, whether K fits in memory, and the best K that
    fits (None: none does)."""

    alpha: float
    ks: IntArray
    speedup: FloatArray
    fits: BoolArray
    best_k: int | None
    model: SpeedupModel

    @property
    def best_speedup(self) -> float | None:
        return None if self.best_k is None else float(self.speedup[self.best_k - 1])


def speedup_vs_k(alphas: list[float], latency_ratio: float, max_k: int) -> list[KCurve]:
    """Leviathan's S(K) at γ for each α: the model `spec` prices a given γ with; nothing to fit
    (no deployment), so every K counts."""
    if any(not 0.0 <= a <= 1.0 for a in alphas):
        raise ValueRangeError("alpha", "values must be in [0, 1]")
    if not (math.isfinite(latency_ratio) and latency_ratio > 0):
        raise ValueRangeError("latency_ratio", f"must be a finite number > 0, got {latency_ratio}")
    if not 1 <= max_k <= MAX_K:
        raise ValueRangeError("max_k", f"must be in 1..{MAX_K}, got {max_k}")
    model = get_speedup_model(DEFAULTS.speedup_model_given_latency_ratio)
    ks = np.arange(1, max_k + 1)
    times = StepTimes.from_latency_ratio(latency_ratio)
    curves = []
    for alpha in alphas:
        speedup = model.speedup(alpha, ks, times)
        best = int(np.argmax(speedup)) + 1
        fits = np.ones(ks.shape, dtype=np.bool_)
        curves.append(
            KCurve(alpha=alpha, ks=ks, speedup=speedup, fits=fits, best_k=best, model=model)
        )
    return curves


def deployment_speedup_vs_k(req: SpecRequest, catalog: Catalog) -> KCurve:
    """The deployment's S(K), K = 1 .. max_k, by its own speedup model at its batch, with the
    K that fit in memory: the curve of the numbers `spec` prints."""
    prepared = prepare(req, catalog)
    if prepared.deployment.draft is None:
        raise ValueRangeError("draft", "is needed for a speedup curve")
    ev = prepared.evaluate()
    runs = prepared.deployment.support.level != "unsupported"  # as spec's "fits"
    best = int(ev.optimal.k) if bool(ev.fits_any) and runs else None
    return KCurve(
        alpha=prepared.alpha,
        ks=ev.ks,
        speedup=floats(ev.speed.speedup),
        fits=ev.fits_k & runs,
        best_k=best,
        model=prepared.model,
    )


@record
class BatchCurve:
    """One deployment's speedup against batch size at one α (or profile) and K."""

    deployment: Deployment
    alpha: float
    batches: FloatArray
    speedup: FloatArray
    fits: BoolArray  # the batch fits in memory at this K
    crossover: int | None  # first batch at which speculation stops paying
    model: SpeedupModel


def speedup_vs_batch(req: SpecRequest, catalog: Catalog) -> BatchCurve:
    prepared = prepare(req, catalog)
    if prepared.deployment.draft is None:
        raise ValueRangeError("draft", "is needed for a speedup curve")
    point = prepared.evaluate(batch=BATCH_LADDER).at(req.draft_k - 1)
    return BatchCurve(
        deployment=prepared.deployment,
        alpha=prepared.alpha,
        batches=floats(BATCH_LADDER),
        speedup=point.speed.speedup,
        fits=point.memory.fits & (prepared.deployment.support.level != "unsupported"),
        crossover=prepared.crossover_batch(),
        model=prepared.model,
    )
