"""A sweep's capacity axes resolved at planning: each workload's lengths (a trace file read now,
relative to the sweep file's folder, so every chunk replays the same requests) and target rates,
the SLAs in the file's order, and what goes into the run's hash."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Protocol

from infersize.catalog.yamlfile import YamlDocument
from infersize.errors import InfersizeError, SweepConfigError
from infersize.sweep.capacity.schema import CapacityOptions, WorkloadEntry
from infersize.sweep.lengths import read_lengths
from infersize.sweep.settings import CapacityPlan, Workload


def _lengths(doc: YamlDocument, index: int, name: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    path = Path(name).expanduser()
    path = path if path.is_absolute() else doc.path.parent / path
    try:
        return read_lengths(path)
    except InfersizeError as exc:
        raise exc.inside(
            SweepConfigError, f"{doc.where('workloads', index, 'lengths')}: "
        ) from None


class CapacityAxes(Protocol):
    """What the plan reads of a sweep file: its capacity keys (sweep/capacity/schema.py)."""

    @property
    def workloads(self) -> list[WorkloadEntry] | None: ...
    @property
    def slas(self) -> dict[str, str] | None: ...
    @property
    def target_request_rates(self) -> list[float] | None: ...
    @property
    def capacity(self) -> CapacityOptions: ...
    @property
    def workload_kind(self) -> str | None: ...


def capacity_plan(cfg: CapacityAxes, doc: YamlDocument) -> CapacityPlan | None:
    if cfg.workloads is None or cfg.slas is None:
        return None
    workloads = []
    for index, entry in enumerate(cfg.workloads):
        if entry.lengths is not None:
            inputs, outputs = _lengths(doc, index, entry.lengths)
        else:
            inputs, outputs = (entry.input_tokens or 0,), (entry.output_tokens or 0,)
        rates = entry.target_request_rates or cfg.target_request_rates or []
        workloads.append(
            Workload(
                name=entry.name,
                input_tokens=inputs,
                output_tokens=outputs,
                lengths_file=entry.lengths,
                arrival=entry.arrival,
                target_request_rates=tuple(dict.fromkeys(float(r) for r in rates)),
                kind=entry.kind or cfg.workload_kind,
            )
        )
    options = cfg.capacity
    return CapacityPlan(
        workloads=tuple(workloads),
        slas=tuple(cfg.slas.items()),
        requests=options.requests,
        seed=options.seed,
        simulate_top=options.simulate_top,
        headroom=options.headroom,
        replications=options.replications,
        simulate_all=options.simulate_all,
    )


def resolved_capacity(plan: CapacityPlan) -> dict[str, Any]:
    """What determines the capacity table, compactly: a trace by the hash of its lengths."""

    def lengths(w: Workload) -> dict[str, Any]:
        if w.lengths_file is None:
            return {"input_tokens": w.input_tokens[0], "output_tokens": w.output_tokens[0]}
        text = json.dumps([w.input_tokens, w.output_tokens], separators=(",", ":"))
        return {
            "lengths": w.lengths_file,
            "requests_in_trace": len(w.input_tokens),
            "lengths_sha256": hashlib.sha256(text.encode()).hexdigest(),
        }

    return {
        "workloads": [
            {
                "name": w.name,
                **lengths(w),
                "arrival": w.arrival,
                "target_request_rates": list(w.target_request_rates),
                **({} if w.kind is None else {"kind": w.kind}),
            }
            for w in plan.workloads
        ],
        "slas": dict(plan.slas),
        "requests": plan.requests,
        "seed": plan.seed,
        "simulate_top": plan.simulate_top,
        "headroom": plan.headroom,
        "replications": plan.replications,
        # only when asked: the hash of every sweep that screens stays what it was
        **({"simulate_all": True} if plan.simulate_all else {}),
    }
