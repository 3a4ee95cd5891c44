"""The context axis: tokens in each sequence's KV cache at decode, given directly or as a prompt
and an answer length (context = input + output/2) in `spec` and sweep files."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infersize.cli import app
from infersize.defaults import DEFAULTS
from infersize.errors import InfersizeError, SweepConfigError
from infersize.service.context import decode_context
from infersize.sweep.config import load_sweep
from infersize.sweep.plan import build_plan

SPEC = ["spec", "--target", "llama-3.1-8b", "--draft", "llama-3.2-1b", "--gpu", "h100"]


def test_input_plus_half_the_output():
    assert decode_context(None, 4096, 1024) == 4608
    assert decode_context(None, 1000, 3) == 1001  # rounded down
    assert decode_context(8192, None, None) == 8192
    assert decode_context(None, None, None) == DEFAULTS.context_length


@given(st.integers(1, 1 << 20), st.integers(0, 1 << 20))
def test_the_context_is_the_average_the_decode_steps_hold(prompt, answer):
    # step j of the answer (1..answer) attends to prompt + j - 1 cached tokens and the new one
    context = decode_context(None, prompt, answer)
    assert prompt + (answer - 1) / 2 <= context <= prompt + (answer + 1) / 2


def test_the_library_names_settings_for_each_front_end():
    with pytest.raises(InfersizeError) as both:
        decode_context(4096, 1024, 256)
    assert both.value.message == (
        "give {context_length} or {input_tokens} with {output_tokens}, not both"
    )
    with pytest.raises(InfersizeError) as alone:
        decode_context(None, None, 256)
    assert alone.value.message == (
        "{input_tokens} and {output_tokens} go together (the context is input + output/2)"
    )


def _json(runner, *args: str) -> dict[str, object]:
    result = runner.invoke(app, [*SPEC, *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_spec_sizes_input_and_output_as_their_average_context(runner):
    lengths = _json(runner, "--input-tokens", "4096", "--output-tokens", "1024")
    context = _json(runner, "--context-length", "4608")
    assert lengths["context_length"] == 4608
    assert (lengths["input_tokens"], lengths["output_tokens"]) == (4096, 1024)
    assert (context["input_tokens"], context["output_tokens"]) == (None, None)
    drop = ("input_tokens", "output_tokens")
    assert {k: v for k, v in lengths.items() if k not in drop} == {
        k: v for k, v in context.items() if k not in drop
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--context-length", "4096", "--input-tokens", "1024", "--output-tokens", "256"],
            "error: give --context-length or --input-tokens with --output-tokens, not both",
        ),
        (
            ["--context-length", "4096", "--output-tokens", "256"],
            "error: give --context-length or --input-tokens with --output-tokens, not both",
        ),
        (
            ["--input-tokens", "1024"],
            "error: --input-tokens and --output-tokens go together (the context is input + "
            "output/2)",
        ),
        (
            ["--input-tokens", "0", "--output-tokens", "256"],
            "error: --input-tokens must be at least 1, got 0",
        ),
    ],
)
def test_spec_refuses_both_context_forms(runner, args, message):
    result = runner.invoke(app, [*SPEC, *args])
    assert result.exit_code == 2
    assert result.stderr == message + "\n"


def test_the_panel_says_what_the_context_is(runner):
    result = runner.invoke(app, [*SPEC, "--input-tokens", "4096", "--output-tokens", "1024"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())  # as one line, whatever the terminal's width
    assert (
        "Context 4,608 tokens: what each sequence holds in the KV cache at a decode step (prompt "
        "+ answer so far) = 4,096 input + 1,024 output / 2, the average over the answer's "
        "decode steps Memory"
    ) in text
    plain = " ".join(runner.invoke(app, SPEC).stdout.split())
    assert (
        "Context 4,096 tokens: what each sequence holds in the KV cache at a decode step "
        "(prompt + answer so far) Memory"
    ) in plain


BASE = """\
name: io
pairs: [{target: llama-3.1-8b, draft: llama-3.2-1b, acceptance_rates: [0.7]}]
gpus: [h100]
"""


def _write(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(BASE + textwrap.dedent(extra))
    return path


def test_a_sweep_takes_input_and_output_tokens(tmp_path):
    config, doc = load_sweep(
        _write(tmp_path, "input_tokens: [1024, 4096]\noutput_tokens: [512, 2048]\n")
    )
    assert build_plan(config, doc).contexts == (1280, 2048, 4352, 5120)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            "context_lengths: [4096]\ninput_tokens: [1024]\noutput_tokens: [256]\n",
            "give context_lengths or input_tokens with output_tokens, not both",
        ),
        (
            "input_tokens: [1024]\n",
            "input_tokens and output_tokens go together (the context is input + output/2)",
        ),
        ("batch_sizes: [1]\n", "give context_lengths, or input_tokens with output_tokens"),
    ],
)
def test_a_sweep_takes_one_context_form(tmp_path, runner, extra, message):
    path = _write(tmp_path, extra)
    with pytest.raises(SweepConfigError):
        load_sweep(path)
    result = runner.invoke(app, ["sweep", "validate", str(path)])
    assert result.exit_code == 2
    assert result.stderr == f"error: {path}: line 1: key '(top level)': Value error, {message}\n"
