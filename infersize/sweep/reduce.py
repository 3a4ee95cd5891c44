"""Row reductions of a scored chunk, in numpy: the Pareto frontier and the top-N per group.

Pareto (memory ↓, speedup ↑): within a group, rows sorted by memory ascending (ties: higher
speedup first) are on the frontier when their speedup beats every row before them. The running
maximum is taken over the integer key group · R + rank(speedup), so one np.maximum.accumulate
restarts at every group boundary, exactly (no float offsets).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from infersize.core.arrays import FloatArray, IntArray


def pareto_front(group: IntArray, memory: FloatArray, speedup: FloatArray) -> IntArray:
    """Indices of the non-dominated rows, ordered by (group, memory, speedup desc); of rows
    equal in all three, the first (the sort is stable) is kept."""
    if group.size == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((-speedup, memory, group))
    _, rank = np.unique(speedup[order], return_inverse=True)
    key = group[order].astype(np.int64) * (int(rank.max()) + 1) + rank
    best_before = np.concatenate(([-1], np.maximum.accumulate(key)[:-1]))
    return order[key > best_before]


def top_n(
    group: IntArray, sort_keys: tuple[FloatArray | IntArray, ...], n: int
) -> tuple[IntArray, IntArray]:
    """The first `n` rows of each group under `sort_keys` (most significant first; rows equal
    in all of them keep their order), and their 1-based rank."""
    if group.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.lexsort((*reversed(sort_keys), group))
    sorted_group = group[order]
    starts = np.flatnonzero(np.concatenate(([True], sorted_group[1:] != sorted_group[:-1])))
    position = np.arange(order.size) - np.repeat(starts, np.diff(np.append(starts, order.size)))
    keep = position < n
    return order[keep], position[keep] + 1


def codes(keys: Sequence[tuple[Any, ...]]) -> IntArray:
    """Dense integer codes that sort like the keys."""
    distinct = {key: i for i, key in enumerate(sorted(set(keys)))}
    return np.array([distinct[key] for key in keys], dtype=np.int64)
