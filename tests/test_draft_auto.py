"""`--draft auto` on `capacity` and `spec`: every drafter the catalog has for the target, ranked
best first, and the capacity winner the same answer as the best of separate `capacity` calls,
one per drafter (the README's deployment, fewer requests so the test runs in seconds)."""

from __future__ import annotations

import json

import pytest

from infersize.cli import app
from tests.support import readme

README_DEPLOYMENT = readme.TARGET
LOAD = [*readme.LOAD, *readme.SLA, *readme.QUICK]


def _json(runner, *args):
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def _cost(row):
    """The ranking's order: fewest GPUs, then dollars, then the most requests/s per replica."""
    return (row["gpus"], row["usd_per_hour"], -row["max_request_rate"])


@pytest.fixture(scope="module")
def ranked():
    from typer.testing import CliRunner

    runner = CliRunner()
    return _json(runner, "capacity", *README_DEPLOYMENT, "--draft", "auto", *LOAD, "--json")


def test_capacity_ranks_at_least_three_drafters_of_two_methods_best_first(ranked):
    candidates = ranked["candidates"]
    assert len(candidates) >= 3
    assert len({c["method"] for c in candidates}) >= 2
    keys = ("method", "drafter", "draft_quant", "draft_k", "gpus", "usd_per_hour", "why")
    assert all(key in c for c in candidates for key in keys)
    costs = [_cost(c) for c in candidates]
    assert costs == sorted(costs)
    # the answer around the list is the winner's own
    assert ranked["draft"] == candidates[0]["drafter"]
    assert ranked["gpus"]["speculative"] == candidates[0]["gpus"]


def test_the_capacity_winner_is_the_best_of_separate_capacity_calls(runner, ranked):
    separate = []
    for c in ranked["candidates"]:
        answer = _json(
            runner,
            "capacity",
            *README_DEPLOYMENT,
            "--draft",
            c["drafter"],
            "--draft-quant",
            c["draft_quant"],
            "--draft-k",
            "auto",
            *LOAD,
            "--json",
        )
        row = {
            "gpus": answer["gpus"]["speculative"],
            "usd_per_hour": answer["usd_per_hour"]["speculative"],
            "max_request_rate": answer["max_request_rate"]["speculative"],
        }
        assert _cost(row) == _cost(c), c["drafter"]  # the ranking served each as capacity does
        separate.append((_cost(row), c["method"], c["drafter"], c["draft_quant"]))
    winner = ranked["candidates"][0]
    assert min(separate)[1:] == (winner["method"], winner["drafter"], winner["draft_quant"])


def test_every_loser_says_why(ranked):
    reasons = ("memory", "acceptance", "verification cost")
    assert all(c["why"].startswith(reasons) for c in ranked["candidates"][1:])


def test_spec_ranks_by_speedup_and_answers_at_the_winners_k(runner):
    data = _json(
        runner, "spec", *README_DEPLOYMENT, "--draft", "auto", "--batch-size", "8", "--json"
    )
    candidates = data["candidates"]
    assert len({c["method"] for c in candidates}) >= 2
    speedups = [c["speedup"] for c in candidates if c["fits"]]
    assert speedups == sorted(speedups, reverse=True)
    best = candidates[0]
    assert data["draft"]["model"] == best["drafter"]
    assert data["draft_k"] == best["draft_k"]
    assert data["speedup"] == pytest.approx(best["speedup"])


def test_n_gram_joins_with_a_workload_kind(runner):
    data = _json(
        runner,
        "spec",
        *README_DEPLOYMENT,
        "--draft",
        "auto",
        "--workload-kind",
        "code-editing",
        "--json",
    )
    assert "ngram" in {c["method"] for c in data["candidates"]}


@pytest.mark.parametrize(
    ("command", "extra", "message"),
    [
        (
            "spec",
            ["--acceptance-rate", "0.7"],
            "--draft auto ranks every drafter at its own published acceptance: drop "
            "--acceptance-rate, --acceptance-rates, --acceptance-length and --method (or name "
            "one drafter)",
        ),
        (
            "capacity",
            ["--input-tokens", "1024", "--output-tokens", "256", "--request-rate", "2"],
            "--draft auto ranks drafters by what they serve at the SLA: give --sla",
        ),
        (
            "spec",
            ["--plot", "k.png"],
            "--plot draws speedup vs K of one drafter: name it, not auto",
        ),
    ],
)
def test_draft_auto_mistakes_are_one_line_and_exit_2(runner, command, extra, message):
    result = runner.invoke(app, [command, *README_DEPLOYMENT, "--draft", "auto", *extra])
    assert result.exit_code == 2
    assert result.stderr == f"error: {message}\n"
