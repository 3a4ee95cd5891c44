"""Array types of the core. Every formula takes numpy arrays (a scalar is a 0-d array), so one
cell of `infersize spec` and a sweep chunk of millions of cells run the same code."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]
Num = float | FloatArray  # one value, or one per stacked setting (see deployment.stack)


def floats(values: ArrayLike) -> FloatArray:
    return np.asarray(values, dtype=np.float64)
