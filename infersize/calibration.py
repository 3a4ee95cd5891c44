"""infersize's prediction for each published measurement of tests/data/measurements.csv, through
the same code paths as `spec` (used by the calibration test and the README table)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from infersize.catalog import load_catalog
from infersize.deployment import deployment_memory, prepare_side
from infersize.engines import Engine, get_engine
from infersize.latency import step_time_s
from infersize.memory import GIB
from infersize.speculative import speedup_leviathan


def load_measurements(path: Path) -> list[dict[str, Any]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _side(row: dict[str, Any]):
    catalog = load_catalog()
    gpu = catalog.gpu(row["gpu"])
    side = prepare_side(
        catalog.model(row["model"]),
        catalog.weight_format(row["precision"]),
        catalog.kv_dtype("fp16"),
        gpu,
        int(row["tp"]),
    )
    return side, gpu


def predict(row: dict[str, Any], engine: Engine | None = None) -> float:
    kind = row["kind"]
    if kind == "leviathan_expected":  # Theorem 3.8 with the paper's α, γ (K) and c
        return float(
            speedup_leviathan(
                float(row["alpha"]), int(row["draft_k"]), 1.0 / float(row["cost_coefficient"])
            )
        )
    engine = engine or get_engine(row["engine"])
    side, gpu = _side(row)
    if kind == "kv_pool_gib":
        memory = deployment_memory(
            side.numbers, None, gpu.memory_bytes, engine, int(row["output_tokens"]), 1, 0
        )
        return float(memory.kv_pool) / GIB
    if kind == "decode_tokens_per_s":
        batch = int(row["batch_size"])
        # the mean context over the generated tokens: prompt + half the output
        context = int(row["input_tokens"]) + int(row["output_tokens"]) / 2
        return float(batch / step_time_s(side.numbers.cost, engine, batch, 1, context))
    raise ValueError(f"unknown measurement kind {kind!r}")


def error(row: dict[str, Any], predicted: float) -> float:
    """Relative error, or absolute for the dimensionless Leviathan rows."""
    measured = float(row["measured"])
    if row["kind"] == "leviathan_expected":
        return predicted - measured
    return predicted / measured - 1.0
