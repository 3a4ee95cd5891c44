"""infersize's prediction for each published measurement of tests/data/measurements.csv, through
the same code paths as `spec` (used by the calibration test and the docs' calibration table)."""

from __future__ import annotations

import csv
from pathlib import Path

from infersize.catalog.store import load_catalog
from infersize.core.deployment import deployment_numbers
from infersize.core.engines import Engine, get_engine
from infersize.core.fit import deployment_memory
from infersize.core.latency import step_time_s
from infersize.core.memory import GIB
from infersize.core.speculative import speedup_leviathan
from infersize.service.resolve import resolve_side

Row = dict[str, str]


def load_measurements(path: Path) -> list[Row]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def predict(row: Row, engine: Engine | None = None) -> float:
    kind = row["kind"]
    if kind == "leviathan_expected":  # Theorem 3.8 with the paper's α, γ (K) and c
        return float(
            speedup_leviathan(
                float(row["alpha"]), int(row["draft_k"]), 1.0 / float(row["cost_coefficient"])
            )
        )
    engine = engine or get_engine(row["engine"])
    catalog = load_catalog()
    gpu = catalog.gpu(row["gpu"])
    side, _ = resolve_side(
        row["model"],
        row["precision"],
        catalog,
        catalog.kv_dtype("fp16"),
        gpu,
        int(row["tp"]),
        engine.support_family,
    )
    if kind == "kv_pool_gib":
        numbers = deployment_numbers(side, None, gpu)
        memory = deployment_memory(numbers, engine, int(row["output_tokens"]), 1, 0)
        assert memory.kv_pool is not None
        return float(memory.kv_pool) / GIB
    if kind == "decode_tokens_per_s":
        batch = int(row["batch_size"])
        # the mean context over the generated tokens: prompt + half the output
        context = int(row["input_tokens"]) + int(row["output_tokens"]) / 2
        return float(batch / step_time_s(side.numbers.cost, engine, batch, 1, context))
    raise ValueError(f"unknown measurement kind {kind!r}")


def error(row: Row, predicted: float) -> float:
    """Relative error, or absolute for the dimensionless Leviathan rows."""
    measured = float(row["measured"])
    if row["kind"] == "leviathan_expected":
        return predicted - measured
    return predicted / measured - 1.0
