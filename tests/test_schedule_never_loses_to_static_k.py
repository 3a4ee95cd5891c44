"""On three deployments (the README's Llama-3.1-70B FP8 + Llama-3.2-1B on 2x H100, DeepSeek-V3
with its MTP layer on 8x H200, Llama-3.1-8B with its EAGLE-3 head) and each engine, the
schedule never loses to the one static K in any bucket, and K rises with the batch only where
a note gives the step model's reason (a mixture of experts reads more of its experts the more
tokens a step holds, so a longer draft costs less at larger batches)."""

from __future__ import annotations

import itertools
import json

import pytest

from infersize.cli import app

DEPLOYMENTS = {
    "llama-3.1-70b-fp8+1b": [
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
    ],
    "deepseek-v3-mtp": [
        "--target",
        "deepseek-v3",
        "--method",
        "mtp",
        "--gpu",
        "h200",
        "--tp",
        "8",
        "--acceptance-rate",
        "0.8",
    ],
    "llama-3.1-8b-eagle3": ["--target", "llama-3.1-8b", "--method", "eagle3", "--gpu", "h100"],
}
DENSE = ("llama-3.1-70b-fp8+1b", "llama-3.1-8b-eagle3")


def _schedule(runner, *args):
    result = runner.invoke(app, ["schedule", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


CASES = [
    (name, engine, context)
    for name in DEPLOYMENTS
    for engine in ("vllm", "trtllm", "sglang")
    for context in ("512", "4096")
]


@pytest.mark.parametrize(("name", "engine", "context"), CASES, ids="-".join)
def test_k_falls_with_the_batch_unless_the_model_says_why(runner, name, engine, context):
    data = _schedule(runner, *DEPLOYMENTS[name], "--engine", engine, "--context-length", context)
    buckets = data["buckets"]
    assert buckets[0]["min_batch"] == 1
    for a, b in itertools.pairwise(buckets):
        assert b["min_batch"] == a["max_batch"] + 1
        if b["draft_k"] > a["draft_k"]:
            assert name not in DENSE, (a, b)
            rise = f"K rises from {a['draft_k']} to {b['draft_k']} at batch {b['min_batch']:,}: "
            assert any(n.startswith(rise) and "experts" in n for n in data["notes"]), rise


@pytest.mark.parametrize(("name", "engine", "context"), CASES, ids="-".join)
def test_the_schedule_is_at_least_as_fast_as_the_best_static_k_in_every_bucket(
    runner, name, engine, context
):
    data = _schedule(runner, *DEPLOYMENTS[name], "--engine", engine, "--context-length", context)
    for bucket in data["buckets"]:
        assert bucket["speedup"] >= bucket["static_best_speedup"], bucket
        assert bucket["static_best_k"] == data["buckets"][0]["static_best_k"]


def test_deepseek_rises_for_its_experts_and_tensorrt_llm_flattens_the_rise(runner):
    """The MoE target's schedule rises at small batches on vLLM; TensorRT-LLM, whose smallest
    batch key must map to max_draft_len, runs no later range above its first (here one K
    serves every batch). At an α of 0.6: at 0.8 one long draft (K 6) pays at every batch, the
    fixed cost of DeepSeek's 58 MoE layers a pass outweighing the experts a longer verify
    touches."""
    args = [*DEPLOYMENTS["deepseek-v3-mtp"], "--context-length", "4096", "--acceptance-rate", "0.6"]
    vllm = _schedule(runner, *args)
    ks = [b["draft_k"] for b in vllm["buckets"]]
    assert ks != sorted(ks, reverse=True)
    trt = _schedule(runner, *args, "--engine", "trtllm")
    ks = [b["draft_k"] for b in trt["buckets"]]
    assert ks == sorted(ks, reverse=True)
    rose = any(n.startswith("TensorRT-LLM's smallest batch key must map") for n in trt["notes"])
    assert rose or len(ks) == 1
