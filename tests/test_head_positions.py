"""A head's published acceptance holds for the positions it was measured at. DeepSeek-R1's MTP
layer is published per position up to K = 5 (TensorRT-LLM's accept lengths at MTP 1..5), so
K > 1 is credited as measured and the K search stops at 5; DeepSeek-V3's α 0.875 (K = 1) is
carried past its first position by the same head's published decay. A head with no profile
anywhere keeps its α up to its measured K, in `spec` and in sweeps alike."""

from __future__ import annotations

import itertools
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
# NVIDIA/TensorRT-LLM@01c4ece911eb569e72cf4177f83238a0520641c2:docs/source/blogs/tech_blog/
# blog1_Pushing_Latency_Boundaries_Optimizing_DeepSeek-R1_Performance_on_NVIDIA_B200_GPUs.md,
# "Autoregressive MTP Layers": DeepSeek-R1's accept lengths at MTP 1..5
R1_ACCEPT_LENGTHS = (1.92, 2.58, 2.82, 2.99, 3.01)
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
    assert rows[("deepseek-r1", "deepseek-v3-mtp")].measured_k == 5
    assert rows[("llama-3.1-8b", "eagle3-llama3.1-8b")].measured_k == 7
    dynamic = [r for r in catalog.published_acceptance if r.draft_k.startswith("dynamic")]
    assert dynamic and all(r.measured_k is None for r in dynamic)
    profiled = [r for r in catalog.published_acceptance if r.per_position]
    assert profiled and all(r.measured_k == len(r.per_position) for r in profiled)


def test_r1s_profile_is_the_differences_of_its_accept_lengths(catalog):
    model = catalog.model
    r1 = pair_acceptance(model("deepseek-r1"), model("deepseek-v3-mtp"), catalog)
    lengths = (1.0, *R1_ACCEPT_LENGTHS)
    assert r1.profile == pytest.approx([b - a for a, b in itertools.pairwise(lengths)])
    assert r1.positions == 5


def test_v3s_one_position_is_carried_on_by_the_heads_published_decay(catalog):
    """r_1 = 0.875 (the report), then r_i = r_(i-1) · c_i with c_i = r_i / r_(i-1) of R1's
    profile: 0.66 / 0.92, 0.24 / 0.66, 0.17 / 0.24, 0.02 / 0.17."""
    model = catalog.model
    v3 = pair_acceptance(model("deepseek-v3"), model("deepseek-v3-mtp"), catalog)
    r1 = [b - a for a, b in itertools.pairwise((1.0, *R1_ACCEPT_LENGTHS))]
    expected = [0.875]
    for before, now in itertools.pairwise(r1):
        expected.append(expected[-1] * now / before)
    assert v3.profile == pytest.approx(expected, abs=1e-4)
    assert (v3.positions, v3.source) == (5, "published")


def test_heads_keep_their_measured_k_and_drafts_extrapolate(catalog):
    model = catalog.model
    # a head without its own row takes its method's rows: the mean of their profiles
    glm = pair_acceptance(model("glm-4.5"), model("glm-4.5-mtp"), catalog)
    assert (glm.source, glm.positions) == ("method", 5)
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
    assert data["acceptance_positions"] == 5
    low, high = DEEPSEEK_SECOND_TOKEN
    assert 1 + low <= data["expected_tokens_per_step"] <= 1 + high
    if batch == 1:  # the report's TPS ratio at one MTP module, within a quarter
        assert data["speedup"] == pytest.approx(DEEPSEEK_TPS_RATIO, rel=0.25)


@pytest.mark.parametrize("k", range(1, 6))
def test_r1s_mean_acceptance_length_is_the_published_one_at_each_k(runner, k):
    args = [
        "spec",
        "--target",
        "deepseek-r1",
        "--method",
        "mtp",
        "--gpu",
        "b200",
        "--tp",
        "8",
        "--engine",
        "trtllm",
        "--draft-k",
        str(k),
        "--json",
    ]
    data = json.loads(runner.invoke(app, args).output)
    assert data["expected_tokens_per_step"] == pytest.approx(R1_ACCEPT_LENGTHS[k - 1])


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_mtp_picks_k_above_one_where_the_later_positions_pay(runner, engine):
    """One request at a time, a second MTP pass (r_2 = 0.66 on R1) costs less than it
    brings, as TensorRT-LLM measured (250 TPS/user at MTP 2 against 198 at MTP 1)."""
    args = [
        "spec",
        "--target",
        "deepseek-r1",
        "--method",
        "mtp",
        "--gpu",
        "b200",
        "--tp",
        "8",
        "--engine",
        engine,
        "--json",
    ]
    data = json.loads(runner.invoke(app, args).output)
    assert 2 <= data["optimal_k"] <= 5


def test_the_note_says_positions_are_not_extrapolated(runner):
    result = runner.invoke(app, SPEC)
    assert result.exit_code == 0, result.output
    assert (
        "note: acceptance published per position up to K=5: positions past 5 are not "
        "credited, so the K search stops at 5"
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
    rows = pq.read_table(out / "best_pairs.parquet").to_pylist()
    # a published profile is one answer, not three scenarios of α
    assert {r["acceptance_scenario"] for r in rows} == {0}
    assert {r["batch_size"] for r in rows} == {1, 32}
    for row in rows:
        assert 1 <= row["optimal_k"] <= 5
        spec = runner.invoke(
            app, [*SPEC, "--batch-size", str(row["batch_size"]), "--max-k", "8", "--json"]
        )
        data = json.loads(spec.output)
        assert row["speedup"] == pytest.approx(data["speedup_at_optimal_k"], rel=1e-9)


def test_capacity_picks_k_above_one_for_one_client(runner):
    """`capacity --draft-k auto` serves one client with the K the profile pays for, as `spec`
    does at batch 1."""
    args = [
        "capacity",
        "--target",
        "deepseek-r1",
        "--method",
        "mtp",
        "--gpu",
        "b200",
        "--tp",
        "8",
        "--engine",
        "trtllm",
        "--input-tokens",
        "1000",
        "--output-tokens",
        "2000",
        "--concurrency",
        "1",
        "--draft-k",
        "auto",
        "--requests",
        "50",
        "--json",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["speculative"]["draft_k"] >= 2
