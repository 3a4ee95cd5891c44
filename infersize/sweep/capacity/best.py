"""`infersize best DIR --request-rate R --sla NAME`: per GPU type, the deployment that serves R
requests/s at the SLA with the fewest GPUs (or the lowest $/hour), with and without speculation,
read from a sweep's capacity table. Any rate, not only those swept: a row's capacity per replica
gives its replicas for R (⌈headroom × R / capacity⌉)."""

from __future__ import annotations

import math
from dataclasses import field
from pathlib import Path
from typing import Any

import polars as pl

from infersize.bounds import MAX_RATE
from infersize.errors import InfersizeError, ValueRangeError
from infersize.record import record
from infersize.service.capacity.answer import ARMS, BASELINE, SPECULATIVE, ArmKind
from infersize.service.capacity.fleet import fleet
from infersize.sweep.best import match_name, read_manifest, read_table
from infersize.sweep.capacity.columns import CAPACITY_COLUMNS

BY = ("gpus", "cost")


@record
class FleetAsk:
    request_rate: float
    sla: str
    workload: str | None = None
    by: str = "gpus"
    scenario: int | None = None  # default: the middle one (each pair's expected α)
    gpu: str | None = None
    target: str | None = None


@record
class FleetAnswer:
    rows: list[dict[str, Any]]  # per GPU type: the best plain and the best speculative option
    # (DEPLOYMENT, SPECULATION and what the rate needs: replicas, GPUs, $/hour)
    workload: str
    scenario: int
    target: str  # the one target model every row deploys
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
    for kind in ARMS:
        tops = frame[f"max_request_rate_{kind.key}"].to_list()
        fleets = [
            fleet(rate, top, None, headroom=headroom, tp=tp, price=price)
            for top, tp, price in zip(tops, tps, prices, strict=True)
        ]
        columns += [
            pl.Series(f"gpus_{kind.key}", [f.gpus for f in fleets], dtype=pl.Int64),
            pl.Series(f"usd_per_hour_{kind.key}", [f.usd_per_hour for f in fleets], pl.Float64),
        ]
    return frame.with_columns(columns)


def _best(frame: pl.DataFrame, kind: ArmKind, by: str) -> dict[str, Any] | None:
    arm = kind.key
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
    return _option(ranked.row(0, named=True), kind)


DEPLOYMENT = ("tp", "target", "target_quant", "kv_dtype")
SPECULATION = ("method", "draft", "draft_quant", "draft_k", "acceptance_rate")


def _option(row: dict[str, Any], kind: ArmKind) -> dict[str, Any]:
    """A row as the answer for one arm: its deployment and what the asked rate needs of it (the
    row's latencies are at its own target rate, not the asked one, so they stay out)."""
    option = {name: row[name] for name in DEPLOYMENT}
    if kind.speculates:
        option |= {name: row[name] for name in SPECULATION}
        option["capacity_source"] = row["capacity_source"]
    for name in ("max_request_rate", "gpus", "usd_per_hour"):
        option[name] = row[f"{name}_{kind.key}"]
    option["replicas"] = None if option["gpus"] is None else option["gpus"] // row["tp"]
    return option


@record(kw_only=False)
class _Slice:
    """The capacity rows one question reads: its SLA, workload and α scenario (and the GPU and
    target, when asked), and of those the rows whose models hold the workload's requests."""

    out_dir: Path
    rows: pl.DataFrame
    held: pl.DataFrame
    sla: str
    workload: str
    scenario: int
    headroom: float


def _slice(out_dir: Path, ask: FleetAsk) -> _Slice:
    frame = read_table(out_dir, "capacity", CAPACITY_COLUMNS)
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
    held = frame.filter(pl.col("within_max_context"))
    return _Slice(out_dir, frame, held, sla, workload, scenario, headroom)


def _targets(part: _Slice) -> list[str]:
    """The slice's targets whose deployments hold the workload's requests (at least one)."""
    if part.held.is_empty():
        raise InfersizeError(
            f"{part.out_dir}: no deployment holds the {part.workload} workload's longest "
            "request (prompt plus answer) within its models' max_position_embeddings"
        )
    return sorted(part.held["target"].unique().to_list())


def _answer(part: _Slice, target: str | None, rate: float, by: str) -> FleetAnswer:
    """Per GPU type, the best plain and speculative deployment of one target at `rate`: the
    target given, else the slice's only one (several: one line asking to choose)."""
    targets = _targets(part)
    chosen = _one_of(part.held, "target", target)
    frame = _priced(part.held.filter(pl.col("target") == chosen), rate, part.headroom)
    rows = []
    for gpu in sorted(frame["gpu"].unique().to_list()):
        of_gpu = frame.filter(pl.col("gpu") == gpu)
        best = {kind.key: _best(of_gpu, kind, by) for kind in ARMS}
        plain, spec = best[BASELINE.key], best[SPECULATIVE.key]
        saves = None if plain is None or spec is None else plain["gpus"] - spec["gpus"]
        rows.append(
            {"gpu": gpu, "gpu_name": of_gpu["gpu_name"][0]}
            | best
            | {"speculation_saves_gpus": saves}
        )
    beyond = sorted(set(part.rows["target"].to_list()) - set(targets))
    notes = [
        f"{part.workload} at {rate:g} requests/s, SLA {part.sla}; α scenario {part.scenario}; "
        f"headroom {part.headroom:g}",
        *(
            f"{other} cannot hold the {part.workload} workload's requests (max_position_embeddings)"
            for other in beyond
        ),
    ]
    return FleetAnswer(
        rows=rows, workload=part.workload, scenario=part.scenario, target=chosen, notes=notes
    )


def fewest_gpus(out_dir: Path, ask: FleetAsk) -> FleetAnswer:
    """One target's answer: the target asked, or the only one whose deployments hold the
    workload's requests; a table of several asks which (answers never mix models)."""
    if not (math.isfinite(ask.request_rate) and ask.request_rate > 0):
        raise ValueRangeError(
            "request_rate", f"must be a positive number, got {ask.request_rate:g}"
        )
    if ask.by not in BY:
        raise ValueRangeError("by", f"must be gpus or cost, got '{ask.by}'")
    return _answer(_slice(out_dir, ask), None, ask.request_rate, ask.by)


@record(kw_only=False)
class FleetCurve:
    gpu: str
    rates: list[float]
    gpus_by_arm: dict[ArmKind, list[int | None]]  # per rate, each arm's fewest GPUs

    def gpus(self, kind: ArmKind) -> list[int | None]:
        return self.gpus_by_arm[kind]


@record(kw_only=False)
class FleetPanel:
    """One target's GPUs needed against the request rate, per GPU type, both ways."""

    target: str
    workload: str
    scenario: int
    curves: list[FleetCurve]


def _panel(part: _Slice, target: str, rates: list[float]) -> FleetPanel:
    curves: dict[str, FleetCurve] = {}
    for rate in rates:
        for entry in _answer(part, target, rate, "gpus").rows:
            empty: dict[ArmKind, list[int | None]] = {kind: [] for kind in ARMS}
            curve = curves.setdefault(entry["gpu"], FleetCurve(entry["gpu"], [], empty))
            curve.rates.append(rate)
            for kind in ARMS:
                option = entry[kind.key]
                curve.gpus(kind).append(None if option is None else option["gpus"])
    return FleetPanel(target, part.workload, part.scenario, list(curves.values()))


def fleet_panels(out_dir: Path, ask: FleetAsk, rates: list[float]) -> list[FleetPanel]:
    """`plot capacity`: one panel per target, the one asked or else each whose deployments
    hold the workload's requests, by name."""
    part = _slice(out_dir, ask)
    return [_panel(part, target, rates) for target in _targets(part)]


CURVE_POINTS = 200  # rates a fleet curve is drawn at, evenly up to its largest


def curve_rates(out_dir: Path, max_rate: float | None = None) -> list[float]:
    """The rates a fleet curve is evaluated at: up to `max_rate`, else 1.5 × the largest
    swept target rate."""
    if max_rate is not None:
        MAX_RATE.check(max_rate)
    swept = read_table(out_dir, "capacity", CAPACITY_COLUMNS)["target_request_rate"]
    top = max_rate if max_rate is not None else 1.5 * float(swept.max() or 0.0)  # type: ignore[arg-type]
    if not (math.isfinite(top) and top > 0):
        raise ValueRangeError("max_rate", f"must be a positive number, got {top:g}")
    return [top * (i + 1) / CURVE_POINTS for i in range(CURVE_POINTS)]


@record
class FleetView:
    """A capacity sweep's answers for one workload, SLA and target: the fewest GPUs per GPU
    type at each swept target rate, and the curves over all rates (a section of the report)."""

    workload: str
    workload_text: str
    sla: str
    sla_terms: str
    target: str
    scenario: int
    answers: list[tuple[float, list[dict[str, Any]]]]
    curves: list[FleetCurve]
    notes: list[str]


def _workload_text(rows: pl.DataFrame, rates: list[float]) -> str:
    first = rows.row(0, named=True)
    return (
        f"{first['workload']}: {first['input_tokens']:g} prompt and {first['output_tokens']:g} "
        f"answer tokens per request on average, {first['arrival']} arrivals, target rates "
        + ", ".join(f"{r:g}" for r in rates)
        + " requests/s"
    )


def fleet_views(out_dir: Path) -> list[FleetView]:
    """Every (workload, SLA, target) of the sweep's capacity table at its middle α scenario;
    a target that cannot hold a workload's requests has no view of it."""
    frame = read_table(out_dir, "capacity", CAPACITY_COLUMNS)
    every_rate = curve_rates(out_dir)
    views = []
    keys = frame.select("workload", "sla", "sla_terms").unique(maintain_order=True)
    for workload, sla, terms in keys.iter_rows():
        rows = frame.filter(pl.col("workload") == workload)
        rates = sorted(rows["target_request_rate"].unique().to_list())
        part = _slice(out_dir, FleetAsk(request_rate=rates[0], sla=sla, workload=workload))
        for target in _targets(part) if not part.held.is_empty() else []:
            answers = [(rate, _answer(part, target, rate, "gpus")) for rate in rates]
            views.append(
                FleetView(
                    workload=workload,
                    workload_text=_workload_text(rows, rates),
                    sla=sla,
                    sla_terms=terms,
                    target=target,
                    scenario=part.scenario,
                    answers=[(rate, answer.rows) for rate, answer in answers],
                    curves=_panel(part, target, every_rate).curves,
                    notes=answers[0][1].notes[1:],
                )
            )
    return views
