""" "Would fit" proposes only what the engine loads and the GPU runs, and searches the weight
format and the KV dtype together: a 70B at batch 32 and 8k tokens on two H100s under vLLM fits
with FP8 weights and an FP8 KV cache (neither alone is enough), never with GGUF types."""

from __future__ import annotations

import json

import pytest

from infersize.cli import app

GGUF = {"q8_0", "q6_k", "q5_k_m", "q4_k_m", "q4_0", "q3_k_m", "q2_k"}
SEVENTY_B = [
    "spec",
    "--target",
    "llama-3.1-70b",
    "--draft",
    "llama-3.2-1b",
    "--gpu",
    "h100",
    "--tp",
    "2",
    "--batch-size",
    "32",
    "--context-length",
    "8192",
]


def spec(runner, *args: str) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_70b_batch_32_8k_fits_with_fp8_weights_and_fp8_kv(runner):
    data = spec(runner, *SEVENTY_B, "--engine", "vllm")
    assert data["fits"] is False
    assert (data["fitting_target_quant"], data["fitting_kv_dtype"]) == ("fp8", "fp8")
    # the proposal fits, and neither change alone does
    both = spec(
        runner, *SEVENTY_B, "--engine", "vllm", "--target-quant", "fp8", "--kv-dtype", "fp8"
    )
    assert both["fits"] is True
    for alone in (["--target-quant", "fp8"], ["--kv-dtype", "fp8"]):
        assert spec(runner, *SEVENTY_B, "--engine", "vllm", *alone)["fits"] is False
    text = runner.invoke(app, [*SEVENTY_B, "--engine", "vllm"]).output
    # the pool (3,035 tokens) holds 32 sequences of a few dozen tokens, not of 8k
    assert (
        "Would fit:            context up to 76 tokens at batch 32; no batch at 8,192 "
        "tokens; TP 4; target at fp8; KV cache at fp8" in text
    )


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
@pytest.mark.parametrize(
    "cell",
    [
        ("llama-3.1-70b", "1", "32", "8192"),
        ("llama-3.1-70b", "2", "64", "16384"),
        ("qwen2.5-72b", "2", "16", "32768"),
        ("llama-3.1-8b", "1", "256", "32768"),
    ],
)
def test_safetensors_engines_never_propose_gguf_types(runner, engine, cell):
    target, tp, batch, context = cell
    data = spec(
        runner,
        "spec",
        "--target",
        target,
        "--draft",
        "none",
        "--gpu",
        "h100",
        "--tp",
        tp,
        "--batch-size",
        batch,
        "--context-length",
        context,
        "--engine",
        engine,
    )
    assert data["fitting_target_quant"] not in GGUF
    assert data["fitting_kv_dtype"] not in {"q8_0", "q4_0"}
    if data["fitting_target_quant"] or data["fitting_kv_dtype"]:
        again = spec(
            runner,
            "spec",
            "--target",
            target,
            "--draft",
            "none",
            "--gpu",
            "h100",
            "--tp",
            tp,
            "--batch-size",
            batch,
            "--context-length",
            context,
            "--engine",
            engine,
            "--target-quant",
            data["fitting_target_quant"] or "auto",
            "--kv-dtype",
            data["fitting_kv_dtype"] or "fp16",
        )
        assert again["fits"] is True


def test_llama_cpp_proposes_gguf_types_and_its_own_kv_types(runner):
    data = spec(
        runner,
        "spec",
        "--target",
        "llama-3.1-8b",
        "--draft",
        "llama-3.2-1b",
        "--gpu",
        "4090",
        "--batch-size",
        "8",
        "--context-length",
        "32768",
        "--engine",
        "llama.cpp",
    )
    assert data["fitting_target_quant"] in GGUF
    assert data["fitting_kv_dtype"] in {None, "q8_0", "q4_0"}
