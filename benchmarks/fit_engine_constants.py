"""Re-derive the engine presets' fitted constants from tests/data/measurements.csv.

Each preset's constants are chosen on a grid to minimise the worst error, relative to its bound,
over that preset's bounded rows (rows marked bounded=no are never used). Prints the best grid
point and its errors next to the values the presets hold (core/engines.py).

Usage: python benchmarks/fit_engine_constants.py
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from infersize.core.engines import ENGINES, MIB, Engine
from infersize.service.calibration import (
    POOL_KINDS,
    Row,
    error,
    load_measurements,
    predict,
    row_engine,
)

ROWS = load_measurements(
    Path(__file__).resolve().parent.parent / "tests" / "data" / "measurements.csv"
)


SHARED_LAUNCH_S = ENGINES["plain"].layer_overhead_s


def _rows(engine: str, kinds: Iterable[str], batch_one: bool = False) -> list[Row]:
    return [
        r
        for r in ROWS
        if r["engine"] == engine
        and r["kind"] in kinds
        and r["bounded"] == "yes"
        and (not batch_one or r["batch_size"] == "1")
    ]


def _fit(
    rows: list[Row], grid: dict[str, Iterable[float]], fixed: Callable[[Engine], Engine]
) -> None:
    names = list(grid)
    best: tuple[float, dict[str, float], list[float]] | None = None
    for values in itertools.product(*grid.values()):
        setting = dict(zip(names, (float(v) for v in values), strict=True))
        errors = [
            error(r, predict(r, dataclasses.replace(fixed(row_engine(r)), **setting))) for r in rows
        ]
        worst = max(abs(e) / float(r["tolerance"]) for e, r in zip(errors, rows, strict=True))
        if best is None or worst < best[0]:
            best = (worst, setting, errors)
    assert best is not None
    worst, setting, errors = best
    print(f"  best: {setting}  (worst error {worst:.2f} of its bound)")
    for row, err in zip(rows, errors, strict=True):
        print(
            f"    {row['id']:<48} {err * 100:+6.1f}%  (bound ±{float(row['tolerance']) * 100:.0f}%)"
        )


def main() -> None:
    print("plain (the CUDA-graph engines: gpt-fast, LMDeploy, SGLang, NIM, TensorRT-LLM, AutoAWQ)")
    _fit(
        _rows("plain", ["decode_tokens_per_s"]),
        {"mbu": np.arange(0.65, 0.81, 0.0125), "mfu": [0.5, 0.55, 0.6]},
        lambda e: e,  # the launch floor (step and layer overheads) is held, not fitted
    )  # fmt: skip
    print("vllm (V1, batch 1): kv_mbu 0.90 from the blog's slope, the launch cost shared")
    _fit(
        _rows("vllm", ["decode_tokens_per_s"], batch_one=True),
        {"mbu": np.arange(0.6, 0.9, 0.0125), "step_overhead_s": np.arange(0, 2e-3, 1e-4)},
        lambda e: dataclasses.replace(e, kv_mbu=0.9, layer_overhead_s=SHARED_LAUNCH_S),
    )  # fmt: skip
    print("llama.cpp (2025 builds)")
    _fit(
        _rows("llama.cpp", ["decode_tokens_per_s"], batch_one=True),
        {"mbu": np.arange(0.7, 1.0, 0.025), "step_overhead_s": np.arange(0, 1.5e-3, 2.5e-4),
         "layer_overhead_s": [0, 1e-5, 2e-5, 3e-5, 4e-5, 6e-5]},
        lambda e: e,
    )  # fmt: skip
    print("vllm (0.21+) pool: activation factor and CUDA graph bytes per layer and capture size")
    _fit(
        _rows("vllm", POOL_KINDS),
        {"activation_factor": np.arange(1.0, 3.6, 0.1),
         "graph_bytes_per_layer": [x * MIB for x in np.arange(0.1, 0.31, 0.025)]},
        lambda e: e,
    )  # fmt: skip
    print("vllm-0.15 pool: activation factor")
    _fit(
        _rows("vllm-0.15", POOL_KINDS), {"activation_factor": np.arange(1.0, 2.6, 0.1)}, lambda e: e
    )
    print(
        "presets now:",
        {n: (e.mbu, e.step_overhead_s, e.layer_overhead_s) for n, e in ENGINES.items()},
    )


if __name__ == "__main__":
    main()
