"""Fuzzing with hypothesis: generated `spec` arguments and sweep configs, valid and invalid.
The program either succeeds or fails with its clean error (exit 2, one line), never an
unhandled exception."""

from __future__ import annotations

import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from infersize.catalog import load_catalog
from infersize.cli import app
from tests.support.commands import SEED_ARGS

CATALOG = load_catalog()
NAMES = sorted(CATALOG.models.records)
GPUS = sorted(CATALOG.gpus.records)
QUANTS = sorted(CATALOG.weight_formats.records)
numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-10, 10**7),
    st.sampled_from(["", "x", "1e400", "-0", "0.5", "07"]),
)
names = st.one_of(st.sampled_from(NAMES), st.text(max_size=12))
FLAGS = {
    "--target": names,
    "--draft": st.one_of(names, st.just("none")),
    "--gpu": st.one_of(st.sampled_from(GPUS), st.text(max_size=8)),
    "--target-quant": st.one_of(st.sampled_from([*QUANTS, "auto"]), st.text(max_size=5)),
    "--draft-quant": st.sampled_from([*QUANTS, "auto"]),
    "--context-length": numbers,
    "--acceptance-rate": numbers,
    "--draft-k": numbers,
    "--batch-size": numbers,
    "--tp": st.sampled_from(["1", "2", "3", "8", "0"]),
    "--latency-ratio": numbers,
    "--engine": st.sampled_from(["plain", "vllm", "llama.cpp", "x"]),
    "--speedup-model": st.sampled_from(["leviathan", "roofline", "linear", "?"]),
    "--kv-dtype": st.sampled_from(["fp16", "fp8", "q4_0", "fp7"]),
}
COUNT = {"spec": 0, "sweep": 0}


def check(result) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code in (0, 2), (result.exit_code, result.output)
    if result.exit_code == 2:
        assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.output


@given(
    st.dictionaries(st.sampled_from(sorted(FLAGS)), st.none(), max_size=5).flatmap(
        lambda keys: st.fixed_dictionaries({k: FLAGS[k] for k in keys})
    )
)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def _spec_examples(overrides):
    argv = list(SEED_ARGS)
    for flag, value in overrides.items():
        value = str(value)
        if flag in argv:
            argv[argv.index(flag) + 1] = value
        else:
            argv += [flag, value]
    COUNT["spec"] += 1
    check(CliRunner().invoke(app, [*argv, "--json"]))


axis = st.one_of(
    st.lists(st.integers(-2, 70000), max_size=3),
    st.lists(st.one_of(st.floats(-1, 2), st.just(float("nan"))), max_size=3),
    st.fixed_dictionaries(
        {"start": st.integers(-5, 50), "stop": st.integers(-5, 60), "step": st.integers(-1, 20)}
    ),
    st.text(max_size=5),
    st.none(),
)
sweep_configs = st.fixed_dictionaries(
    {"targets": st.lists(st.sampled_from(["qwen2.5-7b", "llama-3.1-8b", "nope"]), max_size=2)},
    optional={
        "drafts": st.lists(
            st.sampled_from(["qwen2.5-0.5b", "llama-3.2-1b", "llama-68m"]), max_size=2
        ),
        "gpus": st.lists(
            st.one_of(
                st.sampled_from(["h100", "l4", "x"]),
                st.fixed_dictionaries(
                    {"name": st.just("a100"), "tp": st.lists(st.integers(-1, 8), max_size=2)}
                ),
            ),
            max_size=2,
        ),
        "context_lengths": axis,
        "batch_sizes": axis,
        "acceptance_rates": axis,
        "draft_k": axis,
        "target_quants": st.lists(st.sampled_from(["bf16", "int4", "int3"]), max_size=2),
        "speedup_model": st.sampled_from(["leviathan", "roofline", "nope"]),
        "memory_headroom": st.floats(-1, 2),
        "max_cells": st.integers(-1, 10**6),
        "tagrets": st.just(["typo"]),
    },
)


def test_spec_never_crashes():
    """Each generated command line ends in an answer or one error line; and the examples
    really ran (hypothesis may reject them), counted by this test itself."""
    COUNT["spec"] = 0
    _spec_examples()
    assert COUNT["spec"] >= 100, COUNT


@given(sweep_configs)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def _sweep_examples(config):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fuzz.yaml"
        path.write_text(yaml.safe_dump(config))
        COUNT["sweep"] += 1
        check(CliRunner().invoke(app, ["sweep", "validate", str(path)]))


def test_sweep_validate_never_crashes():
    """The same for generated sweep files, valid and invalid."""
    COUNT["sweep"] = 0
    _sweep_examples()
    assert COUNT["sweep"] >= 50, COUNT
