"""`infersize best DIR --request-rate R --sla NAME`: per GPU type, the deployment that serves R
requests/s at the SLA with the fewest GPUs (or the lowest $/hour), with and without speculation,
read from a sweep's capacity table. Any rate, not only those swept: a row's capacity per replica
gives its replicas for R (⌈headroom × R / capacity⌉)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from infersize.errors import InfersizeError, ValueRangeError
from infersize.sweep.best import read_manifest, read_table

BY = ("gpus", "cost")
PLAIN_KEY = ["gpu", "tp", "target", "target_quant", "kv_dtype"]


@dataclass(frozen=True, kw_only=True)
class FleetAsk:
    request_rate: float
    sla: str
    workload: str | None = None
    by: str = "gpus"
    scenario: int | None = None  # default: the middle one (each pair's expected α)
    gpu: str | None = None
    target: str | None = None


@dataclass(frozen=True)
class FleetAnswer:
    rows: list[dict[str, Any]]  # per GPU type: the best plain and the best speculative option
    workload: str
    scenario: int
    notes: list[str] = field(default_factory=list)


def _one_of(frame: pl.DataFrame, column: str, asked: str | None) -> str:
    known = sorted(frame[column].unique().to_list())
    if asked is None:
        if len(known) > 1:
            raise InfersizeError(
                f"the sweep has several {column}s ({', '.join(known)}): choose one with "
                f"{{{column}}}",
                settings=(column,),
            )
        return str(known[0])
    if asked not in known:
        raise ValueRangeError(column, f"'{asked}' is not in this sweep: it has {', '.join(known)}")
    return asked


def _priced(frame: pl.DataFrame, rate: float, headroom: float) -> pl.DataFrame:
    """GPUs and $/hour of each arm at `rate`, from the rows' capacities per replica."""
    exprs = []
    for arm in ("baseline", "speculative"):
        top = pl.col(f"max_request_rate_{arm}")
        replicas = (pl.lit(headroom * rate) / top - 1e-12).ceil().clip(lower_bound=1)
        gpus = pl.when(top > 0).then(replicas * pl.col("tp")).otherwise(None).cast(pl.Int64)
        exprs += [
            gpus.alias(f"gpus_{arm}"),
            (gpus * pl.col("price_usd_per_hour")).alias(f"usd_per_hour_{arm}"),
        ]
    return frame.with_columns(exprs)


def _best(frame: pl.DataFrame, arm: str, by: str) -> dict[str, Any] | None:
    ranked = frame.filter(pl.col(f"gpus_{arm}").is_not_null())
    if ranked.is_empty():
        return None
    order = (
        [f"gpus_{arm}", f"usd_per_hour_{arm}"]
        if by == "gpus"
        else [f"usd_per_hour_{arm}", f"gpus_{arm}"]
    )
    keys = [*order, f"max_request_rate_{arm}", "target", "tp", "draft"]
    ranked = ranked.sort(
        keys, descending=[False, False, True, False, False, False], nulls_last=True
    )
    return ranked.row(0, named=True)


def fewest_gpus(out_dir: Path, ask: FleetAsk) -> FleetAnswer:
    if not (math.isfinite(ask.request_rate) and ask.request_rate > 0):
        raise ValueRangeError(
            "request_rate", f"must be a positive number, got {ask.request_rate:g}"
        )
    if ask.by not in BY:
        raise ValueRangeError("by", f"must be gpus or cost, got '{ask.by}'")
    frame = read_table(out_dir, "capacity")
    headroom = float(read_manifest(out_dir).get("capacity_headroom", 1.0))
    if frame.is_empty():
        raise InfersizeError(f"{out_dir}: the capacity table has no rows")
    sla = _one_of(frame, "sla", ask.sla)
    workload = _one_of(frame, "workload", ask.workload)
    frame = frame.filter((pl.col("sla") == sla) & (pl.col("workload") == workload))
    scenarios = sorted(frame["acceptance_scenario"].unique().to_list())
    scenario = scenarios[len(scenarios) // 2] if ask.scenario is None else ask.scenario
    if scenario not in scenarios:
        have = ", ".join(map(str, scenarios))
        raise ValueRangeError("scenario", f"{scenario} is not in this sweep: it has {have}")
    frame = frame.filter(pl.col("acceptance_scenario") == scenario)
    for column, value in (("gpu", ask.gpu), ("target", ask.target)):
        if value is not None:
            frame = frame.filter(pl.col(column) == value)
            if frame.is_empty():
                raise ValueRangeError(column, f"'{value}' is not in this sweep's capacity table")
    frame = _priced(frame, ask.request_rate, headroom)
    rows = []
    for gpu in sorted(frame["gpu"].unique().to_list()):
        of_gpu = frame.filter(pl.col("gpu") == gpu)
        plain, spec = _best(of_gpu, "baseline", ask.by), _best(of_gpu, "speculative", ask.by)
        rows.append({"gpu": gpu, "plain": plain, "speculative": spec})
    notes = [
        f"{workload} at {ask.request_rate:g} requests/s, SLA {sla}; α scenario {scenario}; "
        f"headroom {headroom:g}",
    ]
    return FleetAnswer(rows=rows, workload=workload, scenario=scenario, notes=notes)


@dataclass(frozen=True)
class FleetCurve:
    gpu: str
    rates: list[float]
    plain_gpus: list[int | None]  # per rate, the fewest GPUs without speculation
    speculative_gpus: list[int | None]


def fleet_curves(
    out_dir: Path, ask: FleetAsk, rates: list[float]
) -> tuple[list[FleetCurve], FleetAnswer]:
    """GPUs needed against the request rate per GPU type, both ways (`plot capacity`)."""
    curves: dict[str, FleetCurve] = {}
    answer = None
    for rate in rates:
        answer = fewest_gpus(out_dir, FleetAsk(**{**ask.__dict__, "request_rate": rate}))
        for entry in answer.rows:
            curve = curves.setdefault(entry["gpu"], FleetCurve(entry["gpu"], [], [], []))
            curve.rates.append(rate)
            plain, spec = entry["plain"], entry["speculative"]
            curve.plain_gpus.append(None if plain is None else plain["gpus_baseline"])
            curve.speculative_gpus.append(None if spec is None else spec["gpus_speculative"])
    assert answer is not None
    return list(curves.values()), answer


def swept_rates(out_dir: Path) -> list[float]:
    return sorted(read_table(out_dir, "capacity")["target_request_rate"].unique().to_list())
