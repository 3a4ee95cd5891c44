"""The mean-field model's fixed point, compiled (numba): the step a load makes of itself,
t = f(t), solved by false position (core/serving/meanfield.py says what each term is). The
functions take a step table's arrays (StepTable.arrays) and the model's numbers, `m`:

  m = (tokens a decoding sequence takes of the budget, mean prompt I, a decoding sequence's mean
       context, its KV bytes (target, drafter), a prompt's KV bytes (target, drafter))

Every float is the one the same formula gives in plain Python, in the same order.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from infersize.core.serving.kernel_cache import refresh_once
from infersize.core.serving.kernel_requests import round_half_even
from infersize.core.serving.kernel_steps import step_seconds

PER_SEQ, INPUT, CONTEXT, SEQ_KV_T, SEQ_KV_D, PROMPT_KV_T, PROMPT_KV_D = range(7)
ITERATIONS = 200


refresh_once()  # numba keeps callees inside cached callers (kernel_cache.py)


@njit(cache=True)
def model_step(
    bt: np.ndarray, bd: np.ndarray, p: np.ndarray, m: np.ndarray, decoding: float, prefill: float
) -> float:
    """The step model with `decoding` sequences at the mean context and `prefill` prompt
    tokens (prefill / I prompts reading their own KV), between whole sequence counts."""
    per_seq = int(m[PER_SEQ])
    prompts = prefill / max(m[INPUT], 1.0)
    attended = prefill * (m[INPUT] + 1.0) / 2.0
    low = math.floor(decoding)
    seconds = np.empty(2)
    for j in range(2):
        seqs = low + j
        room = bt.shape[0] - 1 - seqs * per_seq
        seconds[j] = step_seconds(
            bt,
            bd,
            p,
            seqs,
            max(min(round_half_even(prefill), room), 0),
            seqs * m[CONTEXT],
            attended,
            seqs * m[SEQ_KV_T] + prompts * m[PROMPT_KV_T],
            seqs * m[SEQ_KV_D] + prompts * m[PROMPT_KV_D],
        )
    share = decoding - low
    return float(seconds[0] * (1.0 - share) + seconds[1] * share)


@njit(cache=True)
def step_around(
    bt: np.ndarray, bd: np.ndarray, p: np.ndarray, m: np.ndarray, others: float, prefill: float
) -> float:
    """The step a decoding request sees: itself and the others decoding, whose count varies
    about its mean like a Poisson count; its mean over that spread (a three-point rule: the
    step is concave in the batch for MoE models, which read more experts as it grows)."""
    spread = math.sqrt(3.0 * others)
    low, high = max(others - spread, 0.0), others + spread
    return (
        model_step(bt, bd, p, m, 1.0 + low, prefill)
        + 4.0 * model_step(bt, bd, p, m, 1.0 + others, prefill)
        + model_step(bt, bd, p, m, 1.0 + high, prefill)
    ) / 6.0


@njit(cache=True)
def mean_step(
    bt: np.ndarray,
    bd: np.ndarray,
    p: np.ndarray,
    m: np.ndarray,
    rate: float,
    steps: float,
    t: float,
) -> float:
    """f(t) = t_d(n) + λ t Δ(n) at n = λ S̄ t: the mean step the load makes of a step t."""
    n = rate * steps * t
    t_d = step_around(bt, bd, p, m, n, 0.0)
    return t_d + rate * t * (step_around(bt, bd, p, m, n, m[INPUT]) - t_d)


@njit(cache=True)
def fixed_point(
    bt: np.ndarray,
    bd: np.ndarray,
    p: np.ndarray,
    m: np.ndarray,
    rate: float,
    steps: float,
    high: float,
) -> tuple[float, bool]:
    """t = f(t) (f rises with t), bracketed by 0 and `high`, the longest step the limits
    allow: (t, True), or (high, False) when f(high) > high (no fixed point within them)."""
    g_high = mean_step(bt, bd, p, m, rate, steps, high) - high
    if g_high > 0:
        return high, False
    low = 0.0
    g_low = mean_step(bt, bd, p, m, rate, steps, low) - low
    side = 0
    for _ in range(ITERATIONS):  # false position, Illinois variant
        t = (low * g_high - high * g_low) / (g_high - g_low)
        g = mean_step(bt, bd, p, m, rate, steps, t) - t
        if abs(g) <= 1e-9 * t or high - low <= 1e-12:
            return t, True
        if g > 0:
            low, g_low = t, g
            if side == 1:
                g_high = g_high / 2.0
            side = 1
        else:
            high, g_high = t, g
            if side == -1:
                g_low = g_low / 2.0
            side = -1
    return (low + high) / 2.0, True
