"""The mean-field model of a replica under a steady load: fast (a fixed point of a few scalars),
used to bracket the simulator's capacity search and to screen sweeps. Its means are the model;
its percentiles a stated approximation (docs/capacity.md gives its measured gap to the simulator).

At arrival rate λ with mean prompt I and answer O tokens, a request decodes for S̄ steps (O − 1
tokens at μ a step). With n sequences decoding, a step without prompts takes t_d(n) and each
prompt it carries adds Δ(n) (the step model at n decodes plus I prefill tokens, less t_d). In
steady state a step of mean length t carries the λ t prompts that arrived during the one before,
and a decoding request shares its steps with the n others a random arrival finds (PASTA):

  t = t_d(n + 1) + λ t Δ(n + 1),   n = λ S̄ t   (Little's law over the decoding requests)

a fixed point found by iteration. There is none, and the replica cannot keep up, when n passes
max_num_seqs, the KV pool or the step's token budget.

  TTFT = E[t²] / 2t (the rest of the step running at arrival: the renewal residual) + t_d +
         Δ (1 + λ t) (its prompt's step, shared with the λ t others that arrived beside it),
         and t (1 − e^−n) more where the scheduler runs a step ahead (the step it chose before
         the arrival, when one runs);
         TTFT_p: a wait of p · t and the others at their Poisson quantile
  TPOT = (S t_d + N Δ) / (O − 1): S the request's steps (a renewal count, var S = (O − 1) σ² /
         μ³ for steps emitting μ tokens with variance σ²), N ~ Poisson(λ S̄ t) the prompts
         arriving while it decodes; its percentiles at the normal quantile of that sum
  ITL  = t_d, or t_d + Δ in the share λ t of steps that carry a prompt
"""

from __future__ import annotations

import math
from functools import cached_property
from types import ModuleType

import numpy as np

from infersize.core.arrays import FloatArray, floats
from infersize.core.serving.metrics import Latencies, Stats
from infersize.core.serving.replica import Replica, layout_floats
from infersize.core.serving.step_math import sequence_kv
from infersize.core.serving.traffic import emission_probabilities
from infersize.record import record

QUANTILES = {"mean": None, "p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99}
# the standard normal's quantiles at those probabilities (Φ⁻¹; statistics.NormalDist().inv_cdf
# gives the same digits, tested), kept as numbers: importing `statistics` costs start-up time
NORMAL_QUANTILE = {
    0.50: 0.0,
    0.90: 1.2815515655446004,
    0.95: 1.6448536269514722,
    0.99: 2.3263478740408408,
}


@record
class MeanField(Latencies):
    rate: float  # requests per second offered
    sustained: bool  # False: the replica cannot keep up (no fixed point within its limits)
    step_s: float
    decoding: float  # mean decoding sequences
    limit: str  # what bounds the replica at this rate ("" when it keeps up)


@record
class Lengths:
    """Mean lengths, and the per-step emission the drafts give."""

    input_tokens: float
    output_tokens: float
    rates: tuple[float, ...]  # r_1..r_K (empty: one token a step)

    @cached_property
    def tokens_per_step(self) -> tuple[float, float]:
        """μ and σ² of the tokens one step emits."""
        p = emission_probabilities(self.rates)
        tokens = np.arange(1, p.size + 1)
        mean = float(np.dot(tokens, p))
        return mean, float(np.dot((tokens - mean) ** 2, p))


def _compiled() -> ModuleType:
    """The compiled fixed point: numba loads (half a second) on first use, which a sweep
    without capacity axes never makes."""
    from infersize.core.serving import meanfield_steps

    return meanfield_steps


@record(kw_only=False)
class _Model:
    """What the fixed point reads of a replica and a workload, as plain floats."""

    replica: Replica
    lengths: Lengths
    context: float  # a decoding sequence's mean context: its prompt and half its answer
    seq_kv: tuple[float, float]  # (target, drafter) KV bytes of one such sequence
    prompt_kv: tuple[float, float]  # and of one prompt
    pool_kv: float  # what one such sequence holds of the pool, with its K draft slots

    @classmethod
    def of(cls, replica: Replica, lengths: Lengths) -> _Model:
        context = lengths.input_tokens + lengths.output_tokens / 2.0
        layouts = [layout_floats(replica.target_kv), layout_floats(replica.draft_kv)]
        return cls(
            replica=replica,
            lengths=lengths,
            context=context,
            seq_kv=(sequence_kv(layouts[0], context), sequence_kv(layouts[1], context)),
            prompt_kv=(
                sequence_kv(layouts[0], lengths.input_tokens),
                sequence_kv(layouts[1], lengths.input_tokens),
            ),
            pool_kv=sequence_kv(layout_floats(replica.pool_kv), context + replica.lookahead),
        )

    @cached_property
    def numbers(self) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        """The step table's arrays and the model's numbers, as the compiled fixed point reads
        them (core/serving/meanfield_steps.py)."""
        m = floats(
            [
                self.replica.step_tokens,
                self.lengths.input_tokens,
                self.context,
                self.seq_kv[0],
                self.seq_kv[1],
                self.prompt_kv[0],
                self.prompt_kv[1],
            ]
        )
        return (*self.replica.table.arrays, m)

    def step(self, decoding: float, prefill: float) -> float:
        """The step model with `decoding` sequences at the mean context and `prefill` prompt
        tokens (prefill / I prompts reading their own KV), between whole sequence counts."""
        return float(_compiled().model_step(*self.numbers, decoding, prefill))

    def step_around(self, others: float, prefill: float) -> float:
        """The step a decoding request sees amid the others decoding (meanfield_steps.py)."""
        return float(_compiled().step_around(*self.numbers, others, prefill))


# the last few models built, by replica (identity: a replica's arrays have no value hash; the
# model holds it, so its id is its own while cached) and lengths: a bisection over rates or a
# break-even ladder asks the same replica and lengths dozens of times
_MODELS: dict[tuple[int, Lengths], _Model] = {}
MODELS_KEPT = 4


def model_of(replica: Replica, lengths: Lengths) -> _Model:
    """_Model.of(replica, lengths), built once for repeated asks."""
    key = (id(replica), lengths)
    model = _MODELS.get(key)
    if model is None or model.replica is not replica:
        if len(_MODELS) >= MODELS_KEPT:
            _MODELS.clear()
        model = _MODELS[key] = _Model.of(replica, lengths)
    return model


def _longest_step(model: _Model, rate: float, steps: float) -> tuple[float, str]:
    """The longest mean step within the replica's limits at `rate`, and the limit that sets it:
    n = λ S̄ t sequences decode, λ I t prompt tokens arrive a step, and each sequence holds its
    prompt, half its answer and K draft slots of KV."""
    replica, lengths = model.replica, model.lengths
    tokens, per_seq = replica.step_tokens, model.pool_kv
    bounds = {
        f"max_num_seqs ({replica.max_num_seqs})": replica.max_num_seqs / (rate * steps),
        f"the step's token budget ({replica.max_num_batched_tokens})": (
            replica.max_num_batched_tokens / (rate * (steps * tokens + lengths.input_tokens))
        ),
        "the KV pool": replica.kv_capacity_bytes / (max(per_seq, 1e-9) * rate * steps),
    }
    limit = min(bounds, key=lambda name: bounds[name])
    return bounds[limit], limit


def _mean_step(model: _Model, rate: float, steps: float, t: float) -> float:
    """f(t) = t_d(n) + λ t Δ(n) at n = λ S̄ t: the mean step the load makes of a step t."""
    return float(_compiled().mean_step(*model.numbers, rate, steps, t))


def _fixed_point(model: _Model, rate: float, steps: float) -> tuple[float, str]:
    """t = f(t) (f rises with t), bracketed by 0 and the longest step the limits allow; (t, '')
    or, when f(longest) > longest, no fixed point within the limits: (longest, the limit)."""
    high, limit = _longest_step(model, rate, steps)
    t, within = _compiled().fixed_point(*model.numbers, rate, steps, high)
    return (float(t), "") if within else (high, limit)


def mean_field(replica: Replica, lengths: Lengths, rate: float) -> MeanField:
    mu, var = lengths.tokens_per_step
    decode_tokens = max(lengths.output_tokens - 1.0, 0.0)
    steps = max(decode_tokens / mu, 1e-9)
    model = model_of(replica, lengths)
    t, limit = _fixed_point(model, rate, steps)
    if limit:
        return _unsustained(rate, t, rate * steps * t, limit)
    n = rate * steps * t
    t_d = model.step_around(n, 0.0)
    delta = model.step_around(n, lengths.input_tokens) - t_d
    others = rate * t  # prompts sharing a prompt's step
    # an arrival lands in a step with a chance that grows with the step's length, so its mean
    # wait is E[t²] / (2 E[t]) (the renewal residual) over steps of t_d and t_d + Δ
    share = min(others, 1.0)
    residual = ((1.0 - share) * t_d**2 + share * (t_d + delta) ** 2) / (2.0 * t)
    spread_steps = decode_tokens * var / mu**3
    # a scheduler one step ahead had chosen the next step before the arrival: it waits it out
    # when the replica is busy, which it is unless none of the n decoding requests (Poisson in
    # number, as in an M/G/∞ queue) is there: with probability 1 − e^−n
    ahead = t * (1.0 - math.exp(-n)) if replica.schedules_ahead else 0.0
    ttft: dict[str, float] = {}
    tpot: dict[str, float] = {}
    itl: dict[str, float] = {}
    e2e: dict[str, float] = {}
    for name, q in QUANTILES.items():
        z = 0.0 if q is None else NORMAL_QUANTILE[q]
        wait = residual if q is None else q * t
        ttft[name] = ahead + wait + t_d + delta * (1.0 + max(others + z * math.sqrt(others), 0.0))
        if decode_tokens:
            mean = steps * t_d + rate * steps * t * delta
            sd = math.sqrt(t_d**2 * spread_steps + delta**2 * rate * steps * t)
            tpot[name] = max(mean + z * sd, 0.0) / decode_tokens
        else:
            tpot[name] = 0.0
        itl[name] = t if q is None else t_d + (delta if q > 1.0 - min(others, 1.0) else 0.0)
        e2e[name] = ttft["mean"] + decode_tokens * tpot[name]
    return MeanField(
        rate=rate,
        sustained=True,
        step_s=t,
        decoding=n,
        ttft_s=Stats(**ttft),
        tpot_s=Stats(**tpot),
        itl_s=Stats(**itl),
        e2e_s=Stats(**e2e),
        limit="",
    )


def _unsustained(rate: float, step_s: float, decoding: float, limit: str) -> MeanField:
    inf = Stats(**dict.fromkeys(QUANTILES, math.inf))
    return MeanField(
        rate=rate,
        sustained=False,
        step_s=step_s,
        decoding=decoding,
        ttft_s=inf,
        tpot_s=inf,
        itl_s=inf,
        e2e_s=inf,
        limit=limit,
    )


def sustained_rate(replica: Replica, lengths: Lengths) -> float:
    """The highest rate with a fixed point within the replica's limits (bisection, 0.1 %):
    one evaluation of f at the longest step allowed decides each rate."""
    mu, _ = lengths.tokens_per_step
    steps = max((lengths.output_tokens - 1.0) / mu, 1e-9)
    model = model_of(replica, lengths)
    alone = model.step(1.0, 0.0)  # no step is shorter: a first bound on λ
    low, high = 0.0, replica.max_num_seqs / (steps * alone)

    def keeps_up(rate: float) -> bool:
        longest, _ = _longest_step(model, rate, steps)
        return _mean_step(model, rate, steps, longest) <= longest

    while high - low > 1e-3 * high:
        middle = (low + high) / 2.0
        low, high = (middle, high) if keeps_up(middle) else (low, middle)
    return low
