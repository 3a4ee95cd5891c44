"""`infersize best DIR --request-rate R --sla NAME`: per GPU type, the deployment that serves R
requests/s at the SLA with the fewest GPUs (or the lowest $/hour), with and without speculation,
read from a sweep's capacity table. Any rate, not only those swept: a row's capacity per replica
gives its replicas for R (⌈headroom × R / capacity⌉)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl

from infersize.errors import InfersizeError, ValueRangeError
from infersize.service.capacity import replicas_for
from infersize.sweep.best import match_name, read_manifest, read_table

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
    # (DEPLOYMENT, SPECULATION and what the rate needs: replicas, GPUs, $/hour)
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
    tps, prices = frame["tp"].to_list(), frame["price_usd_per_hour"].to_list()
    columns = []
    for arm in ("baseline", "speculative"):
        tops = frame[f"max_request_rate_{arm}"].to_list()
        replicas = [replicas_for(rate, top or 0.0, headroom) for top in tops]
        gpus = [None if r is None else r * tp for r, tp in zip(replicas, tps, strict=True)]
        usd = [None if g is None or p is None else g * p for g, p in zip(gpus, prices, strict=True)]
        columns += [
            pl.Series(f"gpus_{arm}", gpus, dtype=pl.Int64),
            pl.Series(f"usd_per_hour_{arm}", usd, dtype=pl.Float64),
        ]
    return frame.with_columns(columns)


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
    return _option(ranked.row(0, named=True), arm)


DEPLOYMENT = ("tp", "target", "target_quant", "kv_dtype")
SPECULATION = ("method", "draft", "draft_quant", "draft_k", "acceptance_rate")


def _option(row: dict[str, Any], arm: str) -> dict[str, Any]:
    """A row as the answer for one arm: its deployment and what the asked rate needs of it (the
    row's latencies are at its own target rate, not the asked one, so they stay out)."""
    option = {name: row[name] for name in DEPLOYMENT}
    if arm == "speculative":
        option |= {name: row[name] for name in SPECULATION}
        option["capacity_source"] = row["capacity_source"]
    for name in ("max_request_rate", "gpus", "usd_per_hour"):
        option[name] = row[f"{name}_{arm}"]
    option["replicas"] = None if option["gpus"] is None else option["gpus"] // row["tp"]
    return option


def fewest_gpus(out_dir: Path, ask: FleetAsk) -> FleetAnswer:
    if not (math.isfinite(ask.request_rate) and ask.request_rate > 0):
        raise ValueRangeError(
            "request_rate", f"must be a positive number, got {ask.request_rate:g}"
        )
    if ask.by not in BY:
        raise ValueRangeError("by", f"must be gpus or cost, got '{ask.by}'")
    frame = read_table(out_dir, "capacity")
    headroom = float(read_manifest(out_dir).get("capacity", {}).get("headroom", 1.0))
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
            frame = match_name(frame, column, value, out_dir)
    # a capacity table written before the column existed holds no such row to leave out
    has_limits = "within_max_context" in frame.columns
    held = frame.filter(pl.col("within_max_context")) if has_limits else frame
    beyond = sorted(set(frame["target"].to_list()) - set(held["target"].to_list()))
    if held.is_empty():
        raise InfersizeError(
            f"{out_dir}: no deployment holds the {workload} workload's longest request "
            f"(prompt plus answer) within its models' max_position_embeddings"
        )
    frame = _priced(held, ask.request_rate, headroom)
    rows = []
    for gpu in sorted(frame["gpu"].unique().to_list()):
        of_gpu = frame.filter(pl.col("gpu") == gpu)
        plain, spec = _best(of_gpu, "baseline", ask.by), _best(of_gpu, "speculative", ask.by)
        saves = None if plain is None or spec is None else plain["gpus"] - spec["gpus"]
        rows.append({
            "gpu": gpu, "gpu_name": of_gpu["gpu_name"][0], "plain": plain, "speculative": spec,
            "speculation_saves_gpus": saves,
        })  # fmt: skip
    notes = [
        f"{workload} at {ask.request_rate:g} requests/s, SLA {sla}; α scenario {scenario}; "
        f"headroom {headroom:g}",
        *(f"{target} cannot hold the {workload} workload's requests (max_position_embeddings)"
          for target in beyond),
    ]  # fmt: skip
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
        answer = fewest_gpus(out_dir, replace(ask, request_rate=rate))
        for entry in answer.rows:
            curve = curves.setdefault(entry["gpu"], FleetCurve(entry["gpu"], [], [], []))
            curve.rates.append(rate)
            plain, spec = entry["plain"], entry["speculative"]
            curve.plain_gpus.append(None if plain is None else plain["gpus"])
            curve.speculative_gpus.append(None if spec is None else spec["gpus"])
    assert answer is not None
    return list(curves.values()), answer


CURVE_POINTS = 200  # rates a fleet curve is drawn at, evenly up to its largest


def curve_rates(out_dir: Path, max_rate: float | None = None) -> list[float]:
    """The rates a fleet curve is evaluated at: up to `max_rate`, else 1.5 × the largest
    swept target rate."""
    swept = read_table(out_dir, "capacity")["target_request_rate"]
    top = max_rate if max_rate is not None else 1.5 * float(swept.max() or 0.0)  # type: ignore[arg-type]
    if not (math.isfinite(top) and top > 0):
        raise ValueRangeError("max_rate", f"must be a positive number, got {top:g}")
    return [top * (i + 1) / CURVE_POINTS for i in range(CURVE_POINTS)]


@dataclass(frozen=True, kw_only=True)
class FleetView:
    """A capacity sweep's answers for one workload and SLA: the fewest GPUs per GPU type at
    each swept target rate, and the curves over all rates (the report's capacity section)."""

    workload: str
    workload_text: str
    sla: str
    sla_terms: str
    scenario: int
    answers: list[tuple[float, list[dict[str, Any]]]]
    curves: list[FleetCurve]


def fleet_views(out_dir: Path) -> list[FleetView]:
    """Every (workload, SLA) of the sweep's capacity table at its middle α scenario."""
    frame = read_table(out_dir, "capacity")
    views = []
    keys = frame.select("workload", "sla", "sla_terms").unique(maintain_order=True)
    for workload, sla, terms in keys.iter_rows():
        rows = frame.filter(pl.col("workload") == workload)
        first = rows.row(0, named=True)
        rates = sorted(rows["target_request_rate"].unique().to_list())
        ask = FleetAsk(request_rate=rates[0], sla=sla, workload=workload)
        answers = [
            (rate, fewest_gpus(out_dir, replace(ask, request_rate=rate)).rows) for rate in rates
        ]
        curves, answer = fleet_curves(out_dir, ask, curve_rates(out_dir))
        text = (
            f"{workload}: {first['input_tokens']:g} prompt and {first['output_tokens']:g} "
            f"answer tokens per request on average, {first['arrival']} arrivals, target rates "
            + ", ".join(f"{r:g}" for r in rates)
            + " requests/s"
        )
        views.append(FleetView(
            workload=workload, workload_text=text, sla=sla, sla_terms=terms,
            scenario=answer.scenario, answers=answers, curves=curves,
        ))  # fmt: skip
    return views
