"""A head's published acceptance holds for the positions it was measured at: DeepSeek-V3's MTP
α 0.875 is the acceptance of the second token with one MTP module (K = 1), so positions 2..K
are not credited and the K search, in `spec` and in sweeps alike, stops at 1."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from infersize.cli import app
from infersize.core.profile import expected_tokens_profile, iid_profile, limit_positions
from infersize.service.acceptance import pair_acceptance

# DeepSeek-V3 Technical Report, arXiv 2412.19437, §5.4.3: "the acceptance rate of the second
# token prediction ranges between 85% and 90% ... enables DeepSeek-V3 to achieve a significantly
# improved decoding speed, delivering 1.8 times TPS" (one MTP module, K = 1). vLLM measured
# 1.63x at QPS 1 with its k = 1 MTP (https://github.com/vllm-project/vllm/pull/12755).
DEEPSEEK_SECOND_TOKEN = (0.85, 0.90)
DEEPSEEK_TPS_RATIO = 1.8
SPEC = [
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


@given(
    alpha=st.floats(0.0, 1.0),
    m=st.integers(1, 12),
    positions=st.integers(1, 16),
)
def test_limited_profile_credits_nothing_past_its_positions(alpha, m, positions):
    rates = limit_positions(iid_profile(alpha, positions), m)
    ks = np.arange(1, positions + 1)
    e = expected_tokens_profile(rates, ks)
    full = expected_tokens_profile(iid_profile(alpha, positions), ks)
    inside = ks <= m
    assert np.allclose(e[inside], full[inside])
    assert np.allclose(e[~inside], full[min(m, positions) - 1])


def test_rows_carry_the_k_they_were_measured_at(catalog):
    rows = {(r.target_id, r.draft_id): r for r in catalog.published_acceptance if r.draft_id}
    assert rows[("deepseek-v3", "deepseek-v3-mtp")].measured_k == 1
    assert rows[("llama-3.1-8b", "eagle3-llama3.1-8b")].measured_k == 7
    dynamic = [r for r in catalog.published_acceptance if r.draft_k.startswith("dynamic")]
    assert dynamic and all(r.measured_k is None for r in dynamic)
    profiled = [r for r in catalog.published_acceptance if r.per_position]
    assert profiled and all(r.measured_k == len(r.per_position) for r in profiled)


def test_heads_keep_their_measured_k_and_drafts_extrapolate(catalog):
    model = catalog.model
    mtp = pair_acceptance(model("deepseek-v3"), model("deepseek-v3-mtp"), catalog)
    assert mtp.positions == 1
    # a head without its own row takes its method's rows, and their K
    glm = pair_acceptance(model("glm-4.5"), model("glm-4.5-mtp"), catalog)
    assert (glm.source, glm.positions) == ("method", 1)
    eagle3 = pair_acceptance(model("llama-3.1-8b"), model("eagle3-llama3.1-8b"), catalog)
    assert eagle3.positions == 7
    draft = pair_acceptance(model("vicuna-7b-v1.3"), model("vicuna-68m"), catalog)
    assert draft.positions is None  # Leviathan's i.i.d. α, as the prior is fitted


@pytest.mark.parametrize("batch", [1, 32])
def test_deepseek_v3_mtp_matches_the_published_k1_figure(runner, batch):
    result = runner.invoke(app, [*SPEC, "--batch-size", str(batch), "--draft-k", "1", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["fits"] is True
    assert data["optimal_k"] == 1
    assert data["acceptance_positions"] == 1
    low, high = DEEPSEEK_SECOND_TOKEN
    assert 1 + low <= data["expected_tokens_per_step"] <= 1 + high
    if batch == 1:  # the report's TPS ratio, within a quarter
        assert data["speedup_at_optimal_k"] == pytest.approx(DEEPSEEK_TPS_RATIO, rel=0.25)


def test_the_note_says_positions_are_not_extrapolated(runner):
    result = runner.invoke(app, SPEC)
    assert result.exit_code == 0, result.output
    assert "Optimal K:            1 -> " in result.output
    assert (
        "note: α 0.875 was measured at K=1: positions past 1 are not credited (no per-position "
        "acceptance of mtp heads is published to build on), so the K search stops at 1; "
        "give --acceptance-rates to price more"
    ) in result.output


def test_a_given_alpha_is_extrapolated_unless_its_positions_are_given(runner):
    result = runner.invoke(app, [*SPEC, "--acceptance-rate", "0.875", "--json"])
    data = json.loads(result.output)
    assert data["acceptance_positions"] is None
    assert data["optimal_k"] > 1
    limited = runner.invoke(
        app, [*SPEC, "--acceptance-rate", "0.875", "--acceptance-positions", "2", "--json"]
    )
    data = json.loads(limited.output)
    assert (data["acceptance_positions"], data["optimal_k"]) == (2, 2)
    assert data["notes"][0] == (
        "α 0.875 was measured at K=2: positions past 2 are not credited "
        "(--acceptance-positions), so the K search stops at 2; give --acceptance-rates to price "
        "more"
    )


MTP_SWEEP = """\
name: mtp
pairs:
  - {target: deepseek-v3, draft: deepseek-v3-mtp}
target_quants: [fp8]
draft_quants: [fp8]
gpus:
  - {name: h200, tp: [8]}
context_lengths: [4096]
batch_sizes: [1, 32]
draft_k: {start: 1, stop: 8, step: 1}
engine: vllm
"""


def test_the_sweep_searches_k_as_spec_does(tmp_path, runner):
    (tmp_path / "s.yaml").write_text(MTP_SWEEP)
    out = tmp_path / "out"
    result = runner.invoke(app, ["sweep", "run", str(tmp_path / "s.yaml"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = [
        r
        for r in pq.read_table(out / "best_pairs.parquet").to_pylist()
        if r["acceptance_scenario"] == 1
    ]
    assert {r["batch_size"] for r in rows} == {1, 32}
    for row in rows:
        assert row["optimal_k"] == 1
        spec = runner.invoke(
            app, [*SPEC, "--batch-size", str(row["batch_size"]), "--max-k", "8", "--json"]
        )
        data = json.loads(spec.output)
        assert row["speedup"] == pytest.approx(data["speedup_at_optimal_k"], rel=1e-9)
