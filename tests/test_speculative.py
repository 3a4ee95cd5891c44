"""Speculative decoding maths against the published values of Leviathan, Kalman & Matias 2023
(https://arxiv.org/abs/2211.17192) and the seed example."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special

from infersize.core import speculative as sd
from infersize.core.speedup import StepTimes, alpha_for_speedup, get_speedup_model

LEVIATHAN = get_speedup_model("leviathan")


def test_expected_tokens_leviathan_value():
    # measurements.md: E(α=0.8, K=5) = 3.68928
    assert sd.expected_tokens(0.8, 5) == pytest.approx(3.68928, abs=1e-9)


def test_expected_tokens_at_alpha_one_is_k_plus_one():
    assert sd.expected_tokens(1.0, 4) == 5.0
    assert sd.expected_tokens(0.0, 4) == 1.0


def test_theorem_3_8_value():
    # measurements.md: S(α=0.8, K=2, c=0.1) = 2.03333
    assert sd.speedup_leviathan(0.8, 2, 1 / 0.1) == pytest.approx(2.033333, abs=1e-6)


def test_seed_example_leviathan_and_linear():
    # the seed example (α 0.72, K 4, γ 12.4): Theorem 3.8 gives (1 - 0.72^5) / ((1 - 0.72)
    # (1 + 4/12.4)) = 2.1779; the linear formula (1 + 0.72·4) / (1 + 5/12.4) = 2.7651
    assert sd.speedup_leviathan(0.72, 4, 12.4) == pytest.approx(2.177853, abs=1e-6)
    assert sd.speedup_linear(0.72, 4, 12.4) == pytest.approx(2.765057, abs=1e-6)


def test_corollary_3_9_k_equals_one():
    # If α > c, S at K=1 is (1+α)/(1+c) > 1
    assert sd.speedup_leviathan(0.5, 1, 1 / 0.2) == pytest.approx(1.5 / 1.2)


def test_optimal_k_published_checks():
    # measurements.md: (α=0.8, c=0.05) -> K* 7.857, best integer 8, S 3.0921;
    # (α=0.62, c=0.015) -> best integer 7
    assert sd.optimal_k_leviathan(0.8, 20.0) == 8
    assert sd.speedup_leviathan(0.8, 8, 20.0) == pytest.approx(3.0921, abs=1e-4)
    assert sd.optimal_k_leviathan(0.62, 1 / 0.015) == 7


def test_optimal_k_edges():
    assert sd.optimal_k_leviathan(1.0, 10.0, k_max=12) == 12  # every token accepted
    assert sd.optimal_k_leviathan(0.0, 10.0) == 1
    assert sd.optimal_k_leviathan(0.9, 0.5) == 1  # draft slower than the target
    assert sd.optimal_k_leviathan(0.99, 1000.0, k_max=5) == 5  # capped


@pytest.mark.parametrize("z", [-1e-300, -1e-30, -1e-5, -0.01, -0.1, -0.3, -0.36, -0.3678794])
def test_lambert_wm1_matches_scipy(z):
    ours = sd.lambert_wm1_of_log(np.log(-z))
    assert ours == pytest.approx(scipy.special.lambertw(z, -1).real, rel=1e-10)


def test_break_even_alpha_solves_s_equals_one():
    k, gamma = 4, 12.4
    alpha = alpha_for_speedup(LEVIATHAN, 1.0, k, StepTimes.from_latency_ratio(gamma))
    assert sd.speedup_leviathan(alpha, k, gamma) == pytest.approx(1.0, abs=1e-9)


def test_break_even_matches_scipy_brentq():
    from scipy.optimize import brentq

    for k, gamma in [(1, 3.0), (4, 12.4), (8, 50.0)]:
        expected = brentq(lambda a, k=k, g=gamma: sd.speedup_leviathan(a, k, g) - 1, 0, 1 - 1e-12)
        times = StepTimes.from_latency_ratio(gamma)
        assert alpha_for_speedup(LEVIATHAN, 1.0, k, times) == pytest.approx(expected, abs=1e-9)


def test_no_break_even_when_draft_is_slower():
    # γ = 0.5: one step costs 1 + K/γ = 9 target steps, more than the K+1 = 5 tokens it can emit
    assert np.isnan(alpha_for_speedup(LEVIATHAN, 1.0, 4, StepTimes.from_latency_ratio(0.5)))


def test_alpha_for_target_speedup_linear_closed_form():
    # the linear formula has a closed form: α = (S · (1 + (K+1)/γ) − 1) / K
    alpha = alpha_for_speedup(
        get_speedup_model("linear"), 2.0, 4, StepTimes.from_latency_ratio(12.4)
    )
    assert alpha == pytest.approx((2.0 * (1 + 5 / 12.4) - 1) / 4, abs=1e-12)
    assert sd.speedup_linear(alpha, 4, 12.4) == pytest.approx(2.0)


def test_roofline_equals_leviathan_when_verification_costs_one_step():
    t_target, gamma = 0.02, 8.0
    roof = sd.speedup_roofline(0.7, 5, t_target, t_target / gamma, t_target)
    assert roof == pytest.approx(sd.speedup_leviathan(0.7, 5, gamma))


def test_alpha_for_expected_tokens_inverts_e():
    # vLLM V1 "mean acceptance length" 3.28 at K=4 -> α with E(α, 4) = 3.28
    alpha = sd.alpha_for_expected_tokens(3.28, 4)
    assert sd.expected_tokens(alpha, 4) == pytest.approx(3.28, abs=1e-9)
    assert np.isnan(sd.alpha_for_expected_tokens(6.0, 4))  # above K+1: impossible


def test_vllm_metric_conversions_round_trip():
    # measurements.md definitions: vLLM V1 acceptance rate (E-1)/K, V0 efficiency E/(K+1)
    metrics = sd.acceptance_metrics(0.8, 5)
    assert metrics["mean_accepted_tokens"] == pytest.approx(3.68928)
    assert sd.alpha_from_vllm_acceptance_rate(metrics["vllm_acceptance_rate"], 5) == (
        pytest.approx(0.8, abs=1e-12)
    )
    assert sd.alpha_from_system_efficiency(metrics["system_efficiency"], 5) == (
        pytest.approx(0.8, abs=1e-12)
    )
