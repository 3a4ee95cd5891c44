"""infersize's prediction for each published measurement of tests/data/measurements.csv, through
the same code paths as `spec` (used by the calibration test and the docs' calibration table)."""

from __future__ import annotations

import csv
from pathlib import Path

from infersize.catalog.store import load_catalog
from infersize.core.engines import Engine, EngineSettings, configure_engine, get_engine
from infersize.core.fit import PoolMemory, deployment_memory
from infersize.core.latency import step_time_s
from infersize.core.memory import GIB
from infersize.core.speculative import alpha_from_vllm_acceptance_rate, speedup_leviathan
from infersize.core.speed import deployment_speed
from infersize.core.speedup import get_speedup_model
from infersize.service.resolve import DeploymentRequest, resolve_deployment, resolve_side

Row = dict[str, str]
POOL_KINDS = ("kv_pool_gib", "vllm_kv_pool_tokens", "vllm_max_concurrency")


def load_measurements(path: Path) -> list[Row]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _optional_int(text: str) -> int | None:
    return int(text) if text else None


def row_engine(row: Row) -> Engine:
    """The engine preset of a row with the settings its log states."""
    utilization = row.get("gpu_memory_utilization")
    settings = EngineSettings(
        engine=row["engine"],
        gpu_memory_utilization=float(utilization) if utilization else None,
        max_num_batched_tokens=_optional_int(row.get("max_num_batched_tokens", "")),
        max_num_seqs=_optional_int(row.get("max_num_seqs", "")),
        vllm_sampler=row.get("vllm_sampler") or None,
    )
    return configure_engine(settings)


def _pool(row: Row, engine: Engine) -> PoolMemory:
    """vLLM's pool for a start-up log: the target (and draft) alone, at the log's settings."""
    request = DeploymentRequest(
        target=row["model"],
        gpu=row["gpu"],
        target_quant=row["precision"],
        draft=row.get("draft") or None,
        kv_dtype=row.get("kv_dtype") or "fp16",
        tp=int(row["tp"]),
    )
    dep = resolve_deployment(request, load_catalog(), engine)
    k = int(row["draft_k"]) if row.get("draft_k") else 0
    memory = deployment_memory(dep.numbers, engine, int(row["context_length"]), 1, k)
    assert memory.pool is not None
    return memory.pool


def _speculative_speedup(row: Row, engine: Engine) -> float:
    """Roofline speedup at the logged acceptance (accepted / drafted tokens, as vLLM and
    llama.cpp log it, converted to α at the row's K) over the mean context of the run."""
    request = DeploymentRequest(
        target=row["model"],
        gpu=row["gpu"],
        target_quant=row["precision"],
        draft=row["draft"],
        draft_quant=row.get("draft_precision") or "auto",
        kv_dtype=row.get("kv_dtype") or "fp16",
        tp=int(row["tp"]),
    )
    numbers = resolve_deployment(request, load_catalog(), engine).numbers
    assert numbers.draft is not None
    k = int(row["draft_k"])
    alpha = alpha_from_vllm_acceptance_rate(float(row["alpha"]), k)
    context = int(row["input_tokens"]) + int(row["output_tokens"]) / 2
    speed = deployment_speed(
        numbers.target, numbers.draft, engine, get_speedup_model("roofline"),
        context, int(row["batch_size"]), alpha, k,
    )  # fmt: skip
    return float(speed.speedup)


def predict(row: Row, engine: Engine | None = None) -> float:
    kind = row["kind"]
    if kind in POOL_KINDS:
        pool = _pool(row, engine or row_engine(row))
        figure = {
            "kv_pool_gib": pool.kv_pool / GIB,
            "vllm_kv_pool_tokens": pool.kv_pool_tokens,
            "vllm_max_concurrency": pool.max_concurrent_sequences,
        }[kind]
        return float(figure)
    if kind == "leviathan_expected":  # Theorem 3.8 with the paper's α, γ (K) and c
        return float(
            speedup_leviathan(
                float(row["alpha"]), int(row["draft_k"]), 1.0 / float(row["cost_coefficient"])
            )
        )
    if kind == "speculative_speedup":
        return _speculative_speedup(row, engine or row_engine(row))
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


def _setup(row: Row) -> str:
    if row["kind"] == "leviathan_expected":
        return f"α {row['alpha']}, K {row['draft_k']}, c {row['cost_coefficient']}"
    text = f"{row['model']} {row['precision']}"
    if row.get("draft"):
        text += f" + {row['draft']}"
    text += f", {row['gpu']} ×{row['tp']}, {row['engine']}"
    if row["kind"] in POOL_KINDS:
        return f"{text}, context {int(row['context_length']):,}"
    if row["kind"] == "speculative_speedup":
        return f"{text}, K {row['draft_k']}, accepted {row['alpha']}"
    return f"{text}, batch {row['batch_size']}"


def calibration_table(rows: list[Row]) -> str:
    """The Markdown table of docs/calibration.md: every row, its prediction and its error."""
    lines = [
        "| measurement | what | setup | measured | predicted | error | bound |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        predicted = predict(row)
        err = error(row, predicted)
        if row["kind"] == "leviathan_expected":
            err_text, bound = f"{err:+.3f}", f"±{row['tolerance']}"
        else:
            err_text = f"{err * 100:+.1f}%"
            bound = f"±{float(row['tolerance']) * 100:.0f}%" if row["bounded"] == "yes" else "n/a"
        unit = "" if row["units"] in ("x", "tokens") else f" {row['units']}"
        digits = 0 if row["units"] == "tokens" else 2
        lines.append(
            f"| {row['id']} | {row['kind']} | {_setup(row)} | "
            f"{float(row['measured']):,.{digits}f}{unit} | {predicted:,.{digits}f} | {err_text} | "
            f"{bound} |"
        )
    return "\n".join(lines) + "\n"
