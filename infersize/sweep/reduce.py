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

PACKED_LIMIT = 2**62  # packed dense ranks stay below it: no int64 overflow


def pareto_front(group: IntArray, memory: FloatArray, speedup: FloatArray) -> IntArray:
    """Indices of the non-dominated rows, ordered by (group, memory, speedup desc); of rows
    equal in all three, the first (the sort is stable) is kept."""
    if group.size == 0:
        return np.zeros(0, dtype=np.int64)
    speed, n_speeds = dense_rank(speedup)
    order = _pareto_order(group, memory, speedup, speed, n_speeds)
    key = group[order].astype(np.int64) * n_speeds + speed[order]
    best_before = np.concatenate(([-1], np.maximum.accumulate(key)[:-1]))
    return order[key > best_before]


def _pareto_order(
    group: IntArray, memory: FloatArray, speedup: FloatArray, speed: IntArray, n_speeds: int
) -> IntArray:
    """np.lexsort((-speedup, memory, group)): rows by group, memory, then speedup descending,
    equal rows in their order. One stable sort of the three keys' dense ranks packed into one
    integer (a lexsort's pass per float key costs twice as much), where they fit in 62 bits."""
    groups, n_groups = dense_rank(group)
    memories, n_memories = dense_rank(memory)
    if n_groups * n_memories * n_speeds >= PACKED_LIMIT:
        return np.lexsort((-speedup, memory, group)).astype(np.int64)
    nan = np.isnan(speedup)  # last in -speedup's order too, as in speedup's
    numbers = n_speeds - int(nan.any())
    faster_first = np.where(nan, speed, numbers - 1 - speed)
    packed = (groups * n_memories + memories) * n_speeds + faster_first
    return np.argsort(packed, kind="stable")


def dense_rank(values: np.ndarray) -> tuple[IntArray, int]:
    """Each value's place among the distinct values, from 0, and how many there are: equal
    values share a place (-0.0 and 0.0 too), and NaNs one after every number, as np.unique
    and np.lexsort order them. Integers (group codes, which come in runs) are sorted by timsort,
    floats by quicksort: the faster for each."""
    order = np.argsort(values, kind="stable" if values.dtype.kind in "iu" else "quicksort")
    ordered = values[order]
    same = ordered[1:] == ordered[:-1]
    if ordered.dtype.kind == "f":
        same |= np.isnan(ordered[1:]) & np.isnan(ordered[:-1])
    place = np.empty(values.size, dtype=np.int64)
    place[order] = np.concatenate(([0], np.cumsum(~same)))
    return place, int(place[order[-1]]) + 1


def top_n(
    group: IntArray, sort_keys: tuple[FloatArray | IntArray, ...], n: int
) -> tuple[IntArray, IntArray]:
    """The first `n` rows of each group under `sort_keys` (most significant first; rows equal
    in all of them keep their order), and their 1-based rank. Only the rows that can be among
    the first n (_contenders) are sorted by every key."""
    if group.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    rows = _contenders(group, sort_keys[0], n)
    keys = tuple(key[rows] for key in reversed(sort_keys))
    order = rows[np.lexsort((*keys, group[rows]))]
    sorted_group = group[order]
    starts = np.flatnonzero(np.concatenate(([True], sorted_group[1:] != sorted_group[:-1])))
    position = np.arange(order.size) - np.repeat(starts, np.diff(np.append(starts, order.size)))
    keep = position < n
    return order[keep], position[keep] + 1


def _contenders(group: IntArray, first: FloatArray | IntArray, n: int) -> IntArray:
    """The rows, in their order, whose first key is no later than the n-th of their group's in
    that key's order (rows tied with it included: the later keys rank them): every row that
    can be among the first n. All rows where the packed ranks would not fit."""
    ranks, n_firsts = dense_rank(first)
    groups, n_groups = dense_rank(group)
    if n_groups * n_firsts >= PACKED_LIMIT:
        return np.arange(group.size)
    order = np.argsort(groups * n_firsts + ranks, kind="stable")  # timsort: groups in runs
    sorted_groups = groups[order]
    starts = np.flatnonzero(np.concatenate(([True], sorted_groups[1:] != sorted_groups[:-1])))
    sizes = np.diff(np.append(starts, group.size))
    nth = starts + np.minimum(sizes, n) - 1
    return np.sort(order[ranks[order] <= np.repeat(ranks[order[nth]], sizes)])


def first_least(group: IntArray, values: FloatArray) -> IntArray:
    """Per group, by group code (0 to the largest, each present), the first row of its least
    value (NaN after every number): np.lexsort((values, group))'s first row of each group,
    without a sort."""
    n_groups = int(group.max()) + 1
    least = np.full(n_groups, np.nan)
    np.fmin.at(least, group, values)  # NaN where all are NaN
    lowest = least[group]
    at_least = (values == lowest) | (np.isnan(values) & np.isnan(lowest))
    rows = np.flatnonzero(at_least)
    first = np.full(n_groups, group.size, dtype=np.int64)
    np.minimum.at(first, group[rows], rows)
    return first


def codes(keys: Sequence[tuple[Any, ...]]) -> IntArray:
    """Dense integer codes that sort like the keys."""
    distinct = {key: i for i, key in enumerate(sorted(set(keys)))}
    return np.array([distinct[key] for key in keys], dtype=np.int64)
