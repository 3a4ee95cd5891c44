"""The speedup-model contract: a model declares its tokens per step and its step cost once, and
every figure derived from it (the speedup, the speedup of a measured profile, break-even α and
break-even E) agrees with them, for every registered model, a test-only one included."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from infersize.core import speculative as sd
from infersize.core.arrays import floats
from infersize.core.speedup import (
    SPEEDUP_MODELS,
    SpeedupModel,
    StepTimes,
    alpha_for_speedup,
)

EXTRA = SpeedupModel(
    name="halved",
    label="Test Speedup",
    summary="E / (2 + K/γ): a made-up model that reads α through E",
    step_cost=lambda k, t: floats(2.0 + k / t.latency_ratio),
)
MODELS = [*SPEEDUP_MODELS.values(), EXTRA]

alphas = st.floats(0.0, 0.999)
ks = st.integers(1, 16)
times = st.builds(
    lambda target, gamma, verify: StepTimes(
        target=floats(target),
        draft=floats(target / gamma),
        verify=floats(target * verify),
        latency_ratio=floats(gamma),
    ),
    st.floats(1e-4, 1.0),
    st.floats(1.5, 200.0),
    st.floats(1.0, 3.0),
)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
@given(alpha=alphas, k=ks, t=times)
@settings(max_examples=60, deadline=None)
def test_the_speedup_is_tokens_per_step_over_the_step_cost(model, alpha, k, t):
    expected = model.tokens_per_step(floats(alpha), floats(k)) / model.step_cost(floats(k), t)
    assert model.speedup(alpha, k, t) == pytest.approx(float(expected), rel=1e-12)
    if model.reads_expected_tokens:  # a profile's E gives the same S as the α with that E
        e = sd.expected_tokens(alpha, k)
        assert model.speedup_from_expected(e, k, t) == pytest.approx(
            float(model.speedup(alpha, k, t)), rel=1e-12
        )
    else:
        with pytest.raises(ValueError, match="takes one α"):
            model.speedup_from_expected(2.0, k, t)


# 'halved' at K = 3, γ = 1.5 costs 2 + 3/1.5 = 4 = K + 1 target steps: its break-even α is 1,
# where E's plain quotient (1 − α^(K+1)) / (1 − α) loses its digits (found by hypothesis)
AT_ALPHA_ONE = StepTimes(
    target=floats(1.0), draft=floats(1 / 1.5), verify=floats(1.0), latency_ratio=floats(1.5)
)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
@given(k=ks, t=times)
@example(k=3, t=AT_ALPHA_ONE)
@settings(max_examples=40, deadline=None)
def test_break_even_alpha_and_break_even_tokens_give_a_speedup_of_one(model, k, t):
    alpha = float(alpha_for_speedup(model, 1.0, k, t))
    if not np.isnan(alpha):
        assert model.speedup(alpha, k, t) == pytest.approx(1.0, abs=1e-9)
    if model.reads_expected_tokens:  # break-even E is the step cost itself
        assert model.speedup_from_expected(model.step_cost(floats(k), t), k, t) == pytest.approx(1)


def test_the_registered_models_are_the_published_formulas():
    """Leviathan et al. (arXiv 2211.17192) Theorem 3.8 at α 0.8, K 2, c 0.1: 2.03333; the linear
    formula of the seed example at α 0.72, K 4, γ 12.4: 2.765057; roofline with verification
    costing one target step is Leviathan's."""
    gamma = StepTimes.from_latency_ratio(10.0)
    assert SPEEDUP_MODELS["leviathan"].speedup(0.8, 2, gamma) == pytest.approx(2.033333, abs=1e-6)
    assert SPEEDUP_MODELS["linear"].speedup(0.72, 4, StepTimes.from_latency_ratio(12.4)) == (
        pytest.approx(2.765057, abs=1e-6)
    )
    assert SPEEDUP_MODELS["roofline"].speedup(0.8, 2, gamma) == pytest.approx(2.033333, abs=1e-6)
    assert float(sd.speedup_leviathan(0.8, 2, 10.0)) == pytest.approx(2.033333, abs=1e-6)
