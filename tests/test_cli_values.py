"""Option values are Typer's to convert (no private Typer API): a value Typer refuses ends in
one line naming the option and exit code 2, and the spellings Typer accepts are accepted."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from infersize.cli import app

SPEC = ["spec", "--target", "qwen2.5-7b", "--draft", "qwen2.5-0.5b", "--gpu", "a100"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["spec", "--target", "qwen2.5-7b", "--gpu", "a100", "--draft-k", "4.5"],
            "error: Invalid value for '--draft-k' / '--speculative-num-steps': Input should be a "
            "valid integer, unable to "
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
    ids=["integer-option-given-a-fraction", "number-option-given-a-word", "ranged-option-above"],
)
def test_a_value_typer_refuses_is_one_line_and_exit_2(args, message):
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert result.stderr.strip() == message


def test_an_integer_written_as_a_whole_float_is_that_integer():
    """`--draft-k 4.0` is 4 to Typer (Pydantic's lax reading): the answer is the same."""
    four = CliRunner().invoke(app, [*SPEC, "--draft-k", "4", "--json"])
    four_point_zero = CliRunner().invoke(app, [*SPEC, "--draft-k", "4.0", "--json"])
    assert four.exit_code == four_point_zero.exit_code == 0
    assert json.loads(four.stdout)["draft_k"] == 4
    assert four.stdout == four_point_zero.stdout


def test_repeated_file_options_arrive_as_a_list(tmp_path):
    """`--catalog` twice: both overlays are read (the second adds a GPU the first does not)."""
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text("models: []\n")
    second.write_text(
        "gpus:\n  - id: our-h100\n    name: Our H100\n    memory_bytes: 85029027840\n"
        "    memory_source: test\n    bandwidth_gb_per_s: 3350\n    fp16_tflops: 989.4\n"
        "    price_usd_per_hour: 1.10\n"
    )
    args = ["spec", "--target", "qwen2.5-7b", "--draft", "none", "--gpu", "our-h100", "--json"]
    result = CliRunner().invoke(app, [*args, "--catalog", str(first), "--catalog", str(second)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["gpu"]["id"] == "our-h100"
