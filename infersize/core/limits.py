"""Where a deployment stops paying or stops fitting: the crossover batch (speculation no longer
faster), and the longest context and largest batch that still fit (exact integers: memory never
falls as context or batch grow, so a bisection over the integers finds the last that fits)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from infersize.core.arrays import FloatArray, floats
from infersize.core.deployment import DeploymentNumbers, with_trailing_axis
from infersize.core.engines import Engine
from infersize.core.fit import deployment_memory
from infersize.core.speed import deployment_speed
from infersize.core.speedup import get_speedup_model

BATCH_LADDER = 2.0 ** np.arange(12)  # 1, 2, 4, ..., 2048


def crossover_batch(
    dep: DeploymentNumbers, engine: Engine, context: ArrayLike, alpha: ArrayLike, k: ArrayLike
) -> FloatArray:
    """Smallest batch (1, 2, 4, ... 2048) at which the roofline speedup at this α and K drops
    below 1: verification turns compute-bound and speculation stops paying. NaN if it never
    does within 2048. Broadcasts over the inputs; the batch ladder is a new last axis."""
    on_ladder = with_trailing_axis(dep)
    assert on_ladder.draft is not None
    speedup = deployment_speed(
        on_ladder.target,
        on_ladder.draft,
        engine,
        get_speedup_model("roofline"),
        floats(context)[..., None],
        BATCH_LADDER,
        floats(alpha)[..., None],
        floats(k)[..., None],
    ).speedup
    below = speedup < 1.0
    first = np.argmax(below, axis=-1)
    return floats(np.where(below.any(axis=-1), BATCH_LADDER[first], np.nan))


def largest_fitting(fits: Callable[[int], bool], low: int, high: int) -> int | None:
    """The largest n in [low, high] with fits(n), for `fits` true up to some n and false after
    it; None when not even `low` fits."""
    if not fits(low):
        return None
    if fits(high):
        return high
    good, bad = low, high
    while bad - good > 1:
        middle = (good + bad) // 2
        good, bad = (middle, bad) if fits(middle) else (good, middle)
    return good


def max_fitting_context(
    dep: DeploymentNumbers, engine: Engine, batch: int, k: int, high: int, headroom: float = 0.0
) -> int | None:
    """Longest context (tokens per sequence, at most `high`) that fits at this batch and K."""

    def fits(context: int) -> bool:
        return bool(deployment_memory(dep, engine, context, batch, k, headroom).fits)

    return largest_fitting(fits, 1, high)


def max_fitting_batch(
    dep: DeploymentNumbers, engine: Engine, context: int, k: int, high: int, headroom: float = 0.0
) -> int | None:
    """Largest batch (concurrent sequences, at most `high`) that fits at this context and K."""

    def fits(batch: int) -> bool:
        return bool(deployment_memory(dep, engine, context, batch, k, headroom).fits)

    return largest_fitting(fits, 1, high)
