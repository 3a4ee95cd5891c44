"""Inputs an adversary would try: every one ends with exit code 2 and one
line naming the problem, fast, without reading what it should not; plus hypothesis fuzzing of
config.json and safetensors headers."""

from __future__ import annotations

import contextlib
import json
import os
import struct
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infersize.catalog.checkpoint import load_folder, read_safetensors_header
from infersize.catalog.hfconfig import CheckpointError
from infersize.cli import app
from infersize.errors import InfersizeError
from tests.support.checkpoints import TINY, llama_tensors, write_folder

GOOD = """\
targets: [qwen2.5-7b]
drafts: [qwen2.5-0.5b]
gpus: [h100]
context_lengths: [4096]
"""
SPEC = ["spec", "--target", "qwen2.5-7b", "--draft", "qwen2.5-0.5b", "--gpu", "h100"]


def one_line_exit_2(result, contains: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert contains in result.stderr, result.stderr


def yaml_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return str(path)


# --- 6: sizes are computed before anything is built --------------------------------------


def test_a_huge_grid_is_refused_in_milliseconds(runner, tmp_path):
    """14 targets × 14 drafts × 4 × 4 × 3 precisions and KV dtypes × 6 (GPU, TP) × 8 × 8 × 3 × 16
    is 173 M cells, which the old check refused only after building every setting; the axes
    alone refuse it now."""
    names = [f"qwen2.5-{s}" for s in ("0.5b", "1.5b", "3b", "7b", "14b", "32b", "72b")]
    names += [f"qwen3-{s}" for s in ("0.6b", "1.7b", "4b", "8b", "14b", "32b", "30b-a3b")]
    text = (
        f"targets: {names}\ndrafts: {names}\n"
        "target_quants: [bf16, fp8, int4, int8]\ndraft_quants: [bf16, fp8, int4, int8]\n"
        "kv_dtypes: [fp16, fp8, bf16]\n"
        "gpus: [{name: h100, tp: [1, 2, 4, 8]}, {name: a100, tp: [1, 2]}]\n"
        "context_lengths: [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]\n"
        "batch_sizes: [1, 2, 4, 8, 16, 32, 64, 128]\n"
        "draft_k: {start: 1, stop: 16, step: 1}\n"
    )
    start = time.perf_counter()
    result = runner.invoke(app, ["sweep", "validate", yaml_file(tmp_path, text)])
    assert time.perf_counter() - start < 5
    one_line_exit_2(result, "the grid's axes multiply to")


@pytest.mark.parametrize(
    "axis",
    [
        "{start: 1, stop: 1e12, step: 1}",
        "{start: 1, stop: 2, step: 5e-324}",
        "{start: 1, stop: 1e308, factor: 1.0000001}",
    ],
)
def test_a_range_is_counted_before_it_is_made(runner, tmp_path, axis):
    text = GOOD.replace("context_lengths: [4096]", f"context_lengths: {axis}")
    start = time.perf_counter()
    result = runner.invoke(app, ["sweep", "validate", yaml_file(tmp_path, text)])
    assert time.perf_counter() - start < 5
    one_line_exit_2(result, "range has more than 100,000 values")


def test_repeated_names_cost_nothing(runner, tmp_path):
    text = GOOD.replace("targets: [qwen2.5-7b]", f"targets: {['qwen2.5-7b'] * 3000}").replace(
        "drafts: [qwen2.5-0.5b]", f"drafts: {['qwen2.5-0.5b'] * 3000}"
    )
    start = time.perf_counter()
    result = runner.invoke(app, ["sweep", "validate", yaml_file(tmp_path, text)])
    assert result.exit_code == 0, result.output
    assert time.perf_counter() - start < 5


# --- 7: only regular files are read --------------------------------------------------------


def test_devices_and_fifos_are_refused_as_inputs(runner, tmp_path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    for path in ("/dev/zero", str(fifo), "/dev/stdin"):
        one_line_exit_2(runner.invoke(app, [*SPEC, "--catalog", path]), "is not a regular file")
    result = runner.invoke(
        app, ["sweep", "validate", yaml_file(tmp_path, GOOD + "catalog: [/dev/stdin]\n")]
    )
    one_line_exit_2(result, "/dev/stdin: is not a regular file")
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY))
    os.mkfifo(folder / "model.safetensors")
    one_line_exit_2(runner.invoke(app, ["models", "show", str(folder)]), "is not a regular file")


# --- 8: untrusted checkpoint headers are validated -----------------------------------------


def _header_file(path: Path, header: object, data: bytes = b"\x00" * 8) -> Path:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return path


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"dtype": "Q7", "shape": [2], "data_offsets": [0, 8]}, "unknown dtype 'Q7'"),
        ({"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}, "integers >= 0"),
        ({"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}, "ends before it begins"),
        ({"dtype": "F32", "shape": [2**62, 4], "data_offsets": [0, 8]}, "but F32 ×"),
        ({"dtype": "F16", "shape": [2.5], "data_offsets": [0, 5]}, "integers >= 0"),
    ],
    ids=["dtype", "negative shape", "reversed offsets", "2^64 elements", "float shape"],
)
def test_lying_safetensors_headers_are_refused(tmp_path, entry, message):
    path = _header_file(tmp_path / "m.safetensors", {"w": entry})
    with pytest.raises(CheckpointError, match=message):
        read_safetensors_header(path)


def test_a_shard_index_cannot_reach_outside_the_folder(runner, tmp_path):
    folder = write_folder(tmp_path / "m", TINY, llama_tensors(TINY))
    index = {"weight_map": {"model.embed_tokens.weight": "../../../../etc/passwd"}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    one_line_exit_2(
        runner.invoke(app, ["models", "show", str(folder)]), "is not a file in the folder"
    )


# --- 9: what used to end in 'internal error' ------------------------------------------------


def _folder_with(tmp_path: Path, config: object) -> str:
    folder = tmp_path / "bad"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    return str(folder)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("[" * 100_000 + "]" * 100_000, "not valid JSON"),
        ({**TINY, "model_type": ["llama"]}, "unknown architecture"),
        ({**TINY, "num_experts": 8}, "missing 'num_experts_per_tok'"),
        ({**TINY, "num_hidden_layers": "two"}, "num_hidden_layers"),
        ({**TINY, "num_key_value_heads": 0}, "num_key_value_heads"),
        ({**TINY, "num_experts": 4, "num_experts_per_tok": 8}, "exceeds num_experts"),
        ({**TINY, "hidden_size": True}, "hidden_size"),
    ],
    ids=[
        "deep",
        "list model_type",
        "experts without top-k",
        "string layers",
        "zero kv heads",
        "top-k over experts",
        "bool hidden",
    ],
)
def test_bad_config_json_exits_2(runner, tmp_path, config, message):
    result = runner.invoke(app, ["models", "show", _folder_with(tmp_path, config)])
    one_line_exit_2(result, message)


@pytest.mark.parametrize("header", [[1, 2], None, {"a": {"b": [[[]]]}}, "[" * 50_000])
def test_safetensors_headers_of_the_wrong_shape_exit_2(runner, tmp_path, header):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY))
    path = folder / "model.safetensors"
    if isinstance(header, str):
        raw = header.encode()
        path.write_bytes(struct.pack("<Q", len(raw)) + raw)
    else:
        _header_file(path, header)
    assert runner.invoke(app, ["models", "show", str(folder)]).exit_code == 2


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--overhead-gib", "1e308"], "--overhead-gib must be in [0, 1024] GiB"),
        (["--latency-ratio", "1e-308"], "--latency-ratio must be in [0.01, 1e6]"),
        (["--context-length", "99999999999999999999"], "more than 8x qwen2.5-7b's"),
        (["--target", "x" * 300], "unknown model 'xxxxxxxx"),
    ],
)
def test_absurd_numbers_and_names_exit_2(runner, extra, message):
    argv = list(SPEC)
    if extra[0] in argv:
        argv[argv.index(extra[0]) + 1] = extra[1]
    else:
        argv += extra
    one_line_exit_2(runner.invoke(app, argv), message)


@pytest.mark.parametrize(
    "axis", ["{start: 1, stop: .inf, step: 1}", "{start: -.inf, stop: 1, step: 1}", "[.nan]"]
)
def test_infinite_ranges_exit_2(runner, tmp_path, axis):
    text = GOOD.replace("context_lengths: [4096]", f"context_lengths: {axis}")
    result = runner.invoke(app, ["sweep", "validate", yaml_file(tmp_path, text)])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1


def test_jobs_beyond_the_machine_exit_2(runner, tmp_path):
    sweep = yaml_file(tmp_path, GOOD)
    for jobs in ("1000", "100000000000000000000"):
        result = runner.invoke(app, ["sweep", "run", sweep, "--jobs", jobs])
        one_line_exit_2(result, f"--jobs must be at most {os.cpu_count()}")


def test_damaged_outputs_exit_2(runner, tmp_path):
    from infersize.sweep.config import load_sweep
    from infersize.sweep.plan import build_plan
    from infersize.sweep.run import run_sweep

    config, doc = load_sweep(Path(yaml_file(tmp_path, GOOD)))
    out = tmp_path / "out"
    run_sweep(build_plan(config, doc), out)
    (out / "current" / "best_pairs.parquet").write_bytes(b"PAR1 not really")
    one_line_exit_2(runner.invoke(app, ["best", str(out)]), "not a readable Parquet table")
    (out / "current" / "manifest.json").write_text("{half")
    one_line_exit_2(runner.invoke(app, ["report", str(out)]), "manifest.json: damaged")


def test_a_full_disk_while_polars_writes_exit_2(runner, tmp_path, monkeypatch):
    import polars as pl

    def full(*_args, **_kwargs):
        raise pl.exceptions.ComputeError("io error: No space left on device (os error 28)")

    monkeypatch.setattr(pl.LazyFrame, "sink_parquet", full)
    result = runner.invoke(
        app,
        [
            "sweep",
            "run",
            yaml_file(tmp_path, GOOD),
            "--out",
            str(tmp_path / "o"),
            "--jobs",
            "1",
            "-q",
        ],
    )
    one_line_exit_2(result, "writing failed (io error: No space left on device")


# --- 10: what used to be silently accepted ---------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GOOD + "gpus: [l4]\n", "key 'gpus' is given twice"),
        (GOOD.replace("[4096]", "[yes]"), "key 'context_lengths.0'"),
        (GOOD.replace("[4096]", "[true]"), "key 'context_lengths.0'"),
        (
            GOOD.replace(
                "gpus: [h100]",
                "gpus: [{name: h100, price_usd_per_hour: 2}, {name: h100, price_usd_per_hour: 3}]",
            ),
            "listed twice with different",
        ),
    ],
    ids=["duplicate key", "yes", "true", "one gpu two prices"],
)
def test_ambiguous_yaml_is_refused(runner, tmp_path, text, message):
    result = runner.invoke(app, ["sweep", "validate", yaml_file(tmp_path, text)])
    one_line_exit_2(result, message)


def test_an_explicit_pair_against_the_size_rule_is_kept_with_a_note(runner, tmp_path):
    text = GOOD.replace("targets: [qwen2.5-7b]\ndrafts: [qwen2.5-0.5b]\n", "").replace(
        "gpus:", "pairs: [{target: qwen2.5-0.5b, draft: qwen2.5-7b}]\ngpus:"
    )
    result = runner.invoke(app, ["sweep", "validate", yaml_file(tmp_path, text)])
    assert result.exit_code == 0
    assert "draft qwen2.5-7b is not smaller than qwen2.5-0.5b; kept, as listed" in result.stdout


def test_best_refuses_nan_and_zero(runner, tmp_path):
    for args, message in ((["--alpha", "nan"], "--alpha"), (["--top", "0"], "--top")):
        one_line_exit_2(runner.invoke(app, ["best", str(tmp_path), *args]), message)


def test_terminal_escapes_in_a_catalog_are_refused(runner, tmp_path):
    overlay = tmp_path / "evil.yaml"
    overlay.write_text(
        'gpus:\n- id: evil\n  name: "\\e[2J\\e[31mpwned"\n  memory_bytes: 1000000000\n'
        "  memory_source: x\n  bandwidth_gb_per_s: 1\n  fp16_tflops: 1\n"
    )
    result = runner.invoke(app, [*SPEC[:-1], "evil", "--catalog", str(overlay)])
    one_line_exit_2(result, "contains control characters")
    assert "\x1b" not in result.stderr


# --- 11: the Hub without a network fails fast ------------------------------------------------


def test_the_hub_without_network_fails_in_one_line_and_fast(runner, monkeypatch):
    import socket
    import sys

    had_hub = "huggingface_hub" in sys.modules

    def unreachable(*_args, **_kwargs):
        raise OSError(101, "Network is unreachable")

    monkeypatch.setattr(socket, "create_connection", unreachable)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    start = time.perf_counter()
    result = runner.invoke(app, ["models", "show", "hf:some-org/some-model"])
    assert time.perf_counter() - start < 3
    assert had_hub or "huggingface_hub" not in sys.modules  # the Hub client was never started
    one_line_exit_2(result, "cannot reach the Hugging Face Hub (huggingface.co: Network is")


# --- fuzzing: config.json and safetensors headers --------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
FIXTURE = HealthCheck.function_scoped_fixture
CONFIG_KEYS = [
    *TINY,
    "num_experts",
    "num_experts_per_tok",
    "sliding_window",
    "head_dim",
    "kv_lora_rank",
    "text_config",
]


@given(st.dictionaries(st.sampled_from(CONFIG_KEYS), JSON, max_size=8), st.booleans())
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_fuzzed_config_json_is_an_answer_or_a_clear_error(tmp_path, changes, keep_rest):
    config = {**TINY, **changes} if keep_rest else changes
    folder = tmp_path / "fuzz"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, allow_nan=True))
    with contextlib.suppress(InfersizeError):
        load_folder(folder)


ENTRY = st.fixed_dictionaries(
    {
        "dtype": st.sampled_from(["F32", "F16", "BF16", "I8", "Q9", ""]) | JSON,
        "shape": st.lists(st.integers(-4, 2**40), max_size=3) | JSON,
        "data_offsets": st.lists(st.integers(-8, 2**40), min_size=0, max_size=3) | JSON,
    }
)


@given(st.dictionaries(st.text(max_size=6), ENTRY | JSON, max_size=4) | JSON)
@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_fuzzed_safetensors_headers_are_read_or_refused(tmp_path, header):
    path = _header_file(tmp_path / "f.safetensors", header, b"\x00" * 64)
    try:
        tensors = read_safetensors_header(path)
    except CheckpointError:
        return
    assert all(0 <= t.nbytes <= 64 for t in tensors)


def test_a_fifo_never_blocks(tmp_path):
    """Opening a FIFO for reading blocks until a writer comes: inputs are opened non-blocking."""
    from infersize.files import InputFileError, read_input

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    outcome: list[object] = []
    worker = threading.Thread(target=lambda: outcome.append(_try(read_input, fifo)), daemon=True)
    worker.start()
    worker.join(timeout=5)
    assert outcome and isinstance(outcome[0], InputFileError)


def _try(fn, *args):
    try:
        return fn(*args)
    except Exception as exc:  # the test inspects which
        return exc
