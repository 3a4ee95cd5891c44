"""Re-derive the engine presets' fitted constants from the `fit` rows of
tests/data/measurements.csv, and show how they do on the `check` rows they never saw.

Each group of infersize.service.calibration.FIT_GROUPS is one set of a preset's constants and
the bounded rows they are fitted to. Its constants are chosen on a grid to minimise the worst
error, relative to its bound, over the group's `fit` rows; grid points whose worst errors tie
(to 0.001 of the bound) are told apart by their mean error, and only then by their distance to
the preset's value. Every prediction goes through
`infersize spec`'s own path (run_spec), with the candidate registered as the preset. The
script prints, per group, the refitted constants beside the presets' values and each row's
error under both: in sample for `fit` rows, out of sample for `check` rows.

Usage: python benchmarks/fit_engine_constants.py [ENGINE ...]
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from infersize.catalog.store import load_catalog
from infersize.core.engine_constants import MIB
from infersize.core.engines import ENGINES, Engine
from infersize.service.calibration import (
    FIT_GROUPS,
    FitGroup,
    Row,
    engine_preset,
    error,
    group_rows,
    load_measurements,
    predict,
)

ROWS = load_measurements(
    Path(__file__).resolve().parent.parent / "tests" / "data" / "measurements.csv"
)
CATALOG = load_catalog()


def _grid(*values: Iterable[float]) -> list[float]:
    return [round(float(v), 6) for v in itertools.chain(*values)]


# What each group fits, on which grid. The vLLM decode group keeps kv_mbu at 0.90 (the vLLM
# blog's slope) and the per-layer launch cost shared with `plain`; `plain` and `llama.cpp` fit
# their bandwidth and compute shares, and llama.cpp its launch costs.
GRIDS: dict[FitGroup, dict[str, list[float]]] = {
    FIT_GROUPS[0]: {"mbu": _grid(np.arange(0.64, 0.8201, 0.01)), "mfu": [0.5, 0.55, 0.6]},
    FIT_GROUPS[1]: {
        "mbu": _grid(np.arange(0.6, 0.9, 0.0125)),
        "step_overhead_s": _grid(np.arange(0, 2e-3, 1e-4)),
    },
    FIT_GROUPS[2]: {
        "mbu": _grid(np.arange(0.7, 1.0, 0.025)),
        "step_overhead_s": _grid(np.arange(0, 1.5e-3, 2.5e-4)),
        "layer_overhead_s": [0, 1e-5, 2e-5, 3e-5, 4e-5, 6e-5],
    },
    FIT_GROUPS[3]: {
        "activation_factor": _grid(np.arange(1.0, 3.55, 0.1)),
        "graph_bytes_per_layer": _grid(x * MIB for x in np.arange(0.1, 0.31, 0.025)),
    },
    FIT_GROUPS[4]: {"activation_factor": _grid(np.arange(1.0, 2.55, 0.1))},
    # SGLang: the memory not free when it measures, at TP 1 (the CUDA context) and what tensor
    # parallelism adds (NCCL); sglang-0.4 shares sglang's values (core/engines.py)
    FIT_GROUPS[5]: {"overhead_gib": _grid(np.arange(0.0, 1.51, 0.05))},
    FIT_GROUPS[6]: {"tp_overhead_gib": _grid(np.arange(0.0, 4.01, 0.1))},
}


def errors(rows: list[Row], engine: Engine) -> list[float]:
    with engine_preset(engine):
        return [error(r, predict(r, CATALOG)) for r in rows]


def relative(rows: list[Row], errs: list[float]) -> list[float]:
    """Each error relative to its row's bound."""
    return [abs(e) / float(r["tolerance"]) for e, r in zip(errs, rows, strict=True)]


def worst(rows: list[Row], errs: list[float]) -> float:
    return max(relative(rows, errs))


def refit(group: FitGroup, rows: list[Row]) -> Engine:
    """The grid point of least worst error over `rows`; ties go to the least mean error,
    then to the point nearest the preset."""
    preset = ENGINES[group.engine]
    grid = GRIDS[group]
    names = list(grid)

    def distance(setting: dict[str, float]) -> float:
        return sum(
            abs(v - getattr(preset, n)) / max(abs(getattr(preset, n)), 1e-9)
            for n, v in setting.items()
        )

    best: tuple[tuple[float, float, float], Engine] | None = None
    for values in itertools.product(*grid.values()):
        setting = dict(zip(names, values, strict=True))
        candidate = dataclasses.replace(preset, **setting)
        scaled = relative(rows, errors(rows, candidate))
        key = (round(max(scaled), 3), sum(scaled) / len(scaled), distance(setting))
        if best is None or key < best[0]:
            best = (key, candidate)
    assert best is not None
    return best[1]


def _line(row: Row, refitted: float, shipped: float) -> str:
    scale, unit = (1.0, "") if row["kind"] == "leviathan_expected" else (100.0, "%")
    bound = float(row["tolerance"]) * scale
    return (
        f"    {row['id']:<44} {row['split']:<5} refit {refitted * scale:+7.2f}{unit}  "
        f"presets {shipped * scale:+7.2f}{unit}  (bound ±{bound:g}{unit})"
    )


def report(group: FitGroup) -> None:
    members = group_rows(group, ROWS)
    fit_rows = [r for r in members if r["split"] == "fit"]
    check_rows = [r for r in members if r["split"] == "check"]
    preset = ENGINES[group.engine]
    refitted = refit(group, fit_rows)
    names = list(GRIDS[group])
    print(f"{group.engine} {', '.join(group.kinds)}: {', '.join(names)}")
    print(
        f"  refit on {len(fit_rows)} fit rows: "
        + ", ".join(f"{n} {getattr(refitted, n):g}" for n in names)
        + "  | presets: "
        + ", ".join(f"{n} {getattr(preset, n):g}" for n in names)
    )
    for label, rows in (("in sample (fit)", fit_rows), ("out of sample (check)", check_rows)):
        if not rows:
            continue
        new, old = errors(rows, refitted), errors(rows, preset)
        print(
            f"  {label}: worst {worst(rows, new):.2f} of its bound (presets {worst(rows, old):.2f})"
        )
        for row, a, b in zip(rows, new, old, strict=True):
            print(_line(row, a, b))


def main() -> None:
    """Every group, or those of the engines named on the command line."""
    engines = set(sys.argv[1:])
    for group in FIT_GROUPS:
        if not engines or group.engine in engines:
            report(group)


if __name__ == "__main__":
    main()
