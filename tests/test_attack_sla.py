"""SLA texts an attacker writes: a term whose number and unit could share its letters (once
quadratic: 120,000 characters took nearly a minute) and texts past any SLA's length. Each is
refused in one line with exit code 2, at once, on the command line and in a sweep file."""

from __future__ import annotations

import time

import pytest

from infersize.cli import app
from infersize.core.serving.sla import _TERM, MAX_SLA_CHARS, parse_sla
from infersize.errors import ValueRangeError
from tests.support.sweeps import SWEEP

HOSTILE = "ttft:p99<=1" + "e" * 120_000 + "!"
CAPACITY = [
    "capacity",
    "--target",
    "qwen2.5-7b",
    "--gpu",
    "h100",
    "--draft",
    "none",
    "--input-tokens",
    "500",
    "--output-tokens",
    "100",
    "--target-request-rate",
    "5",
]


def test_a_hostile_sla_on_the_command_line_is_refused_by_its_length(runner):
    result = runner.invoke(app, [*CAPACITY, "--sla", HOSTILE])
    assert (result.exit_code, result.output) == (
        2,
        "error: --sla is 120,012 characters long; an SLA is at most 1,000\n",
    )


def test_a_hostile_sla_in_a_sweep_file_is_refused_by_its_length(runner, tmp_path):
    path = tmp_path / "fleet.yaml"
    path.write_text(SWEEP.replace('"ttft:p99<=5s;tpot:p99<=100ms"', f'"{HOSTILE}"'))
    result = runner.invoke(app, ["sweep", "validate", str(path)])
    assert (result.exit_code, result.stderr) == (
        2,
        f"error: {path}: line 21: key 'slas.relaxed': Value error, is 120,012 characters long; "
        "an SLA is at most 1,000\n",
    )


def test_the_longest_sla_allowed_is_judged_at_once(runner):
    text = "ttft:p99<=1" + "e" * (MAX_SLA_CHARS - 12) + "!"
    assert len(text) == MAX_SLA_CHARS
    with pytest.raises(ValueRangeError, match="needs a unit"):
        parse_sla(text[:-1])
    result = runner.invoke(app, [*CAPACITY, "--sla", text])
    assert result.exit_code == 2
    assert result.output.startswith("error: --sla term 'ttft:p99<=1eeee")


def test_matching_a_term_is_linear_in_its_length():
    """A megabyte of the shape that made the old pattern backtrack: well under a second (the
    old pattern ran past five minutes); the bound is generous, a hang is not."""
    start = time.perf_counter()
    assert _TERM.fullmatch("ttft:p99<=1" + "e" * 1_000_000 + "!") is None
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("ttft:p99<=2000ms;tpot:p99<=50ms", "ttft:p99<=2s;tpot:p99<=50ms"),
        ("TTFT:P99 <= 1e3 MS", "ttft:p99<=1s"),
        ("e2e:mean<.5s", "e2e:mean<=500ms"),
    ],
)
def test_the_numbers_an_sla_may_hold_still_read(text, shown):
    assert str(parse_sla(text)) == shown
