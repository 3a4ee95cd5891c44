"""A sweep's size, counted from its file's axes before anything is built, and refused in one
line with the count when it passes a limit: decode cells (max_cells), the chunks they are cut
into (each a task and a part file: millions of them exhaust memory before a cell is scored)
and the capacity table's rows (each a capacity search: tens of milliseconds apiece)."""

from __future__ import annotations

import math
from pathlib import Path

from infersize.core.deployment import TP_SIZES
from infersize.errors import InfersizeError
from infersize.sweep.config import GpuEntry, Range, SweepConfig

MAX_CHUNKS = 100_000  # a 100 M-cell grid at the smallest chunk a sweep file may ask for
AUTO_CHUNK_CELLS = 1_000_000  # the least a chunk holds when the file does not say (plan.py)


def _axis_count(axis: list[int] | list[float] | Range) -> float:
    return axis.count() if isinstance(axis, Range) else len(set(axis))


def _context_count(cfg: SweepConfig) -> float:
    if cfg.context_lengths is not None:
        return _axis_count(cfg.context_lengths)
    assert cfg.input_tokens is not None and cfg.output_tokens is not None
    return _axis_count(cfg.input_tokens) * _axis_count(cfg.output_tokens)


def settings_upper_bound(cfg: SweepConfig) -> float:
    """Deployments × acceptance scenarios: every listed pair and (target, draft) product, every
    precision, KV dtype, GPU and TP size, and at most three scenarios per pair."""
    methods = len(cfg.methods or ())  # at most one published drafter per method and target
    pairs = len(set(cfg.targets)) * (len(set(cfg.drafts)) + methods) + len(cfg.pairs)
    tps = sum(
        (len(TP_SIZES) if g.tp == "auto" else len(set(g.tp))) if isinstance(g, GpuEntry) else 1
        for g in cfg.gpus
    )
    scenarios = _axis_count(cfg.acceptance_rates) if cfg.acceptance_rates is not None else 3
    own = [_axis_count(p.acceptance_rates) for p in cfg.pairs if p.acceptance_rates is not None]
    scenarios = max([scenarios, *own])
    axes = (len(set(cfg.target_quants)), len(set(cfg.draft_quants)), len(set(cfg.kv_dtypes)))
    return float(pairs) * math.prod(float(a) for a in axes) * tps * scenarios


def cells_upper_bound(cfg: SweepConfig) -> float:
    """The grid's cells counted from its axes alone. Pairs and settings that do not apply make
    it smaller."""
    per_setting = _context_count(cfg) * _axis_count(cfg.batch_sizes) * _axis_count(cfg.draft_k)
    return settings_upper_bound(cfg) * per_setting


def capacity_rows_upper_bound(cfg: SweepConfig) -> float:
    """Settings × each workload's target rates × SLAs: the capacity table's rows at most."""
    if cfg.workloads is None or cfg.slas is None:
        return 0.0
    shared = len(cfg.target_request_rates or ())
    rates = sum(len(w.target_request_rates or ()) or shared for w in cfg.workloads)
    return settings_upper_bound(cfg) * rates * len(cfg.slas)


def check_size(cfg: SweepConfig, path: Path, max_cells: int | None = None) -> None:
    """Refuse a sweep past its limits before it is planned, with the count that passes."""
    limit = max_cells if max_cells is not None else cfg.max_cells
    cells = cells_upper_bound(cfg)
    if cells > limit:
        raise InfersizeError(
            f"{path}: the grid's axes multiply to {cells:,.0f} cells (before pairs and settings "
            f"that do not apply are left out), over the limit of {limit:,}; raise it with "
            "{max_cells} or max_cells: in the YAML",
            settings=("max_cells",),
        )
    chunk_cells = cfg.chunk_cells or AUTO_CHUNK_CELLS
    chunks = math.ceil(cells / chunk_cells)
    if chunks > MAX_CHUNKS:
        raise InfersizeError(
            f"{path}: {cells:,.0f} cells in chunks of {chunk_cells:,} make up to {chunks:,} "
            f"chunks, over the limit of {MAX_CHUNKS:,}; raise chunk_cells: in the YAML"
        )
    rows, most = capacity_rows_upper_bound(cfg), cfg.capacity.max_rows
    if rows > most:
        raise InfersizeError(
            f"{path}: the capacity table would hold up to {rows:,.0f} rows (settings × target "
            f"rates × SLAs), each a capacity search, over the limit of {most:,}; raise it with "
            "capacity: {max_rows: N} in the YAML"
        )
