"""Re-derive the serving constants of the CUDA-graph engine presets (SGLang, TensorRT-LLM) from
the `fit` rows of tests/data/serving_measurements.csv, and show how they do on the `check` rows
they never saw.

The constants (core/engines.py, each a field of the presets): the fixed cost a pass of a MoE
layer and of an MLA layer, what a layer adds to a pass run outside CUDA graphs, and the compute
share's curve over a pass's tokens (its peak share for 16-, 8- and 4-bit inputs and the tokens
at which half of it is reached). They are fitted together, by coordinate descent on the grids
below, to the least mean absolute log error (|log(predicted / measured)|) over the `fit` rows
of SERVING_FIT_GROUPS (infersize/service/serving_calibration.py) that each prices (the rows
whose prediction it moves), a constant moving only where the loss over those rows falls by more
than MIN_GAIN (they tell its values apart); the MoE and MLA layer
costs are the same kernels under vLLM and are held there at the same values. Every prediction goes
through `infersize capacity`'s own path (the simulator). The script prints the refit beside the
presets and the errors of the fit and check rows under both.

Usage: python benchmarks/fit_serving_constants.py [--sweeps N] [--only NAME,...]
--only refits the named constants alone, the others held at the presets' values; an
architecture's own MoE layer cost is named moe_layer_overhead_s@<architecture> (one for each
architecture of a MoE fit page of the first group, and gpt_oss, whose group is its own).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from infersize.catalog.store import load_catalog
from infersize.core.engine_constants import SHARED_LAYER_COSTS
from infersize.core.engines import ENGINES
from infersize.service.calibration import engine_preset
from infersize.service.serving_calibration import (
    SERVING_FIT_GROUPS,
    SETUP,
    Row,
    error,
    group_rows,
    load_rows,
    predict,
)

ROOT = Path(__file__).resolve().parent.parent
ROWS = load_rows(ROOT / "tests" / "data" / "serving_measurements.csv")
CATALOG = load_catalog()
# the presets whose constants are fitted; `sglang-0.5.9` holds 0.5.6's (core/engines.py), so its
# check rows are served with the same trial values
FITTED = ("sglang", "sglang-0.5.9", "trtllm")
SHARED = SHARED_LAYER_COSTS  # also held under vLLM's presets
VLLM = ("vllm", "vllm-0.15")
MIN_GAIN = 1e-3  # of the mean |log error|: a move smaller than this is not the rows' to make
GRIDS: dict[str, list[float]] = {
    "moe_layer_overhead_s": [x * 1e-6 for x in range(0, 121, 5)],
    "mla_layer_overhead_s": [x * 1e-6 for x in range(0, 121, 5)],
    "dsa_layer_overhead_s": [x * 1e-6 for x in range(0, 201, 5)],
    "eager_layer_overhead_s": [x * 1e-5 for x in range(0, 101, 5)],  # a layer, and more:
    "eager_moe_layer_overhead_s": [x * 1e-5 for x in range(0, 201, 10)],
    "eager_mla_layer_overhead_s": [x * 1e-5 for x in range(0, 201, 10)],
    "eager_linear_layer_overhead_s": [x * 1e-4 for x in range(0, 51, 2)],
    "mfu": [x / 100 for x in range(40, 91, 5)],
    "mfu_fp8": [x / 100 for x in range(30, 91, 5)],
    "mfu_fp4": [x / 100 for x in range(15, 91, 5)],
    "mfu_half_tokens": [0.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0],
}


# an architecture's own MoE layer cost: "moe_layer_overhead_s@<architecture>", one for each
# architecture of the MoE targets of the first group's fit pages (the pooled cost is the one
# fitted to all of them at once, before they had their own) and for each group of one
# architecture's rows
BY_ARCHITECTURE = "moe_layer_overhead_s@"
ARCHITECTURES = sorted(
    {
        CATALOG.model(r["model"]).architecture
        for r in group_rows(SERVING_FIT_GROUPS[0], ROWS, CATALOG)
        if r["split"] == "fit" and CATALOG.model(r["model"]).moe is not None
    }
    | {g.architecture for g in SERVING_FIT_GROUPS if g.architecture is not None}
)
BY_ARCHITECTURE_NAMES = tuple(BY_ARCHITECTURE + a for a in ARCHITECTURES)
OWN_GRID = tuple(x * 1e-6 for x in range(0, 201, 5))  # GLM-4.6's layers reach past 100 us
GRIDS |= {name: list(OWN_GRID) for name in BY_ARCHITECTURE_NAMES}


def engine_values(values: dict[str, float]) -> dict[str, Any]:
    """`values` as Engine fields: the architectures' own MoE costs as one tuple of pairs."""
    fields: dict[str, Any] = {k: v for k, v in values.items() if not k.startswith(BY_ARCHITECTURE)}
    own = [(k.removeprefix(BY_ARCHITECTURE), v) for k, v in values.items() if k not in fields]
    if own:
        fields["moe_layer_overhead_by_architecture"] = tuple(sorted(own))
    return fields


@contextmanager
def constants(values: dict[str, float]) -> Iterator[None]:
    """The fitted presets (and vLLM's, for the shared layer costs) with `values`."""
    fields = engine_values(values)
    pooled = {k: v for k, v in fields.items() if k != "moe_layer_overhead_by_architecture"}
    with ExitStack() as stack:
        for name in FITTED:  # the architectures' own MoE costs are SGLang's alone
            sglang = ENGINES[name].memory_rule == "sglang"
            preset = dataclasses.replace(ENGINES[name], **(fields if sglang else pooled))
            stack.enter_context(engine_preset(preset))
        shared = {k: v for k, v in fields.items() if k in SHARED}
        for name in VLLM:
            stack.enter_context(engine_preset(dataclasses.replace(ENGINES[name], **shared)))
        yield


def _predict(task: tuple[dict[str, float], list[Row]]) -> dict[str, float]:
    values, rows = task
    with constants(values):
        return predict(rows, CATALOG)


def errors(rows: list[Row], values: dict[str, float]) -> list[float]:
    """Each row's error under `values`, the rows' setups simulated in parallel."""
    by_setup: dict[tuple[str, ...], list[Row]] = {}
    for row in rows:
        by_setup.setdefault(tuple(row.get(c, "") for c in SETUP), []).append(row)
    tasks = [(values, group) for group in by_setup.values()]
    predicted: dict[str, float] = {}
    for part in POOL.map(_predict, tasks):
        predicted |= part
    return [error(r, predicted[r["id"]]) for r in rows]


def loss(rows: list[Row], values: dict[str, float]) -> float:
    """Mean |log(predicted / measured)|."""
    return sum(abs(math.log1p(e)) for e in errors(rows, values)) / len(rows)


def fit_rows() -> list[Row]:
    members = {r["id"] for g in SERVING_FIT_GROUPS for r in group_rows(g, ROWS, CATALOG)}
    return [r for r in ROWS if r["id"] in members and r["split"] == "fit"]


def preset_values() -> dict[str, float]:
    """The fitted constants as the presets hold them (the compute shares of 8 and 4 bits
    falling back as compute_efficiency does)."""
    preset = ENGINES[FITTED[0]]
    values = {name: getattr(preset, name) for name in GRIDS if name not in BY_ARCHITECTURE_NAMES}
    values |= {BY_ARCHITECTURE + a: preset.moe_layer_cost_s(a) for a in ARCHITECTURES}
    values["mfu_fp8"] = values["mfu_fp8"] if values["mfu_fp8"] is not None else preset.mfu
    values["mfu_fp4"] = values["mfu_fp4"] if values["mfu_fp4"] is not None else values["mfu_fp8"]
    return {name: float(value) for name, value in values.items()}


def priced_by(name: str, rows: list[Row], values: dict[str, float]) -> list[Row]:
    """The rows a constant prices: those whose prediction moves between its grid's two ends,
    the other constants at `values` (an architecture's own MoE cost prices its targets' rows
    under SGLang; an indexer's cost the rows of models with one; a compute share nearly all)."""
    low = errors(rows, values | {name: GRIDS[name][0]})
    high = errors(rows, values | {name: GRIDS[name][-1]})
    return [row for row, a, b in zip(rows, low, high, strict=True) if a != b]


def refit(rows: list[Row], sweeps: int, names: tuple[str, ...] = tuple(GRIDS)) -> dict[str, float]:
    """Coordinate descent from the presets' values: each constant in turn to its grid point of
    least loss over the rows it prices, the others held, until a sweep changes nothing. A
    constant moves only where those rows tell its values apart (their loss falls by more than
    MIN_GAIN): the 16-bit compute share by TensorRT-LLM 0.14's FP16 rows, the FP8 and FP4
    shares by the 1.0 table's, an architecture's own MoE cost by its own rows alone."""
    values = preset_values()
    for sweep in range(sweeps):
        changed = False
        for name in names:
            scope = priced_by(name, rows, values)
            best = loss(scope, values)
            for candidate in GRIDS[name]:
                trial = values | {name: candidate}
                score = loss(scope, trial)
                if score < best - MIN_GAIN:
                    best, values, changed = score, trial, True
            print(
                f"  sweep {sweep + 1}: {name} {values[name]:g} (loss {best:.4f} over "
                f"{len(scope)} rows)",
                flush=True,
            )
        if not changed:
            break
    return values


def report(values: dict[str, float]) -> None:
    preset = preset_values()
    print("refit:   " + ", ".join(f"{k} {v:g}" for k, v in values.items()))
    print("presets: " + ", ".join(f"{k} {v:g}" for k, v in preset.items()))
    members = {r["id"] for g in SERVING_FIT_GROUPS for r in group_rows(g, ROWS, CATALOG)}
    for split in ("fit", "check"):
        rows = [r for r in ROWS if r["split"] == split and r["bounded"] == "yes"]
        new, old = errors(rows, values), errors(rows, preset)
        print(
            f"{split} rows ({len(rows)}): mean |log error| refit "
            f"{sum(abs(math.log1p(e)) for e in new) / len(rows):.3f}, presets "
            f"{sum(abs(math.log1p(e)) for e in old) / len(rows):.3f}"
        )
        for row, a, b in zip(rows, new, old, strict=True):
            mark = "*" if row["id"] in members else " "
            print(f"  {mark} {row['id']:<58} refit {a * 100:+7.1f}%  presets {b * 100:+7.1f}%")


POOL: ProcessPoolExecutor


def main() -> None:
    global POOL
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweeps", type=int, default=3)
    parser.add_argument("--only", default=",".join(GRIDS), help="constants to refit")
    args = parser.parse_args()
    names = tuple(args.only.split(","))
    unknown = sorted(set(names) - set(GRIDS))
    if unknown:
        parser.error(f"no grid for {', '.join(unknown)}: choose from {', '.join(GRIDS)}")
    with ProcessPoolExecutor(max_workers=os.cpu_count()) as POOL:
        values = refit(fit_rows(), args.sweeps, names)
        report(values)


if __name__ == "__main__":
    main()
