"""`infersize alpha --from-*` on hostile and careless input: every malformed number, impossible
count or oversized line is exit code 2 and one line that names what the log said, never a
traceback, a wrong α or a flag the user did not give; and each reader takes time linear in the
length of a line (a line ten times longer costs at most thirty times the time, where quadratic
work costs a hundred)."""

from __future__ import annotations

import contextlib
import gc
import json
import time

import pytest

from infersize.cli import app
from infersize.errors import InfersizeError
from infersize.service.speclogs import PARSERS
from tests.support.commands import SEED_ARGS

P = "vllm:spec_decode_num_"
V1 = "INFO [metrics.py:96] SpecDecoding metrics: "
V0 = (
    "INFO metrics.py:367] Speculative metrics: Number of speculative tokens: {k}, Number of "
    "accepted tokens: 5, Number of draft tokens: {draft}, Number of emitted tokens: {emitted}."
)
SOURCE_FLAG = {
    "vllm-log": "--from-vllm-log",
    "prometheus": "--from-prometheus",
    "llama-cpp-log": "--from-llama-cpp-log",
}

# (case, source, file text, extra options, the one error line after "error: FILE: ")
CASES = [
    (
        "rate_0.5.5",
        "vllm-log",
        V1 + "Accepted: 2 tokens, Drafted: 9 tokens, Per-position acceptance rate: 0.5.5, 0.3\n",
        [],
        "line 1: per-position rate '0.5.5' is not a number",
    ),
    (
        "value_e",
        "prometheus",
        f"{P}drafts_total e\n{P}accepted_tokens_total 5\n",
        [],
        f"line 1: {P}drafts_total 'e' is not a number",
    ),
    (
        "position_abc",
        "prometheus",
        f"{P}drafts_total 10\n{P}accepted_tokens_total 5\n"
        f'{P}accepted_tokens_per_pos_total{{position="abc"}} 3\n',
        [],
        "line 3: its position label 'abc' is not a whole number",
    ),
    (
        "nan_counter",
        "prometheus",
        f"{P}drafts_total NaN\n{P}accepted_tokens_total 5\n",
        [],
        f"line 1: {P}drafts_total is NaN: a counter is a finite count",
    ),
    (
        "inf_counter_json",
        "prometheus",
        f"{P}drafts_total 10\n{P}accepted_tokens_total +Inf\n",
        ["--json"],
        f"line 2: {P}accepted_tokens_total is +Inf: a counter is a finite count",
    ),
    (
        "draft_k_0",
        "vllm-log",
        V1 + "Accepted: 2 tokens, Drafted: 9 tokens\n",
        ["--draft-k", "0"],
        None,
    ),
    (
        "count_of_5000_digits_v0",
        "vllm-log",
        V0.format(k=3, draft="1" * 5000, emitted=7) + "\n",
        [],
        "line 1: number of draft tokens has 5,000 digits, more than any real count (at most 15)",
    ),
    (
        "count_of_5000_digits_v1",
        "vllm-log",
        V1 + f"Accepted: {'1' * 5000} tokens, Drafted: 9 tokens\n",
        ["--draft-k", "3"],
        "line 1: Accepted has 5,000 digits, more than any real count (at most 15)",
    ),
    (
        "accepted_over_drafted_mean_10_at_k3",
        "vllm-log",
        V1
        + "Accepted: 27 tokens, Drafted: 9 tokens, Per-position acceptance rate: 0.9, 0.9, 0.9\n",
        [],
        "line 1: 27 accepted tokens is more than the 9 drafted: not counts of one run",
    ),
    (
        "k_of_10e18",
        "prometheus",
        f"{P}drafts_total 1\n{P}draft_tokens_total 1e18\n{P}accepted_tokens_total 1e18\n",
        [],
        f"line 2: {P}draft_tokens_total is 1e18: not a count of a real run",
    ),
    (
        "k_of_10e14",
        "prometheus",
        f"{P}drafts_total 1\n{P}draft_tokens_total 1e14\n{P}accepted_tokens_total 1e14\n",
        [],
        "100000000000000 draft tokens in 1 drafts is K=100000000000000, over 256, the largest K "
        "infersize models",
    ),
    (
        "k_300_spec_would_refuse",
        "vllm-log",
        V1
        + "Accepted: 30 tokens, Drafted: 3000 tokens, Per-position acceptance rate: "
        + ", ".join(["0.01"] * 300)
        + "\n",
        [],
        "line 1: more than 256 per-position rates: K over 256, the largest K infersize models",
    ),
    (
        "emitted_below_drafts_not_mean_accepted_tokens",
        "vllm-log",
        V0.format(k=3, draft=30, emitted=7) + "\n",
        [],
        "line 1: 7 emitted tokens for 30 draft tokens at K=3: each draft emits 1 to K+1 tokens",
    ),
    (
        "llama_stats_more_accepted_than_generated",
        "llama-cpp-log",
        "I statistics draft: #calls(b,g,a) = 1 4 4, #gen drafts = 4, #acc drafts = 4, "
        "#gen tokens = 12, #acc tokens = 40\n",
        ["--draft-k", "3"],
        "line 1: 40 accepted tokens is more than the 12 drafted: not counts of one run",
    ),
    (
        "llama_mean_length_over_k_plus_1",
        "llama-cpp-log",
        "I slot print_timing: id 0 | task 0 | draft acceptance = 0.9 ( 90 accepted / 100 "
        "generated), mean acceptance length = 10.00\n",
        ["--draft-k", "3"],
        "90 accepted tokens in 10 drafts is a mean acceptance length of 10, over K+1 = 4: not "
        "counts of drafts of 3 tokens",
    ),
    (
        "llama_rates_without_closing_bracket",
        "llama-cpp-log",
        "I statistics draft: #gen drafts = 4, #acc drafts = 4, #gen tokens = 12, #acc tokens = 4, "
        "#mean acc len = 2.00, #acc rate/pos = (0.5, 0.3\n",
        [],
        "line 1: rates '(0.5, 0.3' have no closing ')'",
    ),
    (
        "label_value_without_closing_quote",
        "prometheus",
        f'{P}drafts_total{{engine="0}} 5\n',
        [],
        "line 1: a label value has no closing quote",
    ),
]


@pytest.mark.parametrize(
    ("source", "text", "options", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_each_hostile_log_is_one_line_and_exit_2(runner, tmp_path, source, text, options, expected):
    path = tmp_path / "log.txt"
    path.write_text(text)
    result = runner.invoke(app, ["alpha", SOURCE_FLAG[source], str(path), *options])
    assert result.exit_code == 2, result.output
    if expected is None:
        assert result.stderr == "error: --draft-k must be in 1..256, got 0\n"
    else:
        assert result.stderr == f"error: {path}: {expected}\n"
    assert "--mean-accepted-tokens" not in result.stderr


def test_a_line_over_the_limit_is_refused_whole(runner, tmp_path):
    from infersize.service.logparse import MAX_LINE_CHARS

    path = tmp_path / "log.txt"
    path.write_text("ok\n" + "x" * (MAX_LINE_CHARS + 1) + "\n")
    result = runner.invoke(app, ["alpha", "--from-vllm-log", str(path)])
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: {path}: line 2 is {MAX_LINE_CHARS + 1:,} characters long, over the "
        f"{MAX_LINE_CHARS:,} of any engine's metrics line: not a log this reads\n"
    )


def test_a_k_past_specs_default_search_gives_flags_spec_accepts(runner, tmp_path):
    """K = 20 from 20 logged rates: past spec's default --max-k 16, so the flags say
    --max-k 20, and spec takes them (it refused the bare --draft-k 20)."""
    path = tmp_path / "log.txt"
    rates = ", ".join(f"{0.9**i:.3f}" for i in range(1, 21))
    path.write_text(
        V1 + f"Accepted: 60 tokens, Drafted: 200 tokens, Per-position acceptance rate: {rates}\n"
    )
    result = runner.invoke(app, ["alpha", "--from-vllm-log", str(path), "--json"])
    assert result.exit_code == 0, result.output
    flags = json.loads(result.stdout)["spec_flags"].split()
    assert flags[:4] == ["--draft-k", "20", "--max-k", "20"]
    base = [a for a in SEED_ARGS if a not in ("--acceptance-rate", "0.72", "--draft-k", "4")]
    spec = runner.invoke(app, [*base, *flags, "--json"])
    assert spec.exit_code == 0, spec.output


# hostile lines of about n characters, for each reader: what made the old patterns backtrack
SHAPES = {
    "digits": ("prometheus", lambda n: "a" + "1" * n + "!"),
    "label_set": ("prometheus", lambda n: f"{P}drafts_total{{" + 'a="1",' * (n // 6) + "} 5"),
    "escaped_label": ("prometheus", lambda n: f'{P}drafts_total{{a="' + "\\a" * (n // 2) + '"} 5'),
    "value_chars": ("prometheus", lambda n: f"{P}drafts_total " + "1e" * (n // 2)),
    "v1_digits": ("vllm-log", lambda n: "a" + "1" * n + "!"),
    "v1_repeated": ("vllm-log", lambda n: "SpecDecoding metrics: " * (n // 22)),
    "v1_rates": (
        "vllm-log",
        lambda n: (
            V1 + "Accepted: 1 tokens, Drafted: 9 tokens, "
            "Per-position acceptance rate: " + "0.1." * (n // 4)
        ),
    ),
    "v0_repeated": ("vllm-log", lambda n: "Speculative metrics: " * (n // 21)),
    "v0_numbers": (
        "vllm-log",
        lambda n: "Speculative metrics: " + "Number of draft tokens: 1, " * (n // 27),
    ),
    "llama_repeated_statistics": ("llama-cpp-log", lambda n: "statistics x: " * (n // 14)),
    "llama_digits": ("llama-cpp-log", lambda n: "a" + "1" * n + "!"),
    "llama_task": ("llama-cpp-log", lambda n: "draft acceptance = 0.5 (" + "1 " * (n // 2)),
    "llama_rates": (
        "llama-cpp-log",
        lambda n: (
            "statistics x: #gen drafts = 1, #gen tokens = 1, "
            "#acc tokens = 1, #acc rate/pos = (" + "0.1, " * (n // 5)
        ),
    ),
}


SHORT_LINE = 40_000  # characters: long enough that parsing, not calling, is timed


def _best_time(source: str, text: str, repeats: int) -> float:
    """The parser's best time over `repeats` runs, the garbage collector held off: a full
    collection of a whole test session's heap, set off by the reader's allocations, would time
    the session rather than the pattern."""
    parse = PARSERS[source][0]
    best = float("inf")
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeats):
            start = time.perf_counter()
            with contextlib.suppress(InfersizeError):
                parse(text, "log.txt")
            best = min(best, time.perf_counter() - start)
    finally:
        gc.enable()
    return best


@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_reader_takes_time_linear_in_the_line_length(shape):
    """The same hostile line at 40,000 and 400,000 characters (the best of five runs each):
    ten times the length costs at most thirty times the time. Quadratic work costs a hundred
    (the old patterns: a 60 kB line of digits took 76 s); linear work has measured up to
    seventeen on a loaded two-core machine."""
    source, make = SHAPES[shape]
    short, long = make(SHORT_LINE), make(10 * SHORT_LINE)
    small = _best_time(source, short, 5)
    large = _best_time(source, long, 5)
    assert large <= 30 * small + 1e-4, f"{shape}: {small:.6f} s, then {large:.6f} s"
