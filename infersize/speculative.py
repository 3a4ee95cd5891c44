"""Speculative decoding maths, vectorised over numpy arrays.

Symbols are Leviathan, Kalman & Matias, "Fast Inference from Transformers via Speculative
Decoding", ICML 2023 (arXiv 2211.17192): α the acceptance rate of one draft token, γ here the
number of draft tokens per step (we call it K, as the seed does) and c = 1/γ_latency the cost of
a draft step relative to a target step. The seed calls the latency ratio γ = 1/c.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]
SPEEDUP_MODELS = ("leviathan", "roofline", "linear")


def expected_tokens(alpha: ArrayLike, k: ArrayLike) -> FloatArray:
    """E = (1 − α^(K+1)) / (1 − α), tokens emitted per target pass (Leviathan eq. 1); K+1 at α=1."""
    alpha = np.asarray(alpha, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    one = alpha >= 1.0
    safe = np.where(one, 0.5, alpha)
    return np.where(one, k + 1.0, (1.0 - safe ** (k + 1.0)) / (1.0 - safe))


def speedup_leviathan(alpha: ArrayLike, k: ArrayLike, latency_ratio: ArrayLike) -> FloatArray:
    """Theorem 3.8: S = (1 − α^(K+1)) / ((1 − α)(1 + cK)), c = 1/latency_ratio."""
    c = 1.0 / np.asarray(latency_ratio, dtype=np.float64)
    return expected_tokens(alpha, k) / (1.0 + c * np.asarray(k, dtype=np.float64))


def speedup_linear(alpha: ArrayLike, k: ArrayLike, latency_ratio: ArrayLike) -> FloatArray:
    """The seed's printed equation S = (1 + αK) / (1 + (K+1)/γ). Not Leviathan's result: it
    counts αK accepted tokens where the expectation is E − 1 and prices K+1 draft steps where
    K are run. Kept so the seed's numbers can be reproduced."""
    alpha = np.asarray(alpha, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    return (1.0 + alpha * k) / (1.0 + (k + 1.0) / np.asarray(latency_ratio, dtype=np.float64))


def speedup_roofline(
    alpha: ArrayLike,
    k: ArrayLike,
    t_target: ArrayLike,
    t_draft: ArrayLike,
    t_verify: ArrayLike,
) -> FloatArray:
    """S = E · T_target(B,1) / (K · T_draft(B,1) + T_target(B,K+1)) (MagicDec, arXiv 2408.11049,
    general step model). Equals Leviathan's when verifying K+1 tokens costs one target step."""
    k = np.asarray(k, dtype=np.float64)
    return (
        expected_tokens(alpha, k)
        * np.asarray(t_target, dtype=np.float64)
        / (k * np.asarray(t_draft, dtype=np.float64) + np.asarray(t_verify, dtype=np.float64))
    )


def lambert_wm1_of_log(log_minus_z: ArrayLike, iterations: int = 40) -> FloatArray:
    """Lower branch W₋₁(z) for z ∈ [−1/e, 0), given t = ln(−z) ≤ −1 (log form: α^(1/c) underflows).

    W₋₁ solves w·e^w = z with w ≤ −1, i.e. w + ln(−w) = t. Newton on g(w) = w + ln(−w) − t,
    g' = 1 + 1/w, from the branch-point series w ≈ −1 − √(−2(1+t)) near t = −1 and the asymptote
    w ≈ t − ln(−t) elsewhere. Checked against scipy.special.lambertw(z, −1) in the tests; kept in
    numpy so `infersize spec` does not pay scipy's import time."""
    t = np.minimum(np.asarray(log_minus_z, dtype=np.float64), -1.0)
    near_branch = t > -2.0
    w = np.where(near_branch, -1.0 - np.sqrt(np.maximum(-2.0 * (1.0 + t), 0.0)), t - np.log(-t))
    for _ in range(iterations):
        w = np.minimum(w, -1.0 - 1e-12)
        w = w - (w + np.log(-w) - t) / (1.0 + 1.0 / w)
    return np.where(t >= -1.0, -1.0, np.minimum(w, -1.0))


def optimal_k_leviathan(
    alpha: ArrayLike, latency_ratio: ArrayLike, k_max: ArrayLike = 16, k_min: ArrayLike = 1
) -> NDArray[np.int64]:
    """Integer K in [k_min, k_max] maximising Theorem 3.8's speedup.

    Continuous optimum from dS/dK = 0: K* = (1 + W₋₁(z)) / ln α − 1/c, z = −α^((1−c)/c) / e
    (../shared/reference/measurements.md, "Optimal K under Theorem 3.8"); S is unimodal in K,
    so the integer optimum is floor(K*) or ceil(K*), whichever gives the larger S."""
    alpha = np.asarray(alpha, dtype=np.float64)
    gamma = np.asarray(latency_ratio, dtype=np.float64)
    k_max = np.asarray(k_max, dtype=np.float64)
    k_min = np.minimum(np.asarray(k_min, dtype=np.float64), k_max)
    c = 1.0 / gamma
    interior = (alpha > 0.0) & (alpha < 1.0) & (c < 1.0)
    a = np.where(interior, alpha, 0.5)
    cc = np.where(interior, c, 0.5)
    log_alpha = np.log(a)
    t = (1.0 - cc) / cc * log_alpha - 1.0  # ln(−z)
    k_star = (1.0 + lambert_wm1_of_log(t)) / log_alpha - 1.0 / cc
    # α = 1 (every token accepted): S grows with K; α = 0 or c ≥ 1: K = 1 is best.
    k_star = np.where(interior, k_star, np.where(alpha >= 1.0, k_max, 1.0))
    low = np.clip(np.floor(k_star), k_min, k_max)
    high = np.clip(np.ceil(k_star), k_min, k_max)
    better_high = speedup_leviathan(alpha, high, gamma) > speedup_leviathan(alpha, low, gamma)
    return np.where(better_high, high, low).astype(np.int64)


def bisect_increasing(
    f: Callable[[FloatArray], FloatArray], target: ArrayLike, iterations: int = 60
) -> FloatArray:
    """x ∈ [0, 1] with f(x) = target for f non-decreasing on [0, 1], vectorised bisection.
    NaN where target is outside [f(0), f(1)] (no root)."""
    target = np.asarray(target, dtype=np.float64)
    lo = np.zeros_like(target)
    hi = np.ones_like(target)
    no_root = (f(lo) > target) | (f(hi) < target)
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        below = f(mid) < target
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return np.where(no_root, np.nan, 0.5 * (lo + hi))


def alpha_for_expected_tokens(expected: ArrayLike, k: ArrayLike) -> FloatArray:
    """α such that E(α, K) = expected; E rises from 1 (α=0) to K+1 (α=1). NaN outside."""
    k = np.asarray(k, dtype=np.float64)
    return bisect_increasing(lambda a: expected_tokens(a, k), expected)


def alpha_for_speedup(
    speedup: ArrayLike,
    k: ArrayLike,
    step_cost: ArrayLike,
    model: str = "leviathan",
    latency_ratio: ArrayLike = 1.0,
) -> FloatArray:
    """α that reaches `speedup` at draft length K (the break-even α when speedup = 1).

    `step_cost` is the time of one speculative step over one target step: 1 + K/γ for
    leviathan, (K·T_draft + T_target(K+1)) / T_target(1) for roofline. Since S = E / step_cost,
    the answer solves E(α, K) = S · step_cost. The seed's linear model solves in closed form.
    NaN where no α in [0, 1] reaches it."""
    speedup = np.asarray(speedup, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    if model == "linear":
        alpha = (speedup * (1.0 + (k + 1.0) / np.asarray(latency_ratio)) - 1.0) / k
        return np.where((alpha >= 0.0) & (alpha <= 1.0), alpha, np.nan)
    return alpha_for_expected_tokens(speedup * np.asarray(step_cost, dtype=np.float64), k)


def alpha_from_vllm_acceptance_rate(rate: ArrayLike, k: ArrayLike) -> FloatArray:
    """vLLM V1 "acceptance rate" = accepted / proposed draft tokens = (E − 1) / K under i.i.d.
    acceptance (measurements.md), so E = 1 + rate · K, then α from E."""
    k = np.asarray(k, dtype=np.float64)
    return alpha_for_expected_tokens(1.0 + np.asarray(rate, dtype=np.float64) * k, k)


def alpha_from_system_efficiency(efficiency: ArrayLike, k: ArrayLike) -> FloatArray:
    """vLLM V0 "system efficiency" = emitted tokens / (steps · (K+1)) = E / (K+1)."""
    k = np.asarray(k, dtype=np.float64)
    return alpha_for_expected_tokens(np.asarray(efficiency, dtype=np.float64) * (k + 1.0), k)


def acceptance_metrics(alpha: ArrayLike, k: ArrayLike) -> dict[str, FloatArray]:
    """What each engine would report for acceptance rate α at K (i.i.d. acceptance)."""
    k = np.asarray(k, dtype=np.float64)
    e = expected_tokens(alpha, k)
    return {
        "mean_accepted_tokens": e,  # vLLM V1 mean acceptance length, Spec-Bench/EAGLE τ
        "vllm_acceptance_rate": (e - 1.0) / k,
        "system_efficiency": e / (k + 1.0),  # vLLM V0
    }
