"""The one ranking rule of every answer the tables give (best_pairs, `infersize best`, the run
summary, the report, every figure's ★): most speculative tokens/s per GPU (what each GPU of the
deployment delivers, so TP sizes and precisions compare), then the higher speedup, then the
less memory."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from infersize.core.arrays import FloatArray, IntArray

# the columns the rule reads, most significant first
RANKED_BY = ("speculative_tokens_per_s_per_gpu", "speedup", "combined_gib")


def ranking_keys(
    tokens_per_s_per_gpu: ArrayLike, speedup: ArrayLike, combined_gib: ArrayLike
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Sort keys, most significant first, each ascending from the best row."""
    return (
        -np.asarray(tokens_per_s_per_gpu, dtype=np.float64),
        -np.asarray(speedup, dtype=np.float64),
        np.asarray(combined_gib, dtype=np.float64),
    )


def ranking_order(
    tokens_per_s_per_gpu: ArrayLike, speedup: ArrayLike, combined_gib: ArrayLike
) -> IntArray:
    """Row indices, best first (ties keep their order)."""
    keys = ranking_keys(tokens_per_s_per_gpu, speedup, combined_gib)
    return np.lexsort(tuple(reversed(keys))).astype(np.int64)
