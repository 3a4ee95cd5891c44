"""Every numeric option of `infersize capacity`, found on the command itself (so a new one is
covered the day it is added), given any number a user can type: a float or a whole number,
NaN, infinities, the smallest subnormal, 1e308, thirty nines. The answer is exit 0 with JSON
holding no NaN or infinity, or one `error:` line with exit 2; never a traceback or exit 1.
Cheap settings (30 requests, two replications) keep each example well under a second."""

from __future__ import annotations

import json
import math

import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from infersize.cli import app
from tests.support.commands import ALPHA, QWEN_CAPACITY

CAPACITY = typer.main.get_command(app).commands["capacity"]  # type: ignore[attr-defined]
NUMBERS_OR_AUTO = ("--tp", "--draft-k")  # a number, or auto
NUMERIC = sorted(
    [p.opts[0] for p in CAPACITY.params if p.bare_type() in ("int", "float")]
    + list(NUMBERS_OR_AUTO)
)
BASE = [
    *QWEN_CAPACITY,
    *ALPHA,
    "--input-tokens",
    "200",
    "--output-tokens",
    "20",
    "--request-rate",
    "2",
    "--requests",
    "30",
    "--replications",
    "2",
    "--sla",
    "ttft:p90<=2s;tpot:p90<=50ms",
    "--target-request-rate",
    "5",
    "--json",
]
SPECIAL = ["nan", "-nan", "inf", "-inf", "1e308", "-1e308", "5e-324", "-0", "0", "1", "9" * 30]
typed = st.one_of(  # hostile numbers, and as many that most options take
    st.sampled_from(SPECIAL),
    st.floats(-10.0, 1e4, allow_nan=False).map(repr),
    st.integers(-10, 3000).map(str),
    st.integers(1, 64).map(str),
    st.floats(0.05, 1.0).map(repr),
)


def _no_constant(name: str) -> float:
    raise AssertionError(f"{name} in the JSON")


def test_every_numeric_option_is_drawn_from():
    for flag in ("--request-rate", "--headroom", "--requests", "--seed", "--price-usd-per-hour"):
        assert flag in NUMERIC
    assert "--acceptance-length" in NUMERIC and "--max-num-seqs" in NUMERIC


@given(st.dictionaries(st.sampled_from(NUMERIC), typed, min_size=1, max_size=3))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_number_in_any_numeric_option_is_an_answer_or_one_line(options):
    args = list(BASE)
    for flag, value in options.items():
        if flag in args:  # replace the base's value
            args[args.index(flag) + 1] = value
        else:
            args += [flag, value]
    if "--acceptance-length" in options or "--acceptance-rate" in options:
        drop = args.index("--acceptance-rate")  # one acceptance at a time, the drawn one
        if "--acceptance-length" in options:
            del args[drop : drop + 2]
    result = CliRunner().invoke(app, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code in (0, 2), (options, result.output)
    if result.exit_code == 2:
        assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, options
        return
    data = json.loads(result.stdout, parse_constant=_no_constant)
    numbers = [v for v in _leaves(data) if isinstance(v, float)]
    assert all(math.isfinite(v) for v in numbers), options


def _leaves(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    else:
        yield value
