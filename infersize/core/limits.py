"""Where a deployment stops paying or stops fitting: the crossover batch (speculation no longer
faster) and the largest batch that fits."""

from __future__ import annotations

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


def max_fitting_batch_on_ladder(
    dep: DeploymentNumbers, engine: Engine, context: float, k: int
) -> int | None:
    """Largest batch of the crossover ladder (1, 2, 4 ... 2048) that still fits at this K: the
    crossover ignores memory, so a planner needs both."""
    fits = deployment_memory(dep, engine, context, BATCH_LADDER, k).fits
    return int(BATCH_LADDER[fits].max()) if fits.any() else None
