"""Step times and the speedup of a deployment over arrays of context, batch, α and K."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from infersize.core.arrays import FloatArray, floats
from infersize.core.deployment import SideNumbers
from infersize.core.engines import Engine
from infersize.core.latency import step_time_s
from infersize.core.speculative import expected_tokens
from infersize.core.speedup import SpeedupModel, StepTimes


@dataclass(frozen=True)
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
) -> StepTimes:
    """T_target(B,1), T_draft(B,1) and T_target(B,K+1); a given γ replaces the modelled draft
    step, for every speedup model."""
    n_k = floats(k)
    t_target = step_time_s(target.cost, engine, batch, 1, context)
    t_verify = step_time_s(target.cost, engine, batch, n_k + 1, context)
    if latency_ratio is None:
        # one draft pass; Medusa's one pass proposes all K tokens, so each costs 1/K of it;
        # n-gram lookup runs on the CPU (γ infinite)
        t_pass = step_time_s(draft.cost, engine, batch, 1, context) * floats(draft.gpu_time)
        t_draft = floats(np.where(floats(draft.parallel_draft) > 0, t_pass / n_k, t_pass))
        with np.errstate(divide="ignore"):
            gamma = floats(t_target / t_draft)
    else:
        gamma = floats(latency_ratio)
        t_draft = floats(t_target / gamma)
    return StepTimes(t_target, t_draft, t_verify, gamma)


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
) -> Speed:
    """`expected`: E over the K axis from a per-position acceptance profile, which replaces
    Leviathan's i.i.d. E(α, K) (the model must read α only through E)."""
    n_k = floats(k)
    times = step_times(target, draft, engine, context, batch, n_k, latency_ratio)
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
    t_target = step_time_s(target.cost, engine, batch, 1, context)
    nan = np.full_like(t_target, np.nan)
    ones = np.ones_like(t_target)
    return Speed(StepTimes(t_target, nan, t_target, nan), ones, ones, ones)
