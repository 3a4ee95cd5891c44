"""One acceptance metric in, all of them out (i.i.d. acceptance assumed).

Definitions: α is Leviathan's per-token acceptance rate; E = (1 − α^(K+1)) / (1 − α) is the mean
number of tokens per verification step (vLLM V1 "mean acceptance length", Spec-Bench/EAGLE τ);
vLLM V1 "acceptance rate" = (E − 1) / K; vLLM V0 "system efficiency" = E / (K + 1). llama.cpp's
accept% is none of these (its drafting stops early).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from infersize.catalog.published import AcceptancePrior
from infersize.core import speculative as sd
from infersize.core.arrays import FloatArray, floats
from infersize.errors import InfersizeError, ValueRangeError
from infersize.record import record


@record
class AcceptanceMetrics:
    draft_k: int
    acceptance_rate: float
    mean_accepted_tokens: float
    vllm_acceptance_rate: float
    system_efficiency: float


# metric -> (its range at K, its α)
_METRICS: dict[str, tuple[Callable[[int], tuple[float, float]], Callable[[float, int], FloatArray]]]
_METRICS = {
    "mean_accepted_tokens": (lambda k: (1.0, k + 1.0), sd.alpha_for_expected_tokens),
    "vllm_acceptance_rate": (lambda k: (0.0, 1.0), sd.alpha_from_vllm_acceptance_rate),
    "system_efficiency": (lambda k: (1.0 / (k + 1), 1.0), sd.alpha_from_system_efficiency),
    "acceptance_rate": (lambda k: (0.0, 1.0), lambda value, k: floats(value)),
}
METRICS = tuple(_METRICS)


def convert(k: int, metric: str, value: float) -> AcceptanceMetrics:
    """All the metrics from one of METRICS measured at draft length `k`."""
    if metric not in _METRICS:
        raise InfersizeError(f"unknown acceptance metric '{metric}': one of {', '.join(METRICS)}")
    if k < 1:
        raise ValueRangeError("draft_k", f"must be at least 1, got {k}")
    bounds, to_alpha = _METRICS[metric]
    low, high = bounds(k)
    if not math.isfinite(value) or not low <= value <= high:
        raise ValueRangeError(metric, f"must be in [{low:g}, {high:g}] at this K, got {value:g}")
    alpha = float(to_alpha(value, k))
    derived = {name: float(v) for name, v in sd.acceptance_metrics(alpha, k).items()}
    return AcceptanceMetrics(draft_k=k, acceptance_rate=alpha, **derived)


def prior_alpha(prior: AcceptancePrior, draft_params: float, target_params: float) -> float:
    """α expected of a draft `draft_params / target_params` the size of its target, for pairs
    nobody measured: α = intercept + slope · log10(draft / target), clipped to the prior's
    range (the line is fitted to published pairs; configs/acceptance.yaml)."""
    line = prior.intercept + prior.slope * math.log10(draft_params / target_params)
    return min(max(line, prior.alpha_min), prior.alpha_max)


@record
class PriorFit:
    intercept: float
    slope: float
    rmse: float
    max_abs_error: float
    pairs: int


def fit_prior(draft_params: ArrayLike, target_params: ArrayLike, alphas: ArrayLike) -> PriorFit:
    """Least squares of α on log10(draft / target) over published pairs, and its errors."""
    x = np.log10(floats(draft_params) / floats(target_params))
    y = floats(alphas)
    design = np.stack([np.ones_like(x), x], axis=1)
    (intercept, slope), *_ = np.linalg.lstsq(design, y, rcond=None)
    residual = y - (intercept + slope * x)
    return PriorFit(
        intercept=float(intercept),
        slope=float(slope),
        rmse=float(np.sqrt(np.mean(residual**2))),
        max_abs_error=float(np.max(np.abs(residual))),
        pairs=int(y.size),
    )
