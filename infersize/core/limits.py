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
from infersize.core.evaluate import Grid, expected_over_k
from infersize.core.fit import deployment_memory
from infersize.core.speed import deployment_speed
from infersize.core.speedup import SpeedupModel
from infersize.core.tree import CHAIN, Tree

BATCH_LADDER = 2.0 ** np.arange(12)  # 1, 2, 4, ..., 2048


def crossover_batch(
    dep: DeploymentNumbers,
    engine: Engine,
    model: SpeedupModel,
    context: ArrayLike,
    alpha: ArrayLike,
    k: ArrayLike,
    latency_ratio: ArrayLike | None = None,
    rates: ArrayLike | None = None,
    tree: Tree = CHAIN,
) -> FloatArray:
    """Smallest batch (1, 2, 4, ... 2048) at which the speedup at this α (or per-position
    profile `rates`) and K, by `model`, drops below 1: verification turns compute-bound and
    speculation stops paying. NaN if it never does within 2048. The speed of `evaluate` over
    the batch ladder (a new last axis), priced at each row's own K only (memory plays no part);
    broadcasts over the inputs."""
    draft_k = np.asarray(k, dtype=np.int64)
    on_k = with_trailing_axis(with_trailing_axis(dep))  # settings, batch ladder, K
    if on_k.draft is None:  # the target alone: a speedup of 1 at every batch
        return np.full(draft_k.shape, np.nan)
    grid = Grid(
        context=floats(context)[..., None],
        batch=BATCH_LADDER,
        alpha=floats(alpha)[..., None],
        ks=np.arange(1, int(draft_k.max()) + 1),
        rates=None if rates is None else floats(rates)[..., None, :],
        tree=tree,
    )
    row_k = draft_k[..., None, None]  # (rows, ladder, K) with one K per row
    expected = expected_over_k(grid, np.asarray(grid.ks))
    if expected is not None:  # E at each row's K, from the profile's or the tree's E over K
        expected = np.take_along_axis(
            np.broadcast_to(expected, np.broadcast_shapes(expected.shape, row_k.shape)),
            np.broadcast_to(row_k - 1, (*draft_k.shape, 1, 1)),
            axis=-1,
        )
    speedup = deployment_speed(
        on_k.target,
        on_k.draft,
        engine,
        model,
        floats(grid.context)[..., None],
        BATCH_LADDER[:, None],
        floats(grid.alpha)[..., None],
        floats(row_k),
        None if latency_ratio is None else floats(latency_ratio)[..., None, None],
        expected,
        tree,
    ).speedup[..., 0]
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
    dep: DeploymentNumbers,
    engine: Engine,
    batch: int,
    k: int,
    high: int,
    headroom: float = 0.0,
    tree: Tree = CHAIN,
) -> int | None:
    """Longest context (tokens per sequence, at most `high`) that fits at this batch and K."""

    def fits(context: int) -> bool:
        return bool(deployment_memory(dep, engine, context, batch, k, headroom, tree).fits)

    return largest_fitting(fits, 1, high)


def max_fitting_batch(
    dep: DeploymentNumbers,
    engine: Engine,
    context: int,
    k: int,
    high: int,
    headroom: float = 0.0,
    tree: Tree = CHAIN,
) -> int | None:
    """Largest batch (concurrent sequences, at most `high`) that fits at this context and K."""

    def fits(batch: int) -> bool:
        return bool(deployment_memory(dep, engine, context, batch, k, headroom, tree).fits)

    return largest_fitting(fits, 1, high)
