"""The command line through CliRunner: exact messages and exit codes (every mistake is exit 2 and
one `error:` line), plus one real subprocess run of the installed console script."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from infersize.cli import app
from tests.support.commands import SEED_ARGS


def run(runner, *args):
    return runner.invoke(app, list(args))


def spec_json(runner, *extra):
    result = run(runner, *SEED_ARGS, *extra, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_seed_example_prints_the_seed_panel_in_order(runner):
    result = run(runner, *SEED_ARGS)
    assert result.exit_code == 0, result.output
    labels = [
        "SPECULATIVE DECODING JOINT SIZER & LEVIATHAN SPEEDUP",
        "Target Model:",
        "Draft Model:",
        "Combined VRAM:",
        "Acceptance Rate α:",
        "Draft Length K:",
        "Latency Ratio γ:",
        "Leviathan Speedup:",
    ]
    positions = [result.stdout.find(label) for label in labels]
    assert -1 not in positions and positions == sorted(positions)
    assert "qwen2.5-7b (fp16) -> 14.41 GiB VRAM" in result.stdout
    assert "Safe on NVIDIA A100 80GB SXM" in result.stdout
    assert "note: 'a100' means the NVIDIA A100 80GB SXM" in result.stdout
    for after in ("Expected tokens/step:", "Optimal K:", "Break-even α:", "Memory (GiB)"):
        assert after in result.stdout


def test_seed_speedups_with_given_latency_ratio(runner):
    # the seed example: α 0.72, K 4, γ 12.4 -> Leviathan's Theorem 3.8 2.18x, the linear
    # formula 2.77x (tests/test_speculative.py computes both by hand)
    lev = spec_json(runner, "--latency-ratio", "12.4")
    lin = spec_json(runner, "--latency-ratio", "12.4", "--speedup-model", "linear")
    assert lev["speedup"] == pytest.approx(2.177853, abs=1e-6)
    assert lin["speedup"] == pytest.approx(2.765057, abs=1e-6)
    assert lev["speedup_model"] == "leviathan" and lin["speedup_model"] == "linear"
    assert any("the linear formula" in n for n in lin["notes"])
    text = run(runner, *SEED_ARGS, "--latency-ratio", "12.4").stdout
    assert "Latency Ratio γ:    12.4x\n" in text
    assert "Leviathan Speedup:  2.18x wall-clock acceleration" in text


def test_json_has_the_stable_keys(runner):
    data = spec_json(runner)
    for key in (
        "target",
        "draft",
        "overhead_bytes",
        "combined_bytes",
        "gpu",
        "utilization",
        "fits",
        "verdict",
        "acceptance_rate",
        "draft_k",
        "latency_ratio",
        "expected_tokens_per_step",
        "speedup",
        "speedup_model",
        "optimal_k",
        "speedup_at_optimal_k",
        "break_even_acceptance_rate",
        "baseline_tokens_per_s",
        "speculative_tokens_per_s",
        "baseline_ms_per_token",
        "speculative_ms_per_token",
        "usd_per_mtok",
        "crossover_batch_size",
    ):
        assert key in data, key
    for side in ("target", "draft"):
        for key in (
            "model",
            "quant",
            "params",
            "weights_bytes",
            "kv_cache_bytes",
            "workspace_bytes",
            "total_bytes",
        ):
            assert key in data[side], (side, key)
    assert data["target"]["weights_bytes"] == 15_231_233_024
    assert data["gpu"]["id"] == "a100-80gb-sxm"
    # the largest batch that fits: an exact integer (checked against brute force in test_limits)
    assert data["max_fitting_batch_size"] == 233
    parts = sum(data[s]["total_bytes"] for s in ("target", "draft")) + data["overhead_bytes"]
    assert data["combined_bytes"] == pytest.approx(parts, abs=2)


def test_vllm_engine_keys(runner):
    data = spec_json(runner, "--engine", "vllm", "--gpu-memory-utilization", "0.9")
    assert data["kv_pool_bytes"] > 0
    assert data["max_concurrent_sequences"] == pytest.approx(
        data["kv_pool_tokens"] / 4096, rel=1e-3
    )


def test_vllm_engine_prints_the_pool_as_vllm_logs_it(runner):
    args = (
        "spec",
        "--target",
        "llama-3.1-8b",
        "--draft",
        "llama-3.2-1b",
        "--gpu",
        "h100",
        "--engine",
        "vllm",
    )
    result = run(runner, *args)
    assert result.exit_code == 0, result.output
    text = result.stdout
    for line in (
        "GPU KV cache size:",
        "Maximum concurrency:",
        "for 4,096 tokens per request",
        "activation peak (profiling 8192 tokens, 1024 sequences, ",
        "of it the drafter's)",
        "non-torch memory",
        "CUDA graphs (estimated before the pool)",
        "vLLM 0.33.0 rules",
    ):
        assert line in text, line
    data = json.loads(run(runner, *args, "--json").stdout)
    assert data["vllm_release"] == "0.33.0" and data["vllm_sampler"] == "triton"
    assert data["max_num_batched_tokens"] == 8192 and data["max_num_seqs"] == 1024
    pytorch = json.loads(run(runner, *args, "--vllm-sampler", "pytorch", "--json").stdout)
    assert pytorch["activation_peak_bytes"] > data["activation_peak_bytes"]
    assert pytorch["kv_pool_tokens"] < data["kv_pool_tokens"]


def test_vllm_settings_are_checked(runner):
    base = (
        "spec",
        "--target",
        "llama-3.1-8b",
        "--draft",
        "none",
        "--gpu",
        "h100",
        "--engine",
        "vllm",
    )
    result = run(runner, *base, "--vllm-sampler", "sorted")
    assert result.exit_code == 2
    assert result.stderr == (
        "error: unknown vllm_sampler 'sorted': choose triton, pytorch, flashinfer\n"
    )
    result = run(runner, *base, "--max-num-seqs", "0")
    assert result.exit_code == 2
    assert result.stderr == "error: --max-num-seqs must be in 1..16,777,216 sequences, got 0\n"


def test_a_speculator_head_is_only_a_draft(runner):
    result = run(
        runner, "spec", "--target", "eagle-llama3.1-8b", "--draft", "none", "--gpu", "h100"
    )
    assert result.exit_code == 2
    assert result.stderr == (
        "error: eagle-llama3.1-8b is a speculator head: give it as the draft of a llama-3.1 model\n"
    )
    result = run(
        runner, "spec", "--target", "qwen3-8b", "--draft", "eagle-llama3.1-8b", "--gpu", "h100"
    )
    assert result.exit_code == 2
    assert "does not fit qwen3-8b (hidden 4096, vocabulary 151936)" in result.stderr


def test_draft_none_sizes_the_target_alone(runner):
    result = run(runner, *SEED_ARGS[:6], "none", *SEED_ARGS[7:], "--json")
    data = json.loads(result.stdout)
    assert data["draft"] is None and data["speedup"] == 1.0
    seed = spec_json(runner)
    assert data["combined_bytes"] < seed["combined_bytes"]
    assert run(runner, *SEED_ARGS[:6], "none", *SEED_ARGS[7:]).exit_code == 0


def test_units_gb_labels_decimal_gigabytes(runner):
    text = run(runner, *SEED_ARGS, "--units", "gb").stdout
    assert "qwen2.5-7b (fp16) -> 15.47 GB VRAM" in text


def test_tensor_parallel_reports_per_gpu(runner):
    data = spec_json(runner, "--tp", "2")
    assert data["gpu"]["count"] == 2 and data["target"]["tp"] == 2
    assert data["target"]["weights_bytes"] < 15_231_233_024 * 0.51


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--target", "qwen9-999b"],
            "error: unknown model 'qwen9-999b': did you mean 'qwen3.5-9b', 'qwen3-8b', 'qwen3-4b'?",
        ),
        (["--gpu", "a10o"], "error: unknown gpu 'a10o': did you mean 'a10', 'a10g', 'a100'?"),
        (["--acceptance-rate", "1.5"], "error: --acceptance-rate must be in [0, 1], got 1.5"),
        (["--acceptance-rate", "-0.1"], "error: --acceptance-rate must be in [0, 1], got -0.1"),
        (["--acceptance-rate", "nan"], "error: --acceptance-rate must be a finite number, got nan"),
        (["--draft-k", "0"], "error: --draft-k must be at least 1, got 0"),
        (
            ["--latency-ratio", "0"],
            "error: --latency-ratio must be in [0.01, 1e6] (target step / draft step), got 0",
        ),
        (
            ["--latency-ratio", "-3"],
            "error: --latency-ratio must be in [0.01, 1e6] (target step / draft step), got -3",
        ),
        (["--context-length", "0"], "error: --context-length must be at least 1, got 0"),
        (["--batch-size", "-1"], "error: --batch-size must be at least 1, got -1"),
        (
            ["--target-quant", "int3"],
            "error: unknown precision 'int3': did you mean 'int8', 'int4', 'awq-int4'?",
        ),
        (
            ["--kv-dtype", "fp7"],
            "error: unknown kv dtype 'fp7': did you mean 'fp8', 'fp32', 'fp16'?",
        ),
        (
            ["--engine", "tgi"],
            "error: unknown engine 'tgi': choose plain, vllm, vllm-0.15, llama.cpp, sglang, "
            "sglang-0.4, sglang-0.5.9, trtllm",
        ),
        (
            ["--speedup-model", "magic"],
            "error: unknown speedup model 'magic': choose leviathan, roofline, linear",
        ),
        (
            ["--tp", "3"],
            "error: qwen2.5-7b: tensor parallel 3 does not divide its 28 attention heads",
        ),
        (["--units", "mb"], "error: --units must be gib or gb, got 'mb'"),
        (
            ["--draft-k", "x"],
            "error: Invalid value for '--draft-k' / '--speculative-num-steps': Input should be a "
            "valid integer, unable to "
            "parse string as an integer",
        ),
        (
            ["--engine", "vllm", "--gpu-memory-utilization", "1.5"],
            "error: --gpu-memory-utilization must be in (0, 1], got 1.5",
        ),
        (["--overhead-gib", "-1"], "error: --overhead-gib must be in [0, 1024] GiB, got -1"),
    ],
)
def test_bad_input_one_line_exit_2(runner, args, message):
    argv = list(SEED_ARGS)
    for flag, value in zip(args[::2], args[1::2], strict=True):
        if flag in argv:
            argv[argv.index(flag) + 1] = value
        else:
            argv += [flag, value]
    result = run(runner, *argv)
    assert result.exit_code == 2
    assert result.stderr == message + "\n"
    assert result.stdout == ""


def test_missing_catalog_overlay(runner, tmp_path):
    missing = tmp_path / "nope.yaml"
    result = run(runner, *SEED_ARGS, "--catalog", str(missing))
    assert result.exit_code == 2
    assert result.stderr == f"error: {missing}: no such file\n"


def test_missing_required_option(runner):
    result = run(runner, "spec", "--draft", "none", "--gpu", "a100")
    assert result.exit_code == 2
    assert result.stderr == "error: Missing option '--target'.\n"


def test_debug_shows_the_traceback(runner):
    result = run(runner, *SEED_ARGS, "--draft-k", "0", "--debug")
    assert result.exit_code != 0
    assert result.exception is not None and "draft_k" in str(result.exception)


def test_models_and_gpus_commands(runner):
    models = json.loads(run(runner, "models", "list", "--json").stdout)
    assert len(models) >= 31
    shown = json.loads(run(runner, "models", "show", "qwen2.5-7b", "--json").stdout)
    assert shown["id"] == "qwen2.5-7b" and shown["hf_repo"] == "Qwen/Qwen2.5-7B"
    assert shown["params"] == 7_615_616_512
    moe = json.loads(run(runner, "models", "show", "mixtral-8x7b", "--json").stdout)
    assert moe["active_params"] < moe["params"]
    gpus = json.loads(run(runner, "gpus", "list", "--json").stdout)
    assert len(gpus) >= 20
    h100 = json.loads(run(runner, "gpus", "show", "h100", "--json").stdout)
    assert h100["id"] == "h100-sxm" and h100["bandwidth_bytes_per_s"] == 3.35e12
    assert h100["memory_bytes"] == 81090 * 2**20  # torch total_memory 81,090 MiB
    assert run(runner, "models", "list").exit_code == 0
    assert "NVIDIA H100" in run(runner, "gpus", "show", "h100").stdout
    bad = run(runner, "gpus", "show", "h1000")
    assert bad.exit_code == 2 and bad.stderr.startswith("error: unknown gpu 'h1000'")


def test_version(runner):
    result = run(runner, "--version")
    assert result.exit_code == 0 and result.stdout.startswith("infersize ")


def test_real_subprocess_run():
    """The installed command, or the same app through the interpreter where it is not on PATH."""
    exe = shutil.which("infersize")
    cmd = [exe] if exe else [sys.executable, "-c", "from infersize.cli import app; app()"]
    done = subprocess.run(
        [*cmd, *SEED_ARGS, "--latency-ratio", "12.4", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["speedup"] == pytest.approx(2.1779, abs=1e-4)
    bad = subprocess.run(
        [*cmd, *SEED_ARGS[:-1], "0"], capture_output=True, text=True, timeout=60, check=False
    )
    assert bad.returncode == 2 and bad.stderr == "error: --draft-k must be at least 1, got 0\n"
    assert "Traceback" not in bad.stderr


def test_spec_start_up_imports_no_heavy_modules():
    """`infersize spec` must not import polars, joblib, scipy or pyarrow (start-up time): the
    sweep's and the fits' libraries are imported where they are used. (Pydantic is Typer's:
    Typer 0.29 converts every option value through a Pydantic adapter.)"""
    code = (
        "import sys\nfrom infersize.cli import app\n"
        "try:\n    app(" + repr([*SEED_ARGS, "--json"]) + ")\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('polars', 'joblib', 'loky', 'scipy', 'pyarrow') "
        "if m in sys.modules]\n"
        "print('HEAVY', heavy, file=sys.stderr)"
    )
    for _ in range(2):  # the first run may fill the catalog cache
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
        )
    assert "HEAVY []" in done.stderr, done.stderr


def test_bench_runs_and_reports_a_ratio(runner):
    result = run(runner, "bench", "--loop-cells", "50")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("sweep end to end (plan, score, reduce, write tables; --jobs 1): ")
    assert "cells/s" in lines[1] and lines[2].startswith(
        "ratio (end to end over the loop's best): "
    )


def test_alpha_from_mean_acceptance_length(runner):
    result = run(runner, "alpha", "--mean-accepted-tokens", "3.28", "--draft-k", "4", "--json")
    data = json.loads(result.stdout)
    a = data["acceptance_rate"]
    assert (1 - a**5) / (1 - a) == pytest.approx(3.28, abs=1e-9)
    assert data["vllm_acceptance_rate"] == pytest.approx(0.57)
    back = json.loads(
        run(runner, "alpha", "--acceptance-rate", str(a), "--draft-k", "4", "--json").stdout
    )
    assert back["mean_accepted_tokens"] == pytest.approx(3.28)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--mean-accepted-tokens", "7", "--draft-k", "4"],
            "error: --mean-accepted-tokens must be in [1, 5] at this K, got 7",
        ),
        (
            ["--vllm-acceptance-rate", "1.2", "--draft-k", "4"],
            "error: --vllm-acceptance-rate must be in [0, 1] at this K, got 1.2",
        ),
        (
            ["--system-efficiency", "0.1", "--draft-k", "4"],
            "error: --system-efficiency must be in [0.2, 1] at this K, got 0.1",
        ),
        (
            ["--draft-k", "4"],
            "error: give exactly one of --mean-accepted-tokens, "
            "--vllm-acceptance-rate, --system-efficiency, --acceptance-rate",
        ),
        (
            ["--acceptance-rate", "0.5", "--draft-k", "0"],
            "error: --draft-k must be at least 1, got 0",
        ),
    ],
)
def test_alpha_bad_input(runner, args, message):
    result = run(runner, "alpha", *args)
    assert (result.exit_code, result.stderr) == (2, message + "\n")


def test_default_speedup_model_is_batch_aware(runner):
    """Without --latency-ratio the default prices verification at the batch asked (roofline);
    Leviathan's batch-1 theorem is what --latency-ratio (or --speedup-model leviathan) gives.
    Llama-3.1-70B TP2 + Llama-3.2-1B on H100 at batch 64: the batch-1 theorem overstates the
    gain that verification at batch 64 leaves (vLLM reports speculation turning slower than
    plain decoding from batch 128 for this pair; docs/reference/measurements.md)."""
    base = [
        "spec",
        "--target",
        "llama-3.1-70b",
        "--target-quant",
        "fp8",
        "--draft",
        "llama-3.2-1b",
        "--gpu",
        "h100",
        "--tp",
        "2",
        "--context-length",
        "2048",
        "--batch-size",
        "64",
        "--acceptance-rate",
        "0.8",
        "--json",
    ]
    for k in ("4", "8"):
        default = json.loads(run(runner, *base, "--draft-k", k).stdout)
        roofline = json.loads(
            run(runner, *base, "--draft-k", k, "--speedup-model", "roofline").stdout
        )
        leviathan = json.loads(
            run(runner, *base, "--draft-k", k, "--speedup-model", "leviathan").stdout
        )
        assert default["speedup_model"] == "roofline"
        assert default["speedup"] == roofline["speedup"] < leviathan["speedup"] - 0.5
    given = json.loads(run(runner, *base, "--draft-k", "4", "--latency-ratio", "10").stdout)
    assert given["speedup_model"] == "leviathan"
    text = run(runner, *base[:-1], "--draft-k", "4").stdout
    assert "Leviathan Speedup:" in text and "(roofline, batch 64)" in text
