"""The requests a replica serves: when they arrive and how long they are, and how many
verification steps each needs to emit its answer. Seeded and vectorised (numpy), no I/O.

Arrivals follow `vllm bench serve` (vllm/benchmarks/serve.py, `get_request`): inter-arrival gaps
drawn from a gamma distribution of mean 1/rate and shape `burstiness` (shape 1 is Poisson; we take
its coefficient of variation, CV = 1/√shape), or constant gaps of 1/rate. Gaps are drawn once at
rate 1 and scaled by 1/rate, so every rate a search tries sees the same draws (common random
numbers: the answer moves with the rate, not with the noise).

With speculation a verification step emits 1 + the accepted prefix of K drafts: j + 1 tokens
with probability r_j − r_{j+1} (r_0 = 1, r_{K+1} = 0; r_i the share of drafts whose i-th token
is accepted, core/profile.py). A request's steps after its first token are the fewest whose
emitted tokens reach its remaining output (the last may carry more than needed; the engine stops
at max_tokens).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from infersize.core.arrays import FloatArray, IntArray, floats
from infersize.errors import ValueRangeError
from infersize.record import record

ARRIVALS = ("poisson", "constant", "gamma")
# gamma's coefficient of variation: below MIN_CV its shape 1/CV² passes 10^4 (the gaps are
# constant to four digits: say constant), above MAX_CV every arrival is one burst
MIN_CV, MAX_CV = 0.01, 100.0


@record(kw_only=False)
class Arrival:
    """An arrival process: poisson, constant, or gamma with coefficient of variation `cv`."""

    kind: str = "poisson"
    cv: float = 1.0

    @property
    def label(self) -> str:
        return f"gamma:{self.cv:g}" if self.kind == "gamma" else self.kind


def parse_arrival(text: str) -> Arrival:
    """'poisson', 'constant' or 'gamma:CV' (CV > 0; gamma:1 is Poisson)."""
    kind, _, value = text.strip().lower().partition(":")
    if kind not in ARRIVALS or (kind == "gamma") != bool(value):
        raise ValueRangeError(
            "arrival", f"must be poisson, constant or gamma:CV (e.g. gamma:2), got '{text}'"
        )
    if kind != "gamma":
        return Arrival(kind)
    try:
        cv = float(value)
    except ValueError:
        cv = float("nan")
    if not (np.isfinite(cv) and MIN_CV <= cv <= MAX_CV):
        raise ValueRangeError(
            "arrival",
            f"gamma's coefficient of variation must be in [{MIN_CV:g}, {MAX_CV:g}], got '{value}'",
        )
    return Arrival("gamma", cv)


def unit_gaps(rng: np.random.Generator, n: int, arrival: Arrival) -> FloatArray:
    """`n` inter-arrival gaps of mean 1 (the first request arrives after the first gap)."""
    if arrival.kind == "constant":
        return np.ones(n)
    if arrival.kind == "poisson":
        return floats(rng.exponential(1.0, n))
    shape = 1.0 / arrival.cv**2
    return floats(rng.gamma(shape, 1.0 / shape, n))


def replay(values: ArrayLike, n: int) -> IntArray:
    """`n` lengths from a trace, in its order, starting over when it runs out."""
    trace = np.asarray(values, dtype=np.int64)
    return trace[np.arange(n) % trace.size]


def emission_probabilities(rates: ArrayLike) -> FloatArray:
    """P(a step emits j + 1 tokens), j = 0..K, from r_1..r_K (cumulative acceptance)."""
    r = np.concatenate([[1.0], floats(rates), [0.0]])
    return floats(np.clip(r[:-1] - r[1:], 0.0, None))


def verify_steps(rng: np.random.Generator, tokens: ArrayLike, rates: ArrayLike) -> IntArray:
    """Steps each request needs to emit `tokens` more tokens (its output less the first), each
    step emitting 1 + the accepted prefix of K drafts; `rates` empty: one token a step."""
    needed = np.asarray(tokens, dtype=np.int64)
    probabilities = emission_probabilities(rates)
    if probabilities.size == 1 or needed.size == 0:
        return np.array(needed, dtype=np.int64)
    cdf = np.cumsum(probabilities)
    cdf[-1] = 1.0
    mean = float(np.dot(np.arange(1, cdf.size + 1), probabilities))
    steps = np.zeros_like(needed)
    emitted = np.zeros_like(needed)
    pending = np.flatnonzero(needed > 0)
    while pending.size:
        block = int(np.ceil((needed[pending] - emitted[pending]).max() / mean * 1.25)) + 8
        draws = 1 + np.searchsorted(cdf, rng.random((pending.size, block)), side="right")
        total = emitted[pending, None] + np.cumsum(draws, axis=1)
        reached = total >= needed[pending, None]
        done = reached.any(axis=1)
        first = np.argmax(reached, axis=1)
        steps[pending[done]] += first[done] + 1
        steps[pending[~done]] += block
        emitted[pending[~done]] = total[~done, -1]
        pending = pending[~done]
    return steps
