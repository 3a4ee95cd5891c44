"""infersize's predictions against published measurements (tests/data/measurements.csv, every
row with its source and, for vLLM logs, the quoted lines). Bounds (issue #12): vLLM KV pool
tokens and concurrency ±3% for dense models, ±5% for MoE, sliding-window and multimodal models,
±10% with a draft in the pool; batch-1 decode ±12%, batch 16-64 ±25%; Leviathan Table 4's
expected column within 0.06. Rows marked bounded=no are reported in docs/calibration.md with the
reason the model misses them, never asserted and never used to fit."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from infersize.core.speculative import speedup_leviathan
from infersize.service.calibration import POOL_KINDS, error, load_measurements, predict

ROWS = load_measurements(Path(__file__).parent / "data" / "measurements.csv")
BOUNDED = [r for r in ROWS if r["bounded"] == "yes" and r["kind"] != "leviathan_expected"]
LEVIATHAN = [r for r in ROWS if r["kind"] == "leviathan_expected"]
POOL_BOUND = {"dense": 0.03, "moe": 0.05, "sliding-multimodal": 0.05, "multimodal": 0.05,
              "draft": 0.10, "": 0.03}  # fmt: skip


def _bound(row: dict[str, str]) -> float:
    if row["kind"] in POOL_KINDS:
        return POOL_BOUND[row["note"]]
    if row["kind"] == "decode_tokens_per_s":
        return 0.12 if row["batch_size"] == "1" else 0.25
    raise AssertionError(f"no bound for {row['kind']}")


def test_the_calibration_set_covers_what_the_issue_asks():
    kinds = [(r["kind"], r["batch_size"]) for r in BOUNDED]
    assert sum(k == ("decode_tokens_per_s", "1") for k in kinds) >= 12
    assert sum(k[0] == "decode_tokens_per_s" and k[1] != "1" for k in kinds) >= 6
    assert len(LEVIATHAN) == 12
    assert all(r["source"] for r in ROWS)
    logs = [r for r in BOUNDED if r["kind"] == "vllm_kv_pool_tokens"]
    assert all(r["quote"] for r in logs)  # the log lines themselves, quoted
    kinds_of_model = {r["note"] for r in logs}
    assert {"dense", "moe", "sliding-multimodal", "multimodal", "draft"} <= kinds_of_model
    assert {r["tp"] for r in logs} >= {"1", "2", "8"}
    assert {r["engine"] for r in logs} == {"vllm", "vllm-0.15"}


@pytest.mark.parametrize("row", BOUNDED, ids=[r["id"] for r in BOUNDED])
def test_prediction_within_its_bound(row):
    bound = _bound(row)
    assert float(row["tolerance"]) <= bound  # the CSV never loosens the issue's bounds
    assert abs(error(row, predict(row))) <= bound


@pytest.mark.parametrize("row", LEVIATHAN, ids=[r["id"] for r in LEVIATHAN])
def test_leviathan_table_4_expected_column(row):
    """Theorem 3.8 at the paper's α, γ and c. The paper prints α and c to two decimals and Exp
    from the unrounded values, so the check allows the inputs their rounding (±0.005)."""
    exp, k = float(row["measured"]), int(row["draft_k"])
    alpha, c = float(row["alpha"]), float(row["cost_coefficient"])
    closest = min(
        abs(speedup_leviathan(a, k, 1 / cc) - exp)
        for a, cc in itertools.product(
            (alpha - 0.005, alpha, alpha + 0.005), (c - 0.005, c, c + 0.005)
        )
    )
    assert closest <= 0.06
    assert abs(error(row, predict(row))) <= 0.07  # at the printed inputs themselves


def test_unbounded_rows_say_why():
    for row in ROWS:
        if row["bounded"] == "no":
            assert row["note"].startswith("not bounded: ")
