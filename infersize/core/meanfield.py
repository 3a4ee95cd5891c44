"""The mean-field model of a replica under a steady load: fast (a fixed point of a few scalars),
used to bracket the simulator's capacity search and to screen sweeps. It has means only, and
percentiles from a stated approximation; docs/capacity.md gives its measured gap to the simulator.

At arrival rate λ with mean prompt I and answer O tokens, in steady state a step of t seconds
carries the prompts that arrived during it (λ · I · t prefill tokens) and n decoding sequences.
Little's law ties n to t: each request decodes for S̄ steps (O − 1 tokens at E a step), so
n = λ · S̄ · t. The step time is the step model's at (n, λ I t), so t is a fixed point of
t = step(λ S̄ t, λ I t), found by iteration. There is none, and the rate is beyond what the
replica sustains, when n passes max_num_seqs, the pool, or the step's token budget.

  TPOT = t · S̄ / (O − 1)      TTFT = t / 2 (the step running at arrival) + prefill steps · t
  percentiles: TTFT_p = (p + prefill steps) · t; TPOT from the spread of a request's steps
  (a renewal count: var S = (O − 1) · σ² / μ³ for steps emitting μ tokens on average with
  variance σ²), at the normal quantile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike

from infersize.core.arrays import floats
from infersize.core.memory import KvLayout, kv_cache_bytes
from infersize.core.simulate import Replica
from infersize.core.traffic import emission_probabilities

ITERATIONS = 200
QUANTILES = {"mean": None, "p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99}


@dataclass(frozen=True, kw_only=True)
class MeanField:
    rate: float  # requests per second offered
    sustained: bool  # False: the replica cannot keep up (no fixed point within its limits)
    step_s: float
    decoding: float  # mean decoding sequences
    ttft_s: dict[str, float]  # by statistic (mean, p50, ...)
    tpot_s: dict[str, float]
    itl_s: dict[str, float]
    e2e_s: dict[str, float]
    limit: str  # what bounds the replica at this rate ("" when it keeps up)


@dataclass(frozen=True, kw_only=True)
class Lengths:
    """Mean lengths, and the per-step emission the drafts give."""

    input_tokens: float
    output_tokens: float
    rates: tuple[float, ...]  # r_1..r_K (empty: one token a step)

    @property
    def tokens_per_step(self) -> tuple[float, float]:
        """μ and σ² of the tokens one step emits."""
        p = emission_probabilities(self.rates)
        tokens = np.arange(1, p.size + 1)
        mean = float(np.dot(tokens, p))
        return mean, float(np.dot((tokens - mean) ** 2, p))


def _kv(layout: KvLayout | None, context: float, seqs: float) -> float:
    return 0.0 if layout is None else float(kv_cache_bytes(layout, context, seqs))


def _step(replica: Replica, lengths: Lengths, decoding: float, prefill: float) -> float:
    """The step model with `decoding` sequences at the mean context and `prefill` prompt
    tokens (prefill / I prompts reading their own KV), between whole sequence counts."""
    table, k = replica.table, replica.table.draft_k
    context = lengths.input_tokens + lengths.output_tokens / 2.0
    prompts = prefill / max(lengths.input_tokens, 1.0)
    seconds = []
    for seqs in (math.floor(decoding), math.floor(decoding) + 1):
        room = len(table.target_by_tokens) - 1 - seqs * (1 + k)
        tokens = max(min(round(prefill), room), 0)
        seconds.append(
            table.seconds(
                seqs, tokens, seqs * context, prefill * (lengths.input_tokens + 1.0) / 2.0,
                _kv(replica.target_kv, context, seqs)
                + _kv(replica.target_kv, lengths.input_tokens, prompts),
                _kv(replica.draft_kv, context, seqs)
                + _kv(replica.draft_kv, lengths.input_tokens, prompts),
            )
        )  # fmt: skip
    share = decoding - math.floor(decoding)
    return seconds[0] * (1.0 - share) + seconds[1] * share


def mean_field(replica: Replica, lengths: Lengths, rate: float) -> MeanField:
    mu, var = lengths.tokens_per_step
    decode_tokens = max(lengths.output_tokens - 1.0, 0.0)
    steps = decode_tokens / mu
    t = _step(replica, lengths, 1.0, 0.0)
    for _ in range(ITERATIONS):
        n, prefill = rate * steps * t, rate * lengths.input_tokens * t
        limit = _limit(replica, lengths, n, prefill)
        if limit:
            return _unsustained(rate, t, n, limit)
        new = _step(replica, lengths, n, prefill)
        if abs(new - t) <= 1e-9 * t:
            t = new
            break
        t = new
    else:
        return _unsustained(rate, t, rate * steps * t, "the step time does not settle")
    n = rate * steps * t
    spare = max(replica.max_num_batched_tokens - n * (1 + replica.table.draft_k), 1.0)
    prefill_steps = math.ceil(lengths.input_tokens / spare)
    spread = math.sqrt(decode_tokens * var / mu**3) if decode_tokens else 0.0
    ttft, tpot, itl, e2e = {}, {}, {}, {}
    for name, q in QUANTILES.items():
        wait = 0.5 if q is None else q
        z = 0.0 if q is None else NormalDist().inv_cdf(q)
        ttft[name] = (wait + prefill_steps) * t
        tpot[name] = t * max(steps + z * spread, 0.0) / decode_tokens if decode_tokens else 0.0
        itl[name] = t
        e2e[name] = ttft[name] + decode_tokens * tpot[name]
    return MeanField(
        rate=rate, sustained=True, step_s=t, decoding=n, ttft_s=ttft, tpot_s=tpot, itl_s=itl,
        e2e_s=e2e, limit="",
    )  # fmt: skip


def _limit(replica: Replica, lengths: Lengths, decoding: float, prefill: float) -> str:
    """What the replica runs out of with `decoding` sequences and `prefill` tokens a step."""
    k = replica.table.draft_k
    if decoding > replica.max_num_seqs:
        return f"max_num_seqs ({replica.max_num_seqs})"
    if decoding * (1 + k) + prefill > replica.max_num_batched_tokens:
        return f"the step's token budget ({replica.max_num_batched_tokens})"
    per_seq = lengths.input_tokens + lengths.output_tokens / 2.0 + k
    if _kv(replica.pool_kv, per_seq, decoding) > replica.kv_capacity_bytes:
        return "the KV pool"
    return ""


def _unsustained(rate: float, step_s: float, decoding: float, limit: str) -> MeanField:
    inf = dict.fromkeys(QUANTILES, math.inf)
    return MeanField(
        rate=rate, sustained=False, step_s=step_s, decoding=decoding, ttft_s=inf, tpot_s=inf,
        itl_s=inf, e2e_s=inf, limit=limit,
    )  # fmt: skip


def sustained_rate(replica: Replica, lengths: Lengths, high: float = 1e5) -> float:
    """The highest rate the mean-field model keeps up with (bisection, 0.1 %)."""
    low = 0.0
    if not mean_field(replica, lengths, 1e-9).sustained:
        return 0.0
    while high - low > 1e-3 * high:
        middle = (low + high) / 2.0
        low, high = (
            (middle, high) if mean_field(replica, lengths, middle).sustained else (low, middle)
        )
    return low


def mean_lengths(
    input_tokens: ArrayLike, output_tokens: ArrayLike, rates: tuple[float, ...]
) -> Lengths:
    return Lengths(
        input_tokens=float(np.mean(floats(input_tokens))),
        output_tokens=float(np.mean(floats(output_tokens))),
        rates=rates,
    )
