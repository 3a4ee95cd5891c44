"""Position-wise acceptance (core/profile.py): E, the best K and break-even over a profile,
each checked against a brute-force loop written from the definitions; the i.i.d. profile
r_i = α^i gives today's numbers; and the command line around --acceptance-rates."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from infersize.catalog import load_catalog
from infersize.cli import app
from infersize.core import speculative as sd
from infersize.core.engines import get_engine
from infersize.core.evaluate import Grid, evaluate
from infersize.core.profile import (
    conditional_rates,
    expected_tokens_profile,
    extend_profile,
    iid_profile,
    profile_problem,
)
from infersize.core.speedup import get_speedup_model
from infersize.service.resolve import DeploymentRequest, resolve_deployment

# vLLM's CI baseline for EAGLE-3 on Llama-3.1-8B-Instruct, K=3, MT-Bench: per-position
# acceptance 0.7296, 0.5208, 0.3545; mean acceptance length 2.60 (1 + their sum = 2.6049).
VLLM_EAGLE3_8B = (0.7296, 0.5208, 0.3545)

profiles = st.lists(st.floats(0.0, 1.0), min_size=1, max_size=8).map(
    lambda xs: tuple(sorted(xs, reverse=True))
)


def brute_force_e(rates, k):
    """E from its definition: one bonus token, plus each drafted position's acceptance."""
    total = 1.0
    for i in range(1, k + 1):
        if i <= len(rates):
            total += rates[i - 1]
        else:  # past the profile: its last conditional acceptance carried on
            last = rates[-1]
            before = rates[-2] if len(rates) > 1 else 1.0
            c = last / before if before > 0 else 0.0
            total += last * c ** (i - len(rates))
    return total


def test_vllm_ci_example_gives_its_logged_mean_acceptance_length():
    e = expected_tokens_profile(VLLM_EAGLE3_8B, [1, 2, 3])
    assert e.tolist() == pytest.approx([1.7296, 2.2504, 2.6049])
    assert round(float(e[-1]), 2) == 2.60
    assert conditional_rates(VLLM_EAGLE3_8B).tolist() == pytest.approx(
        [0.7296, 0.5208 / 0.7296, 0.3545 / 0.5208]
    )


@given(profiles, st.integers(1, 16))
def test_expected_tokens_equal_brute_force(rates, k):
    got = expected_tokens_profile(extend_profile(rates, 16), [k])[0]
    assert got == pytest.approx(brute_force_e(rates, k), abs=1e-12)


@given(st.floats(0.0, 1.0), st.integers(1, 24))
def test_iid_profile_is_leviathans_expected_tokens(alpha, k):
    e = expected_tokens_profile(iid_profile(alpha, 24), [k])[0]
    assert e == pytest.approx(float(sd.expected_tokens(alpha, k)), rel=1e-12, abs=1e-12)


def test_one_position_profile_extrapolates_as_iid():
    """A single rate says nothing about decay: carried on, it is the i.i.d. α."""
    assert extend_profile([0.6], 4).tolist() == pytest.approx([0.6, 0.36, 0.216, 0.1296])


def test_profile_problems_name_the_position():
    assert profile_problem([]) == "needs at least one rate"
    assert profile_problem([0.7, 1.2]) == "rate 2 must be in [0, 1], got 1.2"
    assert profile_problem([0.5, 0.6]).startswith("rates must not increase with position")
    assert profile_problem(list(VLLM_EAGLE3_8B)) is None


CATALOG = load_catalog()
PLAIN = get_engine("plain")


def _evaluation(rates=None, alpha=0.7, batch=1):
    catalog, plain = CATALOG, PLAIN
    dep = resolve_deployment(
        DeploymentRequest(target="llama-3.1-8b", gpu="h100", draft="llama-3.2-1b"), catalog, plain
    )
    ks = np.arange(1, 13)
    grid = Grid(context=2048, batch=batch, alpha=alpha, ks=ks, rates=rates)
    return evaluate(dep.numbers, plain, get_speedup_model("roofline"), grid)


@given(profiles.filter(lambda r: r[0] > 0.05), st.sampled_from([1, 8, 64]))
def test_best_k_and_break_even_over_a_profile_equal_brute_force(rates, batch):
    ev = _evaluation(extend_profile(rates, 12), batch=batch)
    t = ev.speed.times
    speedups = []
    for k in range(1, 13):  # S = E · T(B,1) / (K · T_draft + T(B,K+1)), one K at a time
        step = k * float(t.draft[..., 0]) + float(t.verify[..., k - 1])
        speedups.append(brute_force_e(rates, k) * float(t.target[..., 0]) / step)
    assert np.allclose(ev.speed.speedup, speedups, rtol=1e-12)
    fits = np.broadcast_to(ev.memory.fits, 12)
    fitting = [s if f else -np.inf for s, f in zip(speedups, fits, strict=True)]
    assert int(ev.optimal.k) == 1 + int(np.argmax(fitting))
    # break-even: the mean acceptance length at which S = 1, i.e. E equal to the step cost
    for k in (1, 4, 12):
        e_needed = float(ev.break_even_expected_tokens()[..., k - 1])
        step = k * float(t.draft[..., 0]) + float(t.verify[..., k - 1])
        assert e_needed * float(t.target[..., 0]) / step == pytest.approx(1.0, rel=1e-12)


@given(st.floats(0.05, 0.99))
def test_iid_profile_gives_todays_numbers(alpha):
    scalar = _evaluation(alpha=alpha)
    profile = _evaluation(rates=iid_profile(alpha, 12), alpha=alpha)
    assert np.allclose(profile.speed.speedup, scalar.speed.speedup, rtol=1e-12)
    assert int(profile.optimal.k) == int(scalar.optimal.k)


SPEC = ["spec", "--target", "llama-3.1-8b", "--draft", "llama-3.2-1b", "--gpu", "h100"]


def test_spec_takes_vllms_per_position_rates(runner):
    result = runner.invoke(
        app, [*SPEC, "--acceptance-rates", "0.7296,0.5208,0.3545", "--draft-k", "3", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["acceptance_rates"] == list(VLLM_EAGLE3_8B)
    assert data["expected_tokens_per_step"] == pytest.approx(2.6049)
    # acceptance_rate is the i.i.d. α with the same mean acceptance length at K=3
    assert float(sd.expected_tokens(data["acceptance_rate"], 3)) == pytest.approx(2.6049)


def test_spec_scalar_alpha_as_a_profile_gives_the_same_answer(runner):
    alpha = 0.8
    rates = ",".join(f"{alpha**i:.17g}" for i in range(1, 17))
    by_profile = json.loads(
        runner.invoke(app, [*SPEC, "--acceptance-rates", rates, "--json"]).stdout
    )
    by_alpha = json.loads(runner.invoke(app, [*SPEC, "--acceptance-rate", "0.8", "--json"]).stdout)
    for key in ("speedup", "optimal_k", "speedup_at_optimal_k", "expected_tokens_per_step"):
        assert by_profile[key] == pytest.approx(by_alpha[key], rel=1e-9)


def test_spec_says_when_the_best_k_is_past_the_profile(runner):
    result = runner.invoke(
        app, [*SPEC, "--acceptance-rates", "0.95,0.9", "--draft-k", "2", "--json"]
    )
    notes = json.loads(result.stdout)["notes"]
    assert (
        "positions 3..10 are past the profile: extrapolated with its last conditional "
        "acceptance (r_i / r_(i-1))" in notes
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--acceptance-rates", "0.73,0.82"],
            "error: --acceptance-rates rates must not increase "
            "with position (r_2 = 0.82 > r_1 = 0.73): r_i is the share of drafts whose i-th token "
            "was accepted\n",
        ),
        (
            ["--acceptance-rates", "0.7", "--acceptance-rate", "0.5"],
            "error: --acceptance-rates cannot be given with --acceptance-rate: one or the other\n",
        ),
        (
            ["--acceptance-rates", "a,b"],
            "error: --acceptance-rates takes numbers separated by "
            "commas (0.73,0.52,0.35), got 'a,b'\n",
        ),
        (
            ["--acceptance-rates", "0.7,0.5", "--speedup-model", "linear"],
            "error: "
            "--acceptance-rates cannot be used with speedup model linear, which takes one α "
            "(--acceptance-rate)\n",
        ),
    ],
)
def test_bad_profiles_exit_2_with_one_line(runner, extra, message):
    result = runner.invoke(app, [*SPEC, *extra])
    assert result.exit_code == 2
    assert result.stderr == message
