"""The speedup-maximising draft length K under the memory limit, vectorised.

Memory use rises with K (K lookahead KV slots per sequence, K+1 fp32 logit rows, K draft
distributions), so the feasible Ks of a consecutive range are a prefix k_min..k_cap. Within it:
`leviathan` takes the Lambert-W closed form (speculative.optimal_k_leviathan) capped at k_cap;
`roofline` and `linear` search the K axis (the last axis) with infeasible Ks masked out.
Used by `infersize spec` (one cell) and by every sweep chunk (whole arrays of settings).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from infersize.deployment import Memory, SideNumbers, Speed, deployment_memory, deployment_speed
from infersize.engines import Engine
from infersize.speculative import optimal_k_leviathan

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class KChoice:
    """Arrays over the inputs' broadcast shape (no K axis)."""

    k: NDArray[np.int64]  # best K; k_min where nothing fits (check `fits`)
    index: NDArray[np.int64]  # position of k on the K axis
    fits: NDArray[np.bool_]  # some K of the range fits in memory
    speedup: FloatArray  # at k
    speed: Speed  # over the K axis (..., K)
    memory: Memory  # over the K axis (..., K)


def best_k(
    target: SideNumbers,
    draft: SideNumbers,
    memory_bytes: ArrayLike,
    engine: Engine,
    context: ArrayLike,
    batch: ArrayLike,
    alpha: ArrayLike,
    ks: ArrayLike,
    speedup_model: str = "leviathan",
    latency_ratio: ArrayLike | None = None,
) -> KChoice:
    """`ks` is a consecutive 1-D range of K, placed on a new last axis of every input."""
    ks = np.asarray(ks, dtype=np.int64)
    k_axis = ks.astype(np.float64)
    ctx, bat = np.asarray(context)[..., None], np.asarray(batch)[..., None]
    a = np.asarray(alpha, dtype=np.float64)[..., None]
    gamma = None if latency_ratio is None else np.asarray(latency_ratio, np.float64)[..., None]
    memory = deployment_memory(target, draft, memory_bytes, engine, ctx, bat, k_axis)
    fits_k = memory.fits
    speed = deployment_speed(target, draft, engine, ctx, bat, a, k_axis, speedup_model, gamma)
    shape = np.broadcast_shapes(fits_k.shape, speed.speedup.shape)
    fits_k = np.broadcast_to(fits_k, shape)
    n_feasible = fits_k.sum(axis=-1)
    fits = n_feasible > 0
    if speedup_model == "leviathan":
        k_cap = ks[0] + np.maximum(n_feasible, 1) - 1
        gamma_k = np.broadcast_to(speed.latency_ratio, shape)[..., 0]
        k = optimal_k_leviathan(np.broadcast_to(a, shape)[..., 0], gamma_k, k_cap, ks[0])
        index = k - ks[0]
    else:
        masked = np.where(fits_k, np.broadcast_to(speed.speedup, shape), -np.inf)
        index = np.argmax(masked, axis=-1)
        k = ks[index]
    speedup = np.take_along_axis(np.broadcast_to(speed.speedup, shape), index[..., None], -1)
    return KChoice(k, index, fits, speedup[..., 0], speed, memory)
