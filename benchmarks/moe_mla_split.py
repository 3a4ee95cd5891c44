"""The MoE and MLA layer costs the serving fit rows cannot tell apart (docs/calibration.md).

DeepSeek-R1's layers have both an MoE cost (DeepSeek-V3's own, fitted to its page alone) and
an MLA cost, and no other fit page has MLA without its own indexer cost (GLM-5), so the fit
rows price the two mostly by their sum. This prints the
fit rows' loss (benchmarks/fit_serving_constants.py's: mean |log(predicted / measured)|) over a
grid of both, every other serving constant at the presets' value, and, for each split given,
the check rows' medians of the MoE and speculative categories (benchmarks/serving_calibration.py's
summary table) under it.

Usage (from the repository root): python -m benchmarks.moe_mla_split [--splits 70/40,55/55,40/70]
[--no-grid]
(costs in µs, MoE/MLA; the grid takes about 2 minutes on two cores).
"""

from __future__ import annotations

import argparse
import os
from concurrent.futures import ProcessPoolExecutor

from benchmarks import fit_serving_constants as fit
from benchmarks.serving_calibration import load_rows, predict, summary_table

MOE_US = range(30, 71, 5)
MLA_US = range(30, 96, 5)
SHOWN = ("MoE", "speculative")
METRICS = ("tpot_mean_ms", "ttft_p50_ms", "output_tokens_per_s")


def split_values(moe_us: float, mla_us: float) -> dict[str, float]:
    """The presets' constants with DeepSeek-V3's MoE and the MLA layer costs at the split."""
    return fit.preset_values() | {
        fit.BY_ARCHITECTURE + "deepseek_v3": moe_us * 1e-6,
        "mla_layer_overhead_s": mla_us * 1e-6,
    }


def grid() -> None:
    """The fit rows' loss at each split of the grid, the least first."""
    rows = fit.fit_rows()
    losses = []
    for moe in MOE_US:
        for mla in MLA_US:
            losses.append((fit.loss(rows, split_values(moe, mla)), moe, mla))
            print(f"MoE {moe} µs, MLA {mla} µs: fit loss {losses[-1][0]:.4f}", flush=True)
    print("least: " + ", ".join(f"{m}/{a} µs {loss:.4f}" for loss, m, a in sorted(losses)[:5]))


def medians(moe_us: float, mla_us: float) -> None:
    """The check rows' MoE and speculative medians with the presets at the split."""
    rows = load_rows()
    with fit.constants(split_values(moe_us, mla_us)):
        table = summary_table(rows, predict(rows), fit.CATALOG)
    print(f"MoE {moe_us:g} µs, MLA {mla_us:g} µs:")
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] in SHOWN and cells[1] in METRICS:
            print("  " + " | ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--splits", default="70/40,55/55,40/70", help="MoE/MLA µs, comma-separated")
    parser.add_argument("--no-grid", action="store_true", help="only the check medians")
    args = parser.parse_args()
    splits = [tuple(float(x) for x in s.split("/")) for s in args.splits.split(",")]
    if not args.no_grid:
        with ProcessPoolExecutor(max_workers=os.cpu_count()) as pool:
            fit.POOL = pool
            grid()
    for moe, mla in splits:
        medians(moe, mla)


if __name__ == "__main__":
    main()
