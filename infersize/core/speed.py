"""Step times and the speedup of a deployment over arrays of context, batch, α and K."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from infersize.core.arrays import FloatArray, floats
from infersize.core.deployment import SideNumbers
from infersize.core.engines import Engine
from infersize.core.serving.step import decode_batch, engine_step_seconds
from infersize.core.speculative import expected_tokens
from infersize.core.speedup import SpeedupModel, StepTimes
from infersize.core.tree import CHAIN, Tree
from infersize.record import record


@record(kw_only=False)
class Speed:
    times: StepTimes
    expected_tokens: FloatArray  # E: tokens emitted per verification step
    speedup: FloatArray
    step_cost: FloatArray  # speculative step time / target decode step

    @property
    def latency_ratio(self) -> FloatArray:
        return self.times.latency_ratio


def step_times(
    target: SideNumbers,
    draft: SideNumbers,
    engine: Engine,
    context: ArrayLike,
    batch: ArrayLike,
    k: ArrayLike,
    latency_ratio: ArrayLike | None = None,
    tree: Tree = CHAIN,
) -> StepTimes:
    """T_target(B,1), T_draft(B,1) and T_target(B,K+1), read from the engine step
    (core/serving/step.py) of plain decoding and of speculation at K: T_draft is its drafting
    time per draft token (Medusa's one pass shared by its K tokens; n-gram lookup runs on the CPU, γ
    infinite). A given γ replaces the modelled draft step, for every speedup model. A tree
    verifies its n tokens in the T_target(B, K+1) pass and drafts k candidates a pass."""
    n_k = floats(k)
    plain = engine_step_seconds(target, None, engine, decode_batch(target, None, batch, context, 0))
    spec = engine_step_seconds(
        target, draft, engine, decode_batch(target, draft, batch, context, n_k, tree)
    )
    t_target, t_verify = plain.target, spec.target
    if latency_ratio is None:
        t_draft = floats(spec.draft / n_k)
        with np.errstate(divide="ignore"):
            gamma = floats(t_target / t_draft)
    else:
        gamma = floats(latency_ratio)
        t_draft = floats(t_target / gamma)
    return StepTimes(target=t_target, draft=t_draft, verify=t_verify, latency_ratio=gamma)


def deployment_speed(
    target: SideNumbers,
    draft: SideNumbers,
    engine: Engine,
    model: SpeedupModel,
    context: ArrayLike,
    batch: ArrayLike,
    alpha: ArrayLike,
    k: ArrayLike,
    latency_ratio: ArrayLike | None = None,
    expected: ArrayLike | None = None,
    tree: Tree = CHAIN,
) -> Speed:
    """`expected`: E over the K axis from a per-position acceptance profile or a draft tree,
    which replaces Leviathan's i.i.d. E(α, K) (the model must read α only through E)."""
    n_k = floats(k)
    times = step_times(target, draft, engine, context, batch, n_k, latency_ratio, tree)
    if expected is None:
        a = floats(alpha)
        e, speedup = expected_tokens(a, n_k), model.speedup(a, n_k, times)
    else:
        e = floats(expected)
        speedup = model.speedup_from_expected(e, n_k, times)
    return Speed(
        times=times, expected_tokens=e, speedup=speedup, step_cost=model.step_cost(n_k, times)
    )


def plain_speed(target: SideNumbers, engine: Engine, context: ArrayLike, batch: ArrayLike) -> Speed:
    """The target alone: one token per step, speedup 1."""
    t_target = engine_step_seconds(
        target, None, engine, decode_batch(target, None, batch, context, 0)
    ).target
    nan = np.full_like(t_target, np.nan)
    ones = np.ones_like(t_target)
    return Speed(
        times=StepTimes(target=t_target, draft=nan, verify=t_target, latency_ratio=nan),
        expected_tokens=ones,
        speedup=ones,
        step_cost=ones,
    )
