"""`spec`, a sweep and `capacity` with `--engine sglang` and `--engine trtllm`: the pool as each
engine logs it, SGLang's flag names, draft trees, --acceptance-length, and each mistake as one
line with exit code 2."""

from __future__ import annotations

import json

import polars as pl
import pytest

from infersize.cli import app
from infersize.core import speculative as sd
from infersize.sweep.config import load_sweep
from infersize.sweep.plan import build_plan
from infersize.sweep.run import RunOptions, run_sweep

PAIR = [
    "spec",
    "--target",
    "llama-3.1-8b",
    "--draft",
    "eagle3-llama3.1-8b",
    "--gpu",
    "h100",
    "--acceptance-rate",
    "0.7",
]
TREE = ["--draft-k", "5", "--eagle-topk", "4", "--num-draft-tokens", "8"]


def spec_json(runner, *args: str) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.stderr
    data: dict = json.loads(result.stdout)
    return data


def test_spec_reports_sglangs_pool_as_sglang_logs_it(runner):
    data = spec_json(runner, *PAIR, "--engine", "sglang", *TREE)
    assert data["engine"] == "sglang" and data["engine_release"] == "0.5.6"
    assert data["max_total_num_tokens"] == data["kv_pool_tokens"] > 300_000
    assert data["mem_fraction_static"] == 0.809  # 0.834 less the 2 GiB SGLang keeps for a head
    assert (data["chunked_prefill_size"], data["max_running_requests"]) == (8192, 48)
    assert (data["eagle_topk"], data["num_draft_tokens"]) == (4, 8)
    assert data["vllm_release"] is None and data["max_tokens_in_paged_kv_cache"] is None
    panel = runner.invoke(app, [*PAIR, "--engine", "sglang", *TREE]).stdout
    assert "SGLang 0.5.6 rules, mem_fraction_static 0.809 of the free memory" in " ".join(
        panel.split()
    )
    assert f"KV Cache is allocated: #tokens: {data['max_total_num_tokens']:,}" in panel
    assert "a tree of width 4 verifying 8 tokens" in panel


def test_spec_reports_tensorrt_llms_cache_as_it_logs_it(runner):
    data = spec_json(runner, *PAIR, "--engine", "trtllm", "--max-num-tokens", "4096")
    assert data["max_tokens_in_paged_kv_cache"] == data["kv_pool_tokens"]
    assert data["max_tokens_in_paged_kv_cache"] % 32 == 0  # whole blocks of 32 tokens
    assert (data["max_num_tokens"], data["max_batch_size"]) == (4096, 2048)
    assert data["kv_cache_free_gpu_memory_fraction"] == 0.9
    panel = runner.invoke(app, [*PAIR, "--engine", "trtllm"]).stdout
    assert "Max tokens in KV cache:" in panel


def test_sglangs_flag_names_are_the_same_settings(runner):
    short = spec_json(runner, *PAIR, "--engine", "sglang", *TREE)
    long = spec_json(
        runner,
        *PAIR,
        "--engine",
        "sglang",
        "--speculative-num-steps",
        "5",
        "--speculative-eagle-topk",
        "4",
        "--speculative-num-draft-tokens",
        "8",
    )
    assert long == short


def test_a_tree_verifies_its_tokens_and_accepts_per_its_width(runner):
    """At the same α, a tree of depth 5 verifying 8 tokens prices the target's pass at 8 tokens
    (a chain at K = 7) and accepts what core/tree.py's selection gives."""
    tree = spec_json(runner, *PAIR, "--engine", "sglang", *TREE, "--batch-size", "32")
    chain = spec_json(runner, *PAIR, "--engine", "sglang", "--draft-k", "5", "--batch-size", "32")
    assert tree["expected_tokens_per_step"] != pytest.approx(chain["expected_tokens_per_step"])
    assert chain["expected_tokens_per_step"] == pytest.approx(
        float(sd.expected_tokens(0.7, 5)), rel=1e-12
    )
    assert tree["speedup"] < chain["speedup"]  # more to verify, and here fewer accepted


def test_an_acceptance_length_is_taken_at_the_k_and_tree_asked(runner):
    """E = 2.5 at K = 4 on a chain is Leviathan's α of E(α, 4) = 2.5."""
    data = spec_json(runner, *PAIR[:-2], "--acceptance-length", "2.5", "--draft-k", "4")
    assert data["acceptance_rate"] == pytest.approx(float(sd.alpha_for_expected_tokens(2.5, 4)))
    assert data["expected_tokens_per_step"] == pytest.approx(2.5, abs=1e-9)
    tree = spec_json(runner, *PAIR[:-2], "--engine", "sglang", *TREE, "--acceptance-length", "3")
    assert tree["expected_tokens_per_step"] == pytest.approx(3.0, abs=1e-6)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--engine", "sglang", "--eagle-topk", "65", "--num-draft-tokens", "8"],
            "error: --eagle-topk must be in 1..64, got 65",
        ),
        (
            ["--engine", "sglang", "--eagle-topk", "4"],
            "error: --num-draft-tokens is needed for a tree (--eagle-topk 4): the tokens the "
            "target verifies per sequence, the root included",
        ),
        (
            ["--engine", "vllm", *TREE],
            "error: --eagle-topk above 1 drafts a tree, which engine vllm does not: SGLang "
            "(sglang) and TensorRT-LLM (trtllm) do",
        ),
        (
            ["--num-draft-tokens", "9"],
            "error: --num-draft-tokens must be --draft-k + 1 = 5 for a chain (--eagle-topk 1), got "
            "9: leave it out, or draft a tree",
        ),
        (
            ["--engine", "vllm", "--mem-fraction-static", "0.8"],
            "error: --mem-fraction-static is a setting of sglang: it does not apply to engine vllm",
        ),
        (
            ["--engine", "sglang", "--kv-cache-free-gpu-memory-fraction", "0.8"],
            "error: --kv-cache-free-gpu-memory-fraction is a setting of trtllm: it does not apply "
            "to engine sglang",
        ),
        (
            ["--engine", "trtllm", "--max-batch-size", "0"],
            "error: --max-batch-size must be in 1..16,777,216 sequences, got 0",
        ),
        (
            ["--acceptance-length", "2.5"],
            "error: --acceptance-length cannot be given with --acceptance-rate or "
            "--acceptance-rates: one of the three",
        ),
        (
            ["--engine", "sglang", *TREE, "--speedup-model", "linear"],
            "error: --eagle-topk above 1 drafts a tree, which speedup model linear cannot price: "
            "it takes one α",
        ),
    ],
)
def test_engine_and_tree_mistakes_are_one_line_and_exit_2(runner, extra, message):
    result = runner.invoke(app, [*PAIR, *extra])
    assert result.exit_code == 2
    assert result.stderr == message + "\n"


def test_an_acceptance_length_a_tree_cannot_reach_is_refused(runner):
    result = runner.invoke(app, [*PAIR[:-2], "--acceptance-length", "9", "--draft-k", "4"])
    assert result.exit_code == 2
    assert result.stderr == (
        "error: --acceptance-length must be in [1, 5] at --draft-k 4 (1 + accepted drafts per "
        "step), got 9\n"
    )


SWEEP = """\
targets: [llama-3.1-8b]
drafts: [eagle3-llama3.1-8b]
gpus: [h100]
context_lengths: [4096]
batch_sizes: [1, 32]
acceptance_rates: [0.7]
draft_k: [1, 2, 3, 4, 5, 6]
engine: sglang
eagle_topk: 4
num_draft_tokens: 8
"""


def test_a_sglang_tree_sweep_row_equals_spec_at_its_cell(runner, tmp_path):
    path = tmp_path / "sglang.yaml"
    path.write_text(SWEEP)
    config, doc = load_sweep(path)
    run_sweep(build_plan(config, doc), tmp_path / "out", RunOptions(jobs=1))
    row = (
        pl.read_parquet(tmp_path / "out" / "best_pairs.parquet")
        .filter(pl.col("batch_size") == 32)
        .row(0, named=True)
    )
    assert row["engine"] == "sglang"
    data = spec_json(
        runner,
        *PAIR,
        "--engine",
        "sglang",
        "--eagle-topk",
        "4",
        "--num-draft-tokens",
        "8",
        "--draft-k",
        str(row["optimal_k"]),
        "--batch-size",
        "32",
        "--max-k",
        "6",
    )
    assert data["kv_pool_tokens"] == row["kv_pool_tokens"]
    assert data["speedup"] == pytest.approx(row["speedup"], rel=1e-12)
    assert data["expected_tokens_per_step"] == pytest.approx(row["expected_tokens_per_step"])


def test_a_sweep_refuses_a_tree_on_an_engine_without_one(tmp_path, runner):
    path = tmp_path / "bad.yaml"
    path.write_text(SWEEP.replace("engine: sglang", "engine: vllm"))
    result = runner.invoke(app, ["sweep", "validate", str(path)])
    assert result.exit_code == 2
    assert "eagle_topk above 1 drafts a tree, which engine vllm does not" in result.stderr


CAPACITY = [
    "capacity",
    "--target",
    "llama-3.1-8b",
    "--draft",
    "eagle3-llama3.1-8b",
    "--gpu",
    "h100",
    "--acceptance-rate",
    "0.7",
    "--draft-k",
    "3",
    "--requests",
    "300",
    "--input-tokens",
    "512",
    "--output-tokens",
    "128",
    "--request-rate",
    "4",
    "--json",
]


@pytest.mark.parametrize("engine", ["sglang", "trtllm"])
def test_capacity_serves_within_each_engines_limits(runner, engine):
    result = runner.invoke(app, [*CAPACITY, "--engine", engine])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    base, spec = data["baseline"], data["speculative"]
    if engine == "sglang":  # chunked_prefill_size 8192; 48 running requests when speculating
        assert (base["max_num_batched_tokens"], spec["max_num_seqs"]) == (8192, 48)
        assert "scheduled by SGLang's rules" in " ".join(data["notes"])
    else:  # max_num_tokens 8192, max_batch_size 2048 (2048 // (1 + 3) when verifying 4 tokens)
        assert (base["max_num_batched_tokens"], base["max_num_seqs"]) == (8192, 2048)
        assert "never preempting" in " ".join(data["notes"])
    assert spec["tpot_ms"]["p50"] < base["tpot_ms"]["p50"]


def test_capacity_serves_a_tree(runner):
    result = runner.invoke(
        app, [*CAPACITY, "--engine", "sglang", "--eagle-topk", "4", "--num-draft-tokens", "8"]
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["speculative"]["draft_k"] == 3


@pytest.mark.parametrize("engine", ["sglang", "trtllm"])
def test_the_panel_names_no_vllm_entry_point_for_another_engine(runner, engine):
    """`vllm serve` or LLM(...) is vLLM's choice; the other engines' panels do not print it."""
    result = runner.invoke(app, [*PAIR, "--engine", engine])
    assert result.exit_code == 0, result.output
    assert "entry point" not in result.output
    vllm = runner.invoke(app, [*PAIR, "--engine", "vllm"])
    assert "vLLM entry point:     `vllm serve`" in vllm.output
