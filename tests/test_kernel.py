"""The compiled loop's pieces give the floats their plain-Python sources give: the step formula
(core/serving/step_math.py, compiled by kernel_steps.py), Python's round() (half to even), and
the fewest steps to reach a wait, capped at the steps the caller may take."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from infersize.core.serving import step_math
from infersize.core.serving.kernel_requests import round_half_even
from infersize.core.serving.kernel_steps import step_seconds, steps_until

finite = st.floats(min_value=0.0, max_value=1e3, allow_nan=False)


@settings(deadline=None)  # the first example loads the compiled code
@given(st.floats(min_value=-1e12, max_value=1e12, allow_nan=False))
def test_round_half_even_is_pythons_round(x):
    assert round_half_even(x) == round(x)


def test_round_half_even_at_ties():
    """Python's round: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> 0, -1.5 -> -2."""
    for x, expected in ((0.5, 0), (1.5, 2), (2.5, 2), (-0.5, 0), (-1.5, -2), (7.49, 7)):
        assert round_half_even(x) == expected


@settings(deadline=None)
@given(
    seqs=st.integers(min_value=0, max_value=40),
    prefill=st.integers(min_value=0, max_value=200),
    context=finite,
    attended=finite,
    kv=st.tuples(finite, finite),
    draft_k=st.integers(min_value=0, max_value=4),
    eager_prefill=st.booleans(),
    graph_max_bs=st.sampled_from([math.inf, 8.0]),
)
def test_compiled_step_is_the_python_formula(
    seqs, prefill, context, attended, kv, draft_k, eager_prefill, graph_max_bs
):
    """The same source, compiled and in Python, over arrays and over tuples: the same float."""
    rng = np.random.default_rng(seqs * 1000 + prefill)
    size = 40 * 5 + 200 + 1
    target, draft = rng.random(size), rng.random(size)
    parameters = (
        float(draft_k),
        float(1 + draft_k),
        1e-12,
        3e-9,
        2e-12,
        1e-9,
        max(draft_k - 1.0, 0.0),
        0.5 if draft_k else 0.0,
        1.0,
        0.002,
        0.001,
        float(eager_prefill),
        graph_max_bs,
        1.1e-3,  # the host work of a step with drafts to verify
    )
    args = (seqs, prefill, context, attended, *kv)
    python = step_math.step_seconds(tuple(target), tuple(draft), parameters, *args)
    compiled = step_seconds(target, draft, np.asarray(parameters), *args)
    assert compiled == python


def test_steps_until_reaches_the_wait_and_keeps_to_the_cap():
    """n · first + slope · n(n − 1)/2 ≥ wait at the fewest n: 1 s steps growing by 0.5 s reach
    4 s at n = 2.5 -> 3 (1 + 1.5 + 2 = 4.5); a cap of 2 steps gives 2; no wait gives 1."""
    assert steps_until(4.0, 1.0, 0.5, 100) == 3
    assert steps_until(4.0, 1.0, 0.5, 2) == 2
    assert steps_until(0.0, 1.0, 0.5, 100) == 1
    assert steps_until(10.0, 1.0, 0.0, 100) == 10  # constant steps: wait / first
