"""Loads and numbers of `capacity` that would make its answer meaningless or its output
invalid: answers of one token (no TPOT: null, never NaN), too few requests for the percentile
an SLA asks, an hourly price whose fleet's dollars overflow, a NaN acceptance length. Each is
an answer without NaN or a one-line refusal with exit code 2."""

from __future__ import annotations

import json

import pytest

from infersize.cli import app
from tests.support.commands import ALPHA, QWEN_CAPACITY

BASE = [*QWEN_CAPACITY, *ALPHA]
LOAD = ["--input-tokens", "500", "--output-tokens", "100", "--request-rate", "1"]


def test_one_token_answers_have_no_tpot_null_in_json_and_a_dash_in_the_panel(runner):
    args = [*BASE, "--input-tokens", "1", "--output-tokens", "1", "--request-rate", "1"]
    result = runner.invoke(app, [*args, "--requests", "40", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    nothing = dict.fromkeys(("mean", "p50", "p90", "p95", "p99"))
    for arm in ("baseline", "speculative"):
        assert data[arm]["tpot_ms"] == data[arm]["itl_ms"] == nothing
        assert data[arm]["ttft_ms"]["p99"] > 0
    panel = runner.invoke(app, [*args, "--requests", "40"])
    assert panel.exit_code == 0 and "nan" not in panel.output.lower()
    assert "no TPOT: every answer is one token" in panel.output


@pytest.mark.parametrize(
    ("requests", "sla", "message"),
    [
        ("1", "ttft:p99<=2s", "--requests 1 is too few for the SLA term 'ttft:p99<=2s': its p99 "),
        (
            "99",
            "ttft:p99<=2s",
            "--requests 99 is too few for the SLA term 'ttft:p99<=2s': its p99 ",
        ),
        ("19", "e2e:p95<=9s", "--requests 19 is too few for the SLA term 'e2e:p95<=9s': its p95 "),
        (
            "9",
            "ttft:mean<=2s",
            "--requests 9 is too few for the SLA term 'ttft:mean<=2s': its mean ",
        ),
    ],
    ids=["p99-of-1", "p99-of-99", "p95-of-19", "mean-of-9"],
)
def test_too_few_requests_for_the_statistic_asked_is_refused(runner, requests, sla, message):
    fewest = {"p99": "100", "p95": "20", "mean": "10"}[sla.split(":")[1][:4].rstrip("<")]
    args = [*BASE, *LOAD, "--requests", requests, "--sla", sla, "--target-request-rate", "10"]
    result = runner.invoke(app, args)
    expected = f"error: {message}needs at least {fewest} requests\n"
    assert (result.exit_code, result.output) == (2, expected)


@pytest.mark.parametrize("price", ["1e308", "inf", "nan", "-1"])
def test_an_hourly_price_past_any_gpus_is_refused(runner, price):
    shown = {"1e308": "1e+308"}.get(price, price)
    result = runner.invoke(app, [*BASE, *LOAD, "--price-usd-per-hour", price])
    assert (result.exit_code, result.output) == (
        2,
        f"error: --price-usd-per-hour must be in [0, 1e+06] $ per GPU-hour, got {shown}\n",
    )


def test_a_nan_acceptance_length_is_no_length_not_nothing_accepted(runner):
    args = [*BASE[:-2], *LOAD, "--acceptance-length", "nan"]
    result = runner.invoke(app, args)
    assert (result.exit_code, result.output) == (
        2,
        "error: --acceptance-length must be in [1, 5] at --draft-k 4 (1 + accepted drafts per "
        "step), got nan\n",
    )
