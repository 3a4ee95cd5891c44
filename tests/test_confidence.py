"""How far a decode speed can be trusted: one rule (core/confidence.py) for `spec` and the
sweep's `confidence` column. A MoE step that selects fewer experts than a layer holds is
unvalidated: vLLM's Qwen3-30B-A3B on an A100 at batch 1 decodes at 104 tokens/s (TPOT 9.6 ms,
https://github.com/tenstorrent/tt-inference-server/issues/340) where the model says 125, and
SGLang 0.5.8's GLM-4.6 on 8 x B200 at 14.93 ms a token where it says 11.8
(https://gist.github.com/BenHamm/78563d0d0a08d7cb61b4737392633384)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from infersize.cli import app
from infersize.core.confidence import decode_confidence


@given(
    experts=st.integers(1, 512),
    per_token=st.integers(1, 16),
    batch=st.integers(1, 4096),
)
def test_low_exactly_while_the_batch_selects_fewer_experts_than_a_layer_holds(
    experts, per_token, batch
):
    level = str(decode_confidence(experts, per_token, batch))
    assert level == ("low" if batch * per_token < experts else "high")
    assert str(decode_confidence(0, 0, batch)) == "high"  # dense models


def test_vectorised_over_rows():
    levels = decode_confidence(np.array([256, 256, 0]), np.array([8, 8, 0]), np.array([1, 32, 1]))
    assert levels.tolist() == ["low", "high", "high"]


def test_spec_prints_the_caveat_for_moe_at_batch_1(runner):
    args = [
        "spec",
        "--target",
        "deepseek-v3",
        "--method",
        "mtp",
        "--gpu",
        "h200",
        "--tp",
        "8",
        "--engine",
        "vllm",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert (
        "note: confidence low: a MoE decode step at batch 1 selects at most 8 of 256 experts a "
        "layer, where what bounds it (expert dispatch, router, kernel launches) is priced only "
        "as a fixed cost per MoE layer fitted to SGLang's public runs (an architecture's own "
        "under SGLang where its runs set one, else one pooled cost, which vLLM and "
        "TensorRT-LLM take for all); SGLang's one-client steps on 8 x B200 take from about the "
        "time its preset says (gpt-oss-120b, Qwen3-235B) to a quarter more (GLM-4.6), so treat "
        "the speeds as estimates either way"
    ) in result.output
    wide = json.loads(runner.invoke(app, [*args, "--batch-size", "32", "--json"]).stdout)
    assert wide["confidence"] == "high"
    assert not any(n.startswith("confidence low") for n in wide["notes"])
    dense = runner.invoke(
        app,
        ["spec", "--target", "llama-3.1-8b", "--draft", "llama-3.2-1b", "--gpu", "h100", "--json"],
    )
    assert json.loads(dense.stdout)["confidence"] == "high"


SWEEP = """\
name: c
pairs:
  - {target: qwen3-30b-a3b, draft: qwen3-0.6b, acceptance_rates: [0.7]}
  - {target: qwen3-8b, draft: qwen3-0.6b, acceptance_rates: [0.7]}
gpus: [h100]
context_lengths: [4096]
batch_sizes: [1, 8, 16, 64]
draft_k: {start: 1, stop: 4, step: 1}
"""


def test_the_sweep_column_follows_spec(tmp_path, runner):
    (tmp_path / "c.yaml").write_text(SWEEP)
    out = tmp_path / "out"
    result = runner.invoke(app, ["sweep", "run", str(tmp_path / "c.yaml"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = [
        row
        for table in ("best_pairs", "frontier")
        for row in pq.read_table(out / f"{table}.parquet").to_pylist()
    ]
    levels = {(r["target"], r["batch_size"]): r["confidence"] for r in rows}
    # Qwen3-30B-A3B: 128 experts, 8 per token, so batch 16 reads them all
    assert levels[("qwen3-30b-a3b", 1)] == levels[("qwen3-30b-a3b", 8)] == "low"
    assert levels[("qwen3-30b-a3b", 16)] == "high"
    assert {level for (target, _), level in levels.items() if target == "qwen3-8b"} == {"high"}
    for (target, batch), level in levels.items():
        spec = runner.invoke(
            app,
            [
                "spec",
                "--target",
                target,
                "--draft",
                "qwen3-0.6b",
                "--gpu",
                "h100",
                "--batch-size",
                str(batch),
                "--acceptance-rate",
                "0.7",
                "--json",
            ],
        )
        assert json.loads(spec.stdout)["confidence"] == level


@pytest.mark.parametrize(
    ("target", "engine", "said"),
    [
        (
            "qwen3-235b-a22b",
            "sglang",
            "sglang prices each of qwen3-235b-a22b's 94 MoE layers at a fixed 35 us a pass beside "
            "the expert weights it reads: qwen3_moe's own, fitted to SGLang's public runs of it "
            "on 8 x B200",
        ),
        (
            "gpt-oss-120b",
            "sglang",
            "sglang prices each of gpt-oss-120b's 36 MoE layers at a fixed 30 us a pass beside the "
            "expert weights it reads: gpt_oss's own, fitted to SGLang's public runs of it one "
            "request at a time on 4 x B200 and 8 x H100",
        ),
        (
            "minimax-m2",
            "sglang",
            "sglang prices each of minimax-m2's 62 MoE layers at a fixed 65 us a pass beside the "
            "expert weights it reads: the cost pooled over SGLang's public runs of deepseek_v3, "
            "glm4_moe, qwen3_moe on 8 x B200 (no run of minimax_m2 set its own)",
        ),
        (
            "qwen3-235b-a22b",
            "vllm",
            "vllm prices each of qwen3-235b-a22b's 94 MoE layers at a fixed 65 us a pass beside "
            "the expert weights it reads: the cost pooled over SGLang's public runs of "
            "deepseek_v3, glm4_moe, qwen3_moe on 8 x B200 (vllm takes it for every architecture)",
        ),
    ],
)
def test_spec_says_whose_moe_layer_cost_prices_the_target(runner, target, engine, said):
    """An architecture with fit rows of its own (Qwen3-MoE, gpt-oss under SGLang) is priced at
    its own MoE layer cost, the rest (MiniMax-M2; every architecture under vLLM) at the pooled
    one: `spec` says which and whose runs set it, so a planner knows whether public runs of the
    model's class priced it."""
    args = ["spec", "--target", target, "--draft", "none", "--gpu", "b200", "--tp", "8"]
    result = runner.invoke(app, [*args, "--engine", engine, "--json"])
    assert result.exit_code == 0, result.output
    assert said in json.loads(result.stdout)["notes"]


def test_a_dense_target_has_no_moe_cost_note(runner):
    args = ["spec", "--target", "llama-3.1-8b", "--draft", "none", "--gpu", "h100", "--json"]
    notes = json.loads(runner.invoke(app, args).stdout)["notes"]
    assert not any("MoE layers" in note for note in notes)
