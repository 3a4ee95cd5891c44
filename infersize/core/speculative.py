"""Speculative decoding maths, vectorised over numpy arrays.

Symbols are Leviathan, Kalman & Matias, "Fast Inference from Transformers via Speculative
Decoding", ICML 2023 (arXiv 2211.17192): α the acceptance rate of one draft token, γ there the
number of draft tokens per step (we call it K, as vLLM's num_speculative_tokens does) and c the
cost of a draft step relative to a target step. We call the latency ratio γ = 1/c.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from infersize.core.arrays import FloatArray, IntArray, floats


def expected_tokens(alpha: ArrayLike, k: ArrayLike) -> FloatArray:
    """E = (1 − α^(K+1)) / (1 − α), tokens emitted per target pass (Leviathan eq. 1); K+1 at α=1."""
    a, n = floats(alpha), floats(k)
    one = a >= 1.0
    miss = np.where(one, 0.5, 1.0 - a)  # 1 − α, exact for α ≥ 0.5
    # 1 − α^(K+1) as −expm1((K+1)·log1p(−(1 − α))): no cancellation as α → 1, where the
    # plain quotient loses every digit (the break-even α of a cheap step sits there)
    with np.errstate(divide="ignore"):  # α = 0: log1p(−1) = −inf, and E = 1
        rest = -np.expm1((n + 1.0) * np.log1p(-miss))
    return floats(np.where(one, n + 1.0, rest / miss))


def leviathan_step_cost(k: ArrayLike, latency_ratio: ArrayLike) -> FloatArray:
    """Theorem 3.8's cost of one speculative step in target steps: 1 + cK, c = 1/γ (K draft
    steps, and verifying K+1 tokens priced as one target step)."""
    return floats(1.0 + floats(k) / floats(latency_ratio))


def roofline_step_cost(
    k: ArrayLike, t_target: ArrayLike, t_draft: ArrayLike, t_verify: ArrayLike
) -> FloatArray:
    """(K · T_draft(B,1) + T_target(B,K+1)) / T_target(B,1) (MagicDec, arXiv 2408.11049, general
    step model): the verification pass priced by the step-time model. It is Leviathan's 1 + cK
    when verifying K+1 tokens costs one target step."""
    return floats((floats(k) * floats(t_draft) + floats(t_verify)) / floats(t_target))


def linear_tokens(alpha: ArrayLike, k: ArrayLike) -> FloatArray:
    """The linear formula's tokens per step, 1 + αK: it counts αK accepted tokens where the
    expectation is E − 1 (the formula printed in the seed example)."""
    return floats(1.0 + floats(alpha) * floats(k))


def linear_step_cost(k: ArrayLike, latency_ratio: ArrayLike) -> FloatArray:
    """The linear formula's step cost 1 + (K+1)/γ: one draft step more than are run."""
    return floats(1.0 + (floats(k) + 1.0) / floats(latency_ratio))


def speedup_leviathan(alpha: ArrayLike, k: ArrayLike, latency_ratio: ArrayLike) -> FloatArray:
    """Theorem 3.8: S = (1 − α^(K+1)) / ((1 − α)(1 + cK)), c = 1/latency_ratio."""
    return floats(expected_tokens(alpha, k) / leviathan_step_cost(k, latency_ratio))


def speedup_linear(alpha: ArrayLike, k: ArrayLike, latency_ratio: ArrayLike) -> FloatArray:
    """The linear formula S = (1 + αK) / (1 + (K+1)/γ), as printed in the seed example. Not
    Leviathan's result; kept so that example's numbers can be reproduced."""
    return floats(linear_tokens(alpha, k) / linear_step_cost(k, latency_ratio))


def speedup_roofline(
    alpha: ArrayLike,
    k: ArrayLike,
    t_target: ArrayLike,
    t_draft: ArrayLike,
    t_verify: ArrayLike,
) -> FloatArray:
    """S = E · T_target(B,1) / (K · T_draft(B,1) + T_target(B,K+1))."""
    return floats(expected_tokens(alpha, k) / roofline_step_cost(k, t_target, t_draft, t_verify))


def lambert_wm1_of_log(log_minus_z: ArrayLike, iterations: int = 40) -> FloatArray:
    """Lower branch W₋₁(z) for z ∈ [−1/e, 0), given t = ln(−z) ≤ −1 (log form: α^(1/c) underflows).

    W₋₁ solves w·e^w = z with w ≤ −1, i.e. w + ln(−w) = t. Newton on g(w) = w + ln(−w) − t,
    g' = 1 + 1/w, from the branch-point series w ≈ −1 − √(−2(1+t)) near t = −1 and the asymptote
    w ≈ t − ln(−t) elsewhere. Checked against scipy.special.lambertw(z, −1) in the tests; kept in
    numpy so `infersize spec` does not pay scipy's import time."""
    t = np.minimum(floats(log_minus_z), -1.0)
    near_branch = t > -2.0
    w = np.where(near_branch, -1.0 - np.sqrt(np.maximum(-2.0 * (1.0 + t), 0.0)), t - np.log(-t))
    for _ in range(iterations):
        w = np.minimum(w, -1.0 - 1e-12)
        w = w - (w + np.log(-w) - t) / (1.0 + 1.0 / w)
    return floats(np.where(t >= -1.0, -1.0, np.minimum(w, -1.0)))


def optimal_k_leviathan(
    alpha: ArrayLike, latency_ratio: ArrayLike, k_max: ArrayLike = 16, k_min: ArrayLike = 1
) -> IntArray:
    """Integer K in [k_min, k_max] maximising Theorem 3.8's speedup, in closed form.

    Continuous optimum from dS/dK = 0: K* = (1 + W₋₁(z)) / ln α − 1/c, z = −α^((1−c)/c) / e
    (docs/reference/measurements.md, "Optimal K under Theorem 3.8"); S is unimodal in K,
    so the integer optimum is floor(K*) or ceil(K*), whichever gives the larger S. The
    evaluation pipeline searches the K axis it has already computed; this closed form marks the
    optimum on `plot k` and is tested equal to that search."""
    a, gamma = floats(alpha), floats(latency_ratio)
    high_k = floats(k_max)
    low_k = np.minimum(floats(k_min), high_k)
    c = 1.0 / gamma
    interior = (a > 0.0) & (a < 1.0) & (c < 1.0)
    a_in = np.where(interior, a, 0.5)
    c_in = np.where(interior, c, 0.5)
    log_alpha = np.log(a_in)
    t = (1.0 - c_in) / c_in * log_alpha - 1.0  # ln(−z)
    k_star = (1.0 + lambert_wm1_of_log(t)) / log_alpha - 1.0 / c_in
    # α = 1 (every token accepted): S grows with K; α = 0 or c ≥ 1: K = 1 is best.
    k_star = np.where(interior, k_star, np.where(a >= 1.0, high_k, 1.0))
    low = np.clip(np.floor(k_star), low_k, high_k)
    high = np.clip(np.ceil(k_star), low_k, high_k)
    better_high = speedup_leviathan(a, high, gamma) > speedup_leviathan(a, low, gamma)
    return np.where(better_high, high, low).astype(np.int64)


def bisect_increasing(
    f: Callable[[FloatArray], FloatArray], target: ArrayLike, iterations: int = 60
) -> FloatArray:
    """x ∈ [0, 1] with f(x) = target for f non-decreasing on [0, 1], vectorised bisection.
    NaN where target is outside [f(0), f(1)] (no root)."""
    goal = floats(target)
    lo = np.zeros_like(goal)
    hi = np.ones_like(goal)
    no_root = (f(lo) > goal) | (f(hi) < goal)
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        below = f(mid) < goal
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return floats(np.where(no_root, np.nan, 0.5 * (lo + hi)))


def alpha_for_expected_tokens(expected: ArrayLike, k: ArrayLike) -> FloatArray:
    """α such that E(α, K) = expected; E rises from 1 (α=0) to K+1 (α=1). NaN outside."""
    n = floats(k)
    return bisect_increasing(lambda a: expected_tokens(a, n), expected)


def alpha_from_vllm_acceptance_rate(rate: ArrayLike, k: ArrayLike) -> FloatArray:
    """vLLM V1 "acceptance rate" = accepted / proposed draft tokens = (E − 1) / K under i.i.d.
    acceptance, so E = 1 + rate · K, then α from E."""
    n = floats(k)
    return alpha_for_expected_tokens(1.0 + floats(rate) * n, n)


def alpha_from_system_efficiency(efficiency: ArrayLike, k: ArrayLike) -> FloatArray:
    """vLLM V0 "system efficiency" = emitted tokens / (steps · (K+1)) = E / (K+1)."""
    n = floats(k)
    return alpha_for_expected_tokens(floats(efficiency) * (n + 1.0), n)


def acceptance_metrics(alpha: ArrayLike, k: ArrayLike) -> dict[str, FloatArray]:
    """What each engine would report for acceptance rate α at K (i.i.d. acceptance)."""
    n = floats(k)
    e = expected_tokens(alpha, n)
    return {
        "mean_accepted_tokens": e,  # vLLM V1 mean acceptance length, Spec-Bench/EAGLE τ
        "vllm_acceptance_rate": floats((e - 1.0) / n),
        "system_efficiency": floats(e / (n + 1.0)),  # vLLM V0
    }
