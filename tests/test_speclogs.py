"""`infersize alpha --from-vllm-log / --from-prometheus / --from-llama-cpp-log`: α, the profile and
the mean acceptance length measured from real runs. The excerpts under tests/data/speclogs/ are
copied verbatim from public threads (first line: `# source: URL`); every expected number below is
the excerpt's own logged value, quoted where it is used, unless the comment says it is computed
by hand from the excerpt's own counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infersize.cli import app
from infersize.core.speculative import alpha_for_expected_tokens, alpha_from_system_efficiency
from tests.support.commands import SEED_ARGS

DATA = Path(__file__).parent / "data" / "speclogs"
V1 = "SpecDecoding metrics:"


def alpha_json(runner, *args: str) -> dict:
    result = runner.invoke(app, ["alpha", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def fail(runner, *args: str) -> str:
    result = runner.invoke(app, ["alpha", *args])
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1
    return result.stderr


# (excerpt, index of its V1 line, logged "Mean acceptance length", K = logged per-position count)
V1_LINES = [
    # vLLM 0.11.0 field order: "Mean acceptance length: 2.01, ... Accepted: 206 tokens, Drafted:
    # 609 tokens, Per-position acceptance rate: 0.601, 0.286, 0.128, Avg Draft acceptance rate"
    ("vllm_v1_eagle3_qwen3-32b_k3_ovidiudan.txt", 0, 2.01, 3),
    # vLLM 0.9.0.1 field order: "Draft acceptance rate: 38.8%, Mean acceptance length: 2.16, ..."
    ("vllm_v1_ngram_qwen3-32b-fp8_k3_issue19254.txt", 0, 2.16, 3),
    ("vllm_v1_ngram_qwen3-32b-fp8_k3_issue19254.txt", 1, 2.46, 3),  # "... length: 2.46"
    # PR #24127 branch order: rate first, then mean length 5.44, throughputs, no "Avg" field
    ("vllm_v1_ngram_opt125m_k5_pr24127.txt", 0, 5.44, 5),
    # vllm-ascend nightly, "[metrics.py:120]", seven positions: logged 2.91 and 2.93
    ("vllm_v1_dspark_deepseek-v4-flash_k7_ascend13640.txt", 0, 2.91, 7),
    ("vllm_v1_dspark_deepseek-v4-flash_k7_ascend13640.txt", 1, 2.93, 7),
]


@pytest.mark.parametrize(("name", "index", "logged", "k"), V1_LINES)
def test_each_real_v1_line_gives_its_logged_mean_acceptance_length_back(
    runner, tmp_path, name, index, logged, k
):
    line = [x for x in (DATA / name).read_text().splitlines() if V1 in x][index]
    one = tmp_path / "one.log"
    one.write_text(line + "\n")
    data = alpha_json(runner, "--from-vllm-log", str(one))
    assert data["draft_k"] == k and data["intervals"] == 1
    assert round(data["mean_acceptance_length"], 2) == logged  # vLLM prints it with %.2f
    logged_rates = [
        float(r) for r in line.split("Per-position acceptance rate: ")[1].split(", ")[:k]
    ]
    assert data["per_position_acceptance"] == pytest.approx(logged_rates)
    # E = 1 + Σ r_i, to the rounding of K rates printed with %.3f
    assert 1 + sum(logged_rates) == pytest.approx(data["mean_acceptance_length"], abs=k * 5e-4)
    # α is the i.i.d. rate with the same mean length at K (infersize's own inversion)
    assert data["acceptance_rate"] == pytest.approx(
        float(alpha_for_expected_tokens(data["mean_acceptance_length"], k))
    )


def test_a_one_line_excerpt_file_as_it_is(runner):
    """The fixture itself (source and comment lines included) reads the same as its one line."""
    data = alpha_json(
        runner, "--from-vllm-log", str(DATA / "vllm_v1_eagle3_qwen3-32b_k3_ovidiudan.txt")
    )
    # logged: "Accepted: 206 tokens, Drafted: 609 tokens"; drafts = 609 / K = 203
    assert (data["accepted_tokens"], data["drafted_tokens"], data["drafts"]) == (206, 609, 203)
    assert round(data["mean_acceptance_length"], 2) == 2.01  # logged "Mean acceptance length: 2.01"
    assert (
        round(data["vllm_acceptance_rate"] * 100, 1) == 33.8
    )  # logged "Avg Draft acceptance rate: 33.8%"
    assert data["spec_flags"] == "--draft-k 3 --acceptance-rates 0.601,0.286,0.128"
    assert data["hint"] == "use --acceptance-rates r1,r2,... with infersize spec"
    assert data["conditional_acceptance"] == pytest.approx([0.601, 0.286 / 0.601, 0.128 / 0.286])


@pytest.mark.parametrize(
    ("name", "accepted", "drafts", "weighted"),
    [
        # logged Accepted 150 + 725; Drafted (387 + 1488) / 3 = 129 + 496 drafts;
        # logged lengths 2.16 and 2.46 weighted by those drafts
        (
            "vllm_v1_ngram_qwen3-32b-fp8_k3_issue19254.txt",
            875,
            625,
            (2.16 * 129 + 2.46 * 496) / 625,
        ),
        # logged Accepted 44 + 106; Drafted (161 + 385) / 7 = 23 + 55; lengths 2.91 and 2.93
        (
            "vllm_v1_dspark_deepseek-v4-flash_k7_ascend13640.txt",
            150,
            78,
            (2.91 * 23 + 2.93 * 55) / 78,
        ),
    ],
)
def test_a_whole_v1_log_sums_its_intervals(runner, name, accepted, drafts, weighted):
    data = alpha_json(runner, "--from-vllm-log", str(DATA / name))
    assert (data["accepted_tokens"], data["drafts"], data["intervals"]) == (accepted, drafts, 2)
    assert data["mean_acceptance_length"] == pytest.approx(1 + accepted / drafts)
    assert data["mean_acceptance_length"] == pytest.approx(weighted, abs=0.005)
    assert 1 + sum(data["per_position_acceptance"]) == pytest.approx(
        data["mean_acceptance_length"], abs=data["draft_k"] * 5e-4
    )


@pytest.mark.parametrize(
    ("name", "k", "efficiency"),
    [
        ("vllm_v0_draft_k3_issue9539.txt", 3, 0.598),  # logged "System efficiency: 0.598"
        ("vllm_v0_example_k4_issue7301_cadedaniel.txt", 4, 0.510),  # logged 0.510
        ("vllm_v0_k5_issue7301_neo9061.txt", 5, 0.167),  # logged 0.167 on its last line
    ],
)
def test_v0_lines_give_their_system_efficiency_back(runner, name, k, efficiency):
    data = alpha_json(runner, "--from-vllm-log", str(DATA / name))
    assert data["draft_k"] == k and data["per_position_acceptance"] == []
    assert round(data["system_efficiency"], 3) == efficiency
    assert data["mean_acceptance_length"] == pytest.approx(efficiency * (k + 1), abs=5e-4 * (k + 1))
    assert data["acceptance_rate"] == pytest.approx(
        float(alpha_from_system_efficiency(efficiency, k)), abs=0.01
    )


def test_v0_counters_are_cumulative_the_last_line_counts(runner):
    """Neo9061's two lines: draft tokens 5 then 15 (cumulative); the last line alone holds all:
    15 / K=5 = 3 drafts, 3 emitted tokens, so nothing past the bonus token: E = 1."""
    data = alpha_json(runner, "--from-vllm-log", str(DATA / "vllm_v0_k5_issue7301_neo9061.txt"))
    assert (data["drafted_tokens"], data["drafts"], data["mean_acceptance_length"]) == (15, 3, 1.0)


def test_prometheus_scrape_sums_engines_and_keeps_per_pos_apart(runner):
    path = DATA / "vllm_v1_prometheus_constructed_dp2_k3.txt"
    data = alpha_json(runner, "--from-prometheus", str(path))
    # the fixture's counts: drafts 1000 + 500, accepted 1500 + 800, positions 700+360, 480+250,
    # 320+190 (counted into accepted too, they would double it: 4600)
    assert (data["drafts"], data["accepted_tokens"], data["drafted_tokens"]) == (1500, 2300, 4500)
    assert data["draft_k"] == 3
    assert data["mean_acceptance_length"] == pytest.approx(1 + 2300 / 1500)
    assert data["per_position_acceptance"] == pytest.approx([1060 / 1500, 730 / 1500, 510 / 1500])


def test_the_real_pr24049_prometheus_rows_parse_but_lack_the_totals(runner):
    """Rows copied from a Prometheus UI (`series | value`): only per-position and _created rows
    survive in the excerpt, so the error names what is missing; the per_pos row and the
    num_accepted_tokens_created rows are not taken for
    vllm:spec_decode_num_accepted_tokens_total."""
    err = fail(runner, "--from-prometheus", str(DATA / "vllm_v1_prometheus_dp8_pr24049.txt"))
    assert (
        "lacks vllm:spec_decode_num_drafts_total, vllm:spec_decode_num_accepted_tokens_total" in err
    )
    assert "(it has vllm:spec_decode_num_accepted_tokens_per_pos_total)" in err


def test_a_scrape_given_twice_is_refused(runner, tmp_path):
    text = (DATA / "vllm_v1_prometheus_constructed_dp2_k3.txt").read_text()
    twice = tmp_path / "twice.txt"
    twice.write_text(text + text)
    assert "appears twice: give one scrape" in fail(runner, "--from-prometheus", str(twice))


def test_llama_server_statistics_line(runner):
    path = DATA / "llamacpp_server_eagle3_k3_pr24536.txt"
    data = alpha_json(runner, "--from-llama-cpp-log", str(path))
    # logged: "#gen drafts = 87 ... #acc tokens = 167, #mean acc len = 2.92,
    # #acc rate/pos = (0.805, 0.632, 0.483)"
    assert (data["draft_k"], data["drafts"], data["accepted_tokens"]) == (3, 87, 167)
    assert round(data["mean_acceptance_length"], 2) == 2.92
    assert data["per_position_acceptance"] == pytest.approx([0.805, 0.632, 0.483])


def test_llama_server_lines_without_k_need_draft_k(runner):
    path = str(DATA / "llamacpp_server_mtp_stats_pr23269.txt")
    assert "do not say K" in fail(runner, "--from-llama-cpp-log", path)
    data = alpha_json(runner, "--from-llama-cpp-log", path, "--draft-k", "3")
    # logged draft-mtp: "#gen drafts = 796 ... #acc tokens = 1252"; ngram-mod (4 drafts) left out
    assert (data["drafts"], data["accepted_tokens"]) == (796, 1252)
    assert any("ngram-mod" in note for note in data["notes"])
    lemonade = str(DATA / "llamacpp_server_meanlen_variant_lemonade129.txt")
    data = alpha_json(runner, "--from-llama-cpp-log", lemonade, "--draft-k", "5")
    assert round(data["mean_acceptance_length"], 2) == 4.30  # logged "mean len =  4.30"


def test_llama_cpp_accept_percent_alone_is_a_clear_error(runner):
    err = fail(
        runner, "--from-llama-cpp-log", str(DATA / "llamacpp_speculative_llama2-70b_7b_pr2926.txt")
    )
    assert "accepted / drafted tokens only" in err and "needs the number of drafts" in err


def test_mixed_k_uses_the_k_with_most_drafts_or_the_one_asked(runner, tmp_path):
    mixed = tmp_path / "mixed.log"
    mixed.write_text(
        (DATA / "vllm_v1_eagle3_qwen3-32b_k3_ovidiudan.txt").read_text()
        + (DATA / "vllm_v1_ngram_opt125m_k5_pr24127.txt").read_text()
    )
    data = alpha_json(runner, "--from-vllm-log", str(mixed))  # 203 drafts at K=3, 59 at K=5
    assert data["draft_k"] == 3 and "left out K=5" in data["notes"][0]
    data = alpha_json(runner, "--from-vllm-log", str(mixed), "--draft-k", "5")
    assert round(data["mean_acceptance_length"], 2) == 5.44  # logged for the K=5 line
    assert "no spec-decode counts at K=4 (the file has K=3, 5)" in fail(
        runner, "--from-vllm-log", str(mixed), "--draft-k", "4"
    )


def test_errors_are_one_line(runner, tmp_path):
    empty = tmp_path / "server.log"
    empty.write_text("INFO 10-26 12:36:16 [loggers.py:271] Engine 000: Avg prompt throughput\n")
    err = fail(runner, "--from-vllm-log", str(empty))
    assert err == (
        f"error: {empty}: no spec-decode counts found (looked for vLLM 'SpecDecoding metrics:' "
        "(V1) or 'Speculative metrics:' (V0) lines)\n"
    )
    assert "no such file" in fail(runner, "--from-vllm-log", str(tmp_path / "missing.log"))
    assert "is a directory" in fail(runner, "--from-prometheus", str(tmp_path))
    assert "stands alone" in fail(
        runner, "--from-vllm-log", str(empty), "--system-efficiency", "0.5"
    )
    assert fail(runner, "--mean-accepted-tokens", "2") == "error: Missing option '--draft-k'.\n"


def test_text_output_and_the_flags_reach_spec(runner):
    path = str(DATA / "vllm_v1_ngram_qwen3-32b-fp8_k3_issue19254.txt")
    text = runner.invoke(app, ["alpha", "--from-vllm-log", path]).stdout
    assert "per_position_acceptance:" in text and "acceptance_rate:" in text
    assert "use --acceptance-rates r1,r2,... with infersize spec" in text
    flags = alpha_json(runner, "--from-vllm-log", path)["spec_flags"].split()
    base = [a for a in SEED_ARGS if a not in ("--acceptance-rate", "0.72", "--draft-k", "4")]
    result = runner.invoke(app, [*base, *flags, "--json"])
    assert result.exit_code == 0, result.output
