"""capacity.parquet/.csv: a chunk's rows (sweep/capacity/rows.py says how each is answered), in
the order of its settings, then α scenario and target rate (a chunk holds one (GPU, target)
group under one workload and SLA, so the table runs group by group, then by workload and SLA);
and which tables a sweep writes (the capacity table only where the sweep has capacity axes)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from infersize.catalog.records import Gpu
from infersize.catalog.store import load_catalog
from infersize.core.deployment import hourly_price
from infersize.service.capacity.answer import ARMS, BASELINE, SPECULATIVE
from infersize.service.capacity.confirm import answer_rows
from infersize.service.capacity.fleet import Fleet, fleet
from infersize.service.capacity.screen import Latency, RowAnswer, RowArm
from infersize.sweep.arrow_types import arrow_schema
from infersize.sweep.capacity.columns import CAPACITY_BY_NAME, CAPACITY_COLUMNS
from infersize.sweep.capacity.rows import Case, capacity_row, iter_cases
from infersize.sweep.columns import SETTING_COLUMNS
from infersize.sweep.score import ChunkTask, Scored
from infersize.sweep.settings import CapacityPlan, Scoring, Setting
from infersize.sweep.tables import OUTPUT_TABLES, OutputTable


def chunk_answers(
    settings: tuple[Setting, ...],
    scenarios: int,
    ks: tuple[int, ...],
    scoring: Scoring,
    plan: CapacityPlan,
) -> list[tuple[Case, RowAnswer]]:
    """The chunk's cases, each answered by the service (screened, and simulated where it
    counts: service/capacity/screen.py)."""
    catalog = load_catalog(tuple(scoring.catalog_files))
    cases = list(iter_cases(settings, plan, scenarios))
    rows = [capacity_row(case, scoring, max(ks), plan) for case in cases]
    answers = answer_rows(rows, catalog, plan.simulate_top, plan.headroom, plan.simulate_all)
    return list(zip(cases, answers, strict=True))


def _within_max_context(case: Case) -> bool:
    """Whether the workload's longest request (prompt plus answer) fits both models'
    positions."""
    s, longest = case.setting, case.workload.longest_request_tokens
    limits = [s.target_max_context_tokens, s.draft_max_context_tokens]
    return all(limit is None or longest <= limit for limit in limits)


def _row(
    case: Case, answer: RowAnswer, rate: float, plan: CapacityPlan, gpu: Gpu
) -> dict[str, Any]:
    s, w = case.setting, case.workload
    price_or_nan = hourly_price(gpu, s.price_usd_per_hour)
    price = None if math.isnan(price_or_nan) else price_or_nan
    fleets = {
        kind: fleet(
            rate,
            answer.arm(kind).max_request_rate,
            answer.arm(kind).interval,
            headroom=plan.headroom,
            tp=s.tp,
            price=price,
        )
        for kind in ARMS
    }
    plain, speculative = fleets[BASELINE].gpus, fleets[SPECULATIVE].gpus
    row: dict[str, Any] = {
        **{name: getattr(s, name) for name in SETTING_COLUMNS},
        "gpu_name": gpu.name,
        "workload": w.name,
        "input_tokens": sum(w.input_tokens) / len(w.input_tokens),
        "output_tokens": sum(w.output_tokens) / len(w.output_tokens),
        "arrival": w.arrival,
        "within_max_context": _within_max_context(case),
        "target_max_context_tokens": s.target_max_context_tokens,
        "draft_max_context_tokens": s.draft_max_context_tokens,
        "sla": case.sla_name,
        "sla_terms": case.sla,
        "acceptance_scenario": case.scenario,
        "acceptance_rate": s.alpha_on(w.kind, case.scenario),
        "target_request_rate": rate,
        "workload_kind": w.kind,
        "engine": "",
        "price_usd_per_hour": price,
        "draft_k": answer.draft_k,
        "max_request_rate_k_schedule": answer.k_schedule_request_rate,
        "break_even_request_rate": answer.break_even_request_rate,
        "speculation_saves_gpus": (
            None if plain is None or speculative is None else plain - speculative
        ),
        "capacity_source": "simulator" if answer.simulated else "mean-field",
    }
    for kind, arm_fleet in fleets.items():
        columns = _arm_columns(answer.arm(kind), arm_fleet, rate)
        row |= {f"{name}_{kind.key}": value for name, value in columns.items()}
    return row


def _arm_columns(arm: RowArm, arm_fleet: Fleet, rate: float) -> dict[str, Any]:
    """One arm's columns, less the arm's suffix: its capacity and range, its fleet at `rate`
    and the latencies at that rate's load per replica."""
    low, high = arm.interval or (None, None)
    gpus_low, gpus_high = arm_fleet.gpus_interval or (None, None)
    latency = arm.latency_ms.get(rate)
    columns = {
        "max_request_rate": arm.max_request_rate,
        "max_request_rate_low": low,
        "max_request_rate_high": high,
        "replicas": arm_fleet.replicas,
        "gpus": arm_fleet.gpus,
        "gpus_low": gpus_low,
        "gpus_high": gpus_high,
        "usd_per_hour": arm_fleet.usd_per_hour,
    }
    for name in Latency._fields:
        columns[name] = None if latency is None else getattr(latency, name)
    return columns


def capacity_rows(
    settings: tuple[Setting, ...],
    scenarios: int,
    ks: tuple[int, ...],
    scoring: Scoring,
    plan: CapacityPlan,
) -> list[dict[str, Any]]:
    catalog = load_catalog(tuple(scoring.catalog_files))
    gpus = {s.gpu: catalog.gpu(s.gpu) for s in settings}
    rows = []
    for case, answer in chunk_answers(settings, scenarios, ks, scoring, plan):
        for rate in case.workload.target_request_rates:
            row = _row(case, answer, rate, plan, gpus[case.setting.gpu])
            row["engine"] = scoring.engine.engine
            rows.append(row)
    return rows


def rows_table(rows: list[dict[str, Any]]) -> pa.Table:
    """The rows as Arrow, every column typed and described (a chunk with none: no rows)."""
    schema = arrow_schema(CAPACITY_COLUMNS)
    columns = []
    for field in schema:
        values = [row[field.name] for row in rows]
        if CAPACITY_BY_NAME[field.name].kind == "float":
            values = [None if v is None or not math.isfinite(v) else float(v) for v in values]
        columns.append(pa.array(values, type=field.type))
    return pa.table(columns, schema=schema)


def capacity_table(task: ChunkTask, scored: Scored | None) -> pa.Table:
    """The capacity rows of the chunk's settings under its workload and SLA (the decode cells
    play no part)."""
    if task.capacity is None:
        return rows_table([])
    settings, scenarios, ks = task.settings, task.scenarios, task.ks
    return rows_table(capacity_rows(settings, scenarios, ks, task.scoring, task.capacity))


CAPACITY_TABLE = OutputTable(
    name="capacity",
    description="per (GPU, TP, target, target precision, KV dtype, method, draft, draft "
    "precision, workload, SLA, α scenario, target rate): request rates per replica within the "
    "SLA with and without speculation, and the replicas, GPUs and dollars the rate needs",
    build=capacity_table,
    columns=CAPACITY_COLUMNS,
)


def simulated_rows(tables: Iterable[pa.Table]) -> int:
    """Rows of capacity tables the simulator answered."""
    return sum(
        int(pc.sum(pc.equal(t["capacity_source"], "simulator")).as_py() or 0) for t in tables
    )


def output_tables(with_capacity: bool) -> dict[str, OutputTable]:
    """The tables a sweep writes, in order: the decode tables, then the capacity table where
    the sweep has workloads and SLAs."""
    return {**OUTPUT_TABLES, **({"capacity": CAPACITY_TABLE} if with_capacity else {})}
