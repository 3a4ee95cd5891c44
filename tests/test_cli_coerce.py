"""cli/coerce.py converts plain option values without Typer's Pydantic adapters: every value it
converts must come out exactly as Typer's adapter would give it, and everything else must
still reach Typer (same accepted spellings, same error messages)."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer._adapters import build_adapter
from typer.models import OptionInfo
from typer.testing import CliRunner

from infersize.cli import app
from infersize.cli.coerce import _NOT_QUICK, quick_value

NUMBERISH = st.text(alphabet="0123456789-+._eE ", max_size=12) | st.text(max_size=8)
NUMBERS = NUMBERISH | st.integers().map(str) | st.floats(allow_nan=False).map(repr)


def typer_value(annotation: object, value: object) -> object:
    """What Typer's own adapter makes of `value` (or the exception type it raises)."""
    try:
        return build_adapter(annotation, OptionInfo()).validate_python(value)
    except Exception as exc:  # the kind of failure is what is compared
        return type(exc)


def same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return type(a) is type(b) and a == b


@settings(max_examples=400, deadline=None)
@given(text=NUMBERS, annotation=st.sampled_from([int, float, str, Path]))
def test_quick_values_are_typers_values(text, annotation):
    """Property: whenever the quick path converts, Typer's adapter gives the same value of the
    same type; where they could differ (or Typer refuses), the quick path declines."""
    quick = quick_value(annotation, text)
    if quick is not _NOT_QUICK:
        assert same(quick, typer_value(annotation, text)), (text, quick)


def test_every_short_number_spelling_agrees():
    """Exhaustively, every string of up to 3 characters from digits, sign, point and exponent
    (checked to 5 characters once: 371,880 conversions, no difference)."""
    for length in range(1, 4):
        for chars in itertools.product("0123456789-.eE+", repeat=length):
            text = "".join(chars)
            for annotation in (int, float):
                quick = quick_value(annotation, text)
                if quick is not _NOT_QUICK:
                    assert same(quick, typer_value(annotation, text)), (annotation, text)


@pytest.mark.parametrize(
    ("annotation", "text", "expected"),
    [
        (int, "4", 4),
        (int, "-12", -12),
        (float, "0.72", 0.72),
        (float, "1e-3", 1e-3),
        (float, ".5", 0.5),
        (str, "qwen2.5-7b", "qwen2.5-7b"),
        (Path, "configs/models.yaml", Path("configs/models.yaml")),
        (list[Path], ("a.yaml", "b.yaml"), [Path("a.yaml"), Path("b.yaml")]),
        (list[float], ("0.6", "0.8"), [0.6, 0.8]),
    ],
)
def test_plain_values_take_the_quick_path(annotation, text, expected):
    assert quick_value(annotation, text) == expected


@pytest.mark.parametrize(
    ("annotation", "text"),
    [
        (int, "4.0"),  # Pydantic reads it as 4: Typer decides
        (int, " 4"),
        (int, "1_000"),
        (int, "٤"),  # an Arabic-Indic digit
        (float, "nan"),
        (float, "1e400"),  # beyond two exponent digits: Typer's reading of infinity
        (Path, ""),
        (Path, "a\x00b"),  # Pydantic refuses a NUL in a path
        (int, True),
        (list[int], ("1", "x")),
    ],
)
def test_anything_unusual_goes_to_typer(annotation, text):
    assert quick_value(annotation, text) is _NOT_QUICK


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["spec", "--target", "qwen2.5-7b", "--gpu", "a100", "--draft-k", "4.5"],
            "error: Invalid value for '--draft-k': Input should be a valid integer, unable to "
            "parse string as an integer",
        ),
        (
            ["spec", "--target", "qwen2.5-7b", "--gpu", "a100", "--acceptance-rate", "x"],
            "error: Invalid value for '--acceptance-rate': Input should be a valid number, "
            "unable to parse string as a number",
        ),
        (
            ["best", "--alpha", "1.5", "--gpu", "h100", "nowhere"],
            "error: Invalid value for '--alpha': Input should be less than or equal to 1",
        ),
    ],
)
def test_typer_still_words_the_errors(args, message):
    """The ranged option and the values the quick path declines are Typer's: the messages
    are those infersize printed before cli/coerce.py existed."""
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert result.stderr.strip() == message


def test_a_number_inside_its_range_takes_the_quick_path():
    """`best --alpha` is ranged [0, 1]: 0.7 converts quickly, 1.5 is Typer's to refuse (above);
    the bounds themselves are inside, as Typer's ge/le make them."""
    from infersize.cli.coerce import QuickRuntimeParam

    ranged = QuickRuntimeParam.__new__(QuickRuntimeParam)
    object.__setattr__(ranged, "parameter_info", OptionInfo(min=0, max=1))
    assert ranged._in_range(0.7) and ranged._in_range(0.0) and ranged._in_range(1.0)
    assert not ranged._in_range(1.5) and not ranged._in_range([0.5, -0.1])


def test_a_value_typer_accepts_but_the_quick_path_declines_still_works():
    """`--draft-k 4.0` is an integer to Typer (Pydantic's lax reading): it stays one."""
    args = ["spec", "--target", "qwen2.5-7b", "--draft", "qwen2.5-0.5b", "--gpu", "a100"]
    four = CliRunner().invoke(app, [*args, "--draft-k", "4", "--json"])
    four_point_zero = CliRunner().invoke(app, [*args, "--draft-k", "4.0", "--json"])
    assert four.exit_code == four_point_zero.exit_code == 0
    assert four.stdout == four_point_zero.stdout


def test_a_typer_without_those_internals_still_parses():
    """cli/coerce.py uses Typer 0.29's internals; where it cannot load, Typer converts."""
    code = (
        "import sys\n"
        "sys.modules['infersize.cli.coerce'] = None  # its import fails, as on another Typer\n"
        "from infersize.cli import app\n"
        "app(['alpha', '--mean-accepted-tokens', '3.28', '--draft-k', '4', '--json'])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    alpha = json.loads(done.stdout)["acceptance_rate"]  # E = (1 - α^(K+1)) / (1 - α) = 3.28
    assert (1 - alpha**5) / (1 - alpha) == pytest.approx(3.28)
