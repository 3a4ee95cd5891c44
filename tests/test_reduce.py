"""Frontier and top-N reductions against brute force (hypothesis)."""

from __future__ import annotations

from unittest.mock import patch

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from infersize.sweep import reduce
from infersize.sweep.reduce import codes, first_least, pareto_front, top_n

rows = st.lists(
    st.tuples(
        st.integers(0, 3),
        st.sampled_from([1.0, 2.0, 2.5, 4.0, 8.0]),
        st.sampled_from([0.8, 1.0, 1.5, 2.0, 3.0]),
    ),
    max_size=60,
)


@given(rows)
def test_pareto_front_equals_brute_force(data):
    group = np.array([r[0] for r in data], dtype=np.int64)
    memory = np.array([r[1] for r in data])
    speed = np.array([r[2] for r in data])
    kept = set(pareto_front(group, memory, speed).tolist())
    for i in range(len(data)):
        dominated = any(
            group[j] == group[i]
            and memory[j] <= memory[i]
            and speed[j] >= speed[i]
            and (memory[j] < memory[i] or speed[j] > speed[i] or j < i)
            for j in range(len(data))
            if j != i
        )
        assert (i in kept) == (not dominated), (i, data)


@given(rows, st.integers(1, 4))
def test_top_n_keeps_the_best_n_per_group(data, n):
    group = np.array([r[0] for r in data], dtype=np.int64)
    speed = np.array([r[2] for r in data])
    picked, rank = top_n(group, (-speed,), n)  # ties: the earlier row first
    for g in set(group.tolist()):
        members = sorted(np.flatnonzero(group == g), key=lambda i: (-speed[i], i))
        chosen = [i for i, r in zip(picked, rank, strict=True) if group[i] == g]
        assert chosen == members[:n]
    assert all(1 <= r <= n for r in rank)


def test_codes_sort_like_the_keys():
    assert codes([("b", 2), ("a", 9), ("b", 1), ("a", 9)]).tolist() == [2, 0, 1, 0]


def _pareto_by_lexsort(group, memory, speedup):
    """The frontier as three lexsort passes and np.unique's ranks find it."""
    order = np.lexsort((-speedup, memory, group))
    _, rank = np.unique(speedup[order], return_inverse=True)
    key = group[order].astype(np.int64) * (int(rank.max()) + 1) + rank
    best_before = np.concatenate(([-1], np.maximum.accumulate(key)[:-1]))
    return order[key > best_before]


awkward = st.sampled_from([0.0, -0.0, 1.0, 2.5, np.nan, np.inf])


@given(
    st.lists(st.tuples(st.integers(0, 3), awkward, awkward), min_size=1, max_size=60),
    st.sampled_from([reduce.PACKED_LIMIT, 1]),  # 1: ranks never fit, lexsort itself sorts
)
def test_pareto_front_orders_ties_nan_and_signed_zeros_as_lexsort_does(data, limit):
    group = np.array([r[0] for r in data], dtype=np.int64) * 1000  # sparse group ids
    memory = np.array([r[1] for r in data])
    speed = np.array([r[2] for r in data])
    expected = _pareto_by_lexsort(group, memory, speed)
    with patch.object(reduce, "PACKED_LIMIT", limit):
        assert pareto_front(group, memory, speed).tolist() == expected.tolist()


def _top_n_by_lexsort(group, keys, n):
    """Every row sorted by every key, then the first n of each group."""
    order = np.lexsort((*reversed(keys), group))
    sorted_group = group[order]
    starts = np.flatnonzero(np.concatenate(([True], sorted_group[1:] != sorted_group[:-1])))
    position = np.arange(order.size) - np.repeat(starts, np.diff(np.append(starts, order.size)))
    return order[position < n], position[position < n] + 1


@given(
    st.lists(st.tuples(st.integers(0, 3), awkward, awkward, awkward), min_size=1, max_size=60),
    st.integers(1, 4),
    st.sampled_from([reduce.PACKED_LIMIT, 1]),  # 1: every row contends
)
def test_top_n_equals_sorting_every_row_by_every_key(data, n, limit):
    group = np.array([r[0] for r in data], dtype=np.int64) * 1000
    keys = tuple(np.array([r[i] for r in data]) for i in (1, 2, 3))
    expected, expected_rank = _top_n_by_lexsort(group, keys, n)
    with patch.object(reduce, "PACKED_LIMIT", limit):
        picked, rank = top_n(group, keys, n)
    assert picked.tolist() == expected.tolist()
    assert rank.tolist() == expected_rank.tolist()


@given(st.lists(st.tuples(st.integers(0, 3), awkward), min_size=1, max_size=60))
def test_first_least_is_each_groups_first_row_in_lexsort_order(data):
    group = np.array([r[0] for r in data], dtype=np.int64)
    group = np.unique(group, return_inverse=True)[1]  # dense codes, as coverage has them
    values = np.array([r[1] for r in data])
    order = np.lexsort((values, group))
    expected = order[np.concatenate(([True], group[order][1:] != group[order][:-1]))]
    assert first_least(group, values).tolist() == expected.tolist()
