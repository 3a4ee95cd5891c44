"""capacity.parquet/.csv: a chunk's rows (sweep/capacity_rows.py says how each is answered), in
the order of its settings, then workload, SLA, α scenario and target rate."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import pyarrow as pa

from infersize.catalog.store import Catalog, load_catalog
from infersize.errors import InfersizeError
from infersize.service.capacity import prepare_capacity
from infersize.sweep.capacity_columns import CAPACITY_BY_NAME, CAPACITY_COLUMNS
from infersize.sweep.capacity_rows import (
    Answer,
    Case,
    ScreenCache,
    capacity_request,
    fewest_gpus,
    gpus_needed,
    iter_cases,
    near_edge,
    screen,
    simulate,
)
from infersize.sweep.columns import ARROW_TYPES
from infersize.sweep.settings import CapacityPlan, Scoring, Setting

NO_ROOM = Answer(draft_k=0, max_request_rate=(0.0, 0.0), latency_ms={}, simulated=False)


def _screened(case: Case, request: Any, catalog: Catalog, cache: ScreenCache) -> Answer:
    try:
        prepared = prepare_capacity(request, catalog)
        return screen(prepared, request, case.workload.target_request_rates, cache)
    except InfersizeError:  # no room for a KV cache: no rate meets any SLA
        return NO_ROOM


def chunk_answers(
    settings: tuple[Setting, ...], scenarios: int, ks: tuple[int, ...], scoring: Scoring,
    plan: CapacityPlan,
) -> list[tuple[Case, Answer]]:  # fmt: skip
    """Every case of the chunk, screened, then the leaders and edge cases of each (GPU, target,
    workload, SLA) group simulated."""
    catalog = load_catalog(tuple(scoring.catalog_files))
    cases = list(iter_cases(settings, plan, scenarios))
    requests = [capacity_request(c, scoring, max(ks), plan) for c in cases]
    screens = ScreenCache()
    answers = [_screened(c, r, catalog, screens) for c, r in zip(cases, requests, strict=True)]
    groups: dict[tuple[str, str, str, str], list[int]] = defaultdict(list)
    for i, case in enumerate(cases):
        groups[case.group].append(i)
    chosen: set[int] = set()
    for members in groups.values():
        ranked = sorted(
            members, key=lambda i: (fewest_gpus(answers[i], cases[i], plan.headroom), i)
        )
        chosen.update(i for i in ranked[: plan.simulate_top] if answers[i] is not NO_ROOM)
        chosen.update(i for i in members if near_edge(answers[i], cases[i], plan.headroom))
    cache: dict[Any, Any] = {}
    for i in sorted(chosen):
        answers[i] = simulate(requests[i], catalog, cases[i].workload.target_request_rates, cache)
    return list(zip(cases, answers, strict=True))


def _row(
    case: Case, answer: Answer, rate: float, plan: CapacityPlan, gpu_name: str
) -> dict[str, Any]:
    s, w = case.setting, case.workload
    price = s.price_usd_per_hour
    gpus = gpus_needed(answer, rate, plan.headroom, s.tp)
    replicas = [None if g is None else g // s.tp for g in gpus]
    latency = answer.latency_ms.get(rate, (None, None))
    row: dict[str, Any] = {
        "gpu": s.gpu, "gpu_name": gpu_name, "tp": s.tp, "target": s.target,
        "target_quant": s.target_quant, "kv_dtype": s.kv_dtype, "method": s.method,
        "draft": s.draft, "draft_quant": s.draft_quant, "workload": w.name,
        "input_tokens": sum(w.input_tokens) / len(w.input_tokens),
        "output_tokens": sum(w.output_tokens) / len(w.output_tokens), "arrival": w.arrival,
        "sla": case.sla_name, "sla_terms": case.sla, "acceptance_scenario": case.scenario,
        "acceptance_rate": s.alphas[case.scenario], "target_request_rate": rate,
        "engine": "", "price_usd_per_hour": price, "draft_k": answer.draft_k,
        "speculation_saves_gpus": None if None in gpus else gpus[0] - gpus[1],  # type: ignore[operator]
        "capacity_source": "simulator" if answer.simulated else "mean-field",
    }  # fmt: skip
    for index, arm in enumerate(("baseline", "speculative")):
        row[f"max_request_rate_{arm}"] = answer.max_request_rate[index]
        row[f"replicas_{arm}"] = replicas[index]
        row[f"gpus_{arm}"] = gpus[index]
        count = gpus[index]
        row[f"usd_per_hour_{arm}"] = None if count is None or price is None else count * price
        figures = latency[index]
        for j, name in enumerate(("ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms")):
            row[f"{name}_{arm}"] = None if figures is None else figures[j]
    return row


def capacity_rows(
    settings: tuple[Setting, ...], scenarios: int, ks: tuple[int, ...], scoring: Scoring,
    plan: CapacityPlan,
) -> list[dict[str, Any]]:  # fmt: skip
    catalog = load_catalog(tuple(scoring.catalog_files))
    names = {s.gpu: catalog.gpu(s.gpu).name for s in settings}
    rows = []
    for case, answer in chunk_answers(settings, scenarios, ks, scoring, plan):
        for rate in case.workload.target_request_rates:
            row = _row(case, answer, rate, plan, names[case.setting.gpu])
            row["engine"] = scoring.engine.engine
            rows.append(row)
    return rows


def rows_table(rows: list[dict[str, Any]]) -> pa.Table:
    """The rows as Arrow, every column typed and described (a chunk with none: no rows)."""
    fields = [
        pa.field(
            c.name, ARROW_TYPES[c.kind], metadata={"unit": c.unit, "description": c.description}
        )
        for c in CAPACITY_COLUMNS
    ]
    schema = pa.schema(fields)
    columns = []
    for field in fields:
        values = [row[field.name] for row in rows]
        if CAPACITY_BY_NAME[field.name].kind == "float":
            values = [None if v is None or not math.isfinite(v) else float(v) for v in values]
        columns.append(pa.array(values, type=field.type))
    return pa.table(columns, schema=schema)
