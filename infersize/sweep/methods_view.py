"""Which speculative method pays at which batch size: for one GPU and target, the best row of
each method in best_pairs at every batch of the sweep (over drafters, precisions and TP, by the
one ranking rule of `best`), read back from the tables for `infersize plot methods` and the
report."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from infersize.errors import InfersizeError
from infersize.record import record
from infersize.sweep.best import Filters, filtered, ranked, select


@record(kw_only=False)
class MethodPoint:
    batch_size: int
    speedup: float
    drafter: str  # "eagle3-llama3.1-8b fp16 K3": what reached this speedup


def method_points(out_dir: Path, filters: Filters) -> dict[str, list[MethodPoint]]:
    """Method -> the speedup of its best row at each batch of the slice (context and scenario
    from the filters, else the defaults `best` uses), rising batch."""
    frame = filtered(out_dir, "best_pairs", filters)
    if frame.is_empty():
        raise InfersizeError(f"{out_dir}: no fitting rows for this GPU and target")
    chosen = select(frame, filters)
    frame = frame.filter(
        (pl.col("context_length") == chosen.context_length)
        & (pl.col("acceptance_scenario") == chosen.acceptance_scenario)
    )
    best = ranked(frame).unique(["method", "batch_size"], keep="first", maintain_order=True)
    curves: dict[str, list[MethodPoint]] = {}
    for row in best.sort(["method", "batch_size"]).iter_rows(named=True):
        tp = f" tp{row['tp']}" if row["tp"] != 1 else ""
        drafter = f"{row['draft']} K{row['optimal_k']}{tp}"
        point = MethodPoint(int(row["batch_size"]), float(row["speedup"]), drafter)
        curves.setdefault(str(row["method"]), []).append(point)
    return curves
