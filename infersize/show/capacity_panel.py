"""The `infersize capacity` panel: the deployment and workload, both arms side by side, and one
line on whether speculation pays at this load. Reads a CapacityResult; computes nothing."""

from __future__ import annotations

import math
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from infersize.core.serving.metrics import Stats
from infersize.service.capacity.answer import BASELINE, SPECULATIVE, ArmResult, CapacityResult


def _ms(stats: Stats, statistic: str) -> str:
    value = stats.get(statistic)
    return f"{value:,.1f}" if math.isfinite(value) else "-"  # no request has one


def _seconds(stats: Stats, statistic: str) -> str:
    value = stats.get(statistic)
    return f"{value:,.2f}" if math.isfinite(value) else "-"


def _number(value: float | int | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    return f"{value:,}" if isinstance(value, int) else f"{value:,.{digits}f}"


def _rows(arm: ArmResult) -> list[tuple[str, str]]:
    return [
        ("TTFT p50 / p99 (ms)", f"{_ms(arm.ttft_ms, 'p50')} / {_ms(arm.ttft_ms, 'p99')}"),
        ("TPOT p50 / p99 (ms)", f"{_ms(arm.tpot_ms, 'p50')} / {_ms(arm.tpot_ms, 'p99')}"),
        ("ITL p50 / p99 (ms)", f"{_ms(arm.itl_ms, 'p50')} / {_ms(arm.itl_ms, 'p99')}"),
        (
            "e2e p50 / p99 (s)",
            f"{_seconds(arm.e2e_latency_s, 'p50')} / {_seconds(arm.e2e_latency_s, 'p99')}",
        ),
        ("output tokens/s", _number(arm.output_tokens_per_s, 0)),
        ("requests/s", _number(arm.requests_per_s)),
        ("mean running sequences", _number(arm.mean_running_sequences, 1)),
        ("preemptions", _number(arm.preemptions)),
        ("KV pool (tokens) / max_num_seqs", f"{arm.kv_pool_tokens:,} / {arm.max_num_seqs:,}"),
    ]


def _rate(arm: ArmResult) -> float:
    return 0.0 if arm.capacity is None else arm.capacity.max_request_rate


def _headline(r: CapacityResult) -> str:
    """One line: does speculation pay at this load?"""
    spec, base = r.speculative, r.baseline
    if spec is None:
        return "no drafter: the target alone"
    if spec.draft_k == 0 and r.draft_fits is False:
        return "the draft leaves no room for a KV cache at any K: plain decoding (K = 0)"
    if spec.draft_k == 0:
        return "speculation does not pay at this load: the best K is 0 (plain decoding)"
    tpot = f"p50 TPOT {_ms(spec.tpot_ms, 'p50')} ms vs {_ms(base.tpot_ms, 'p50')} ms"
    if not math.isfinite(spec.tpot_ms.p50 + base.tpot_ms.p50):
        tpot = "no TPOT: every answer is one token"
    faster = spec.tpot_ms.p50 < base.tpot_ms.p50
    if r.sla is None:
        verdict = "pays" if faster else "does not pay"
        return f"speculation {verdict} at this load (K={spec.draft_k}): {tpot}"
    spec_rate, base_rate = _rate(spec), _rate(base)
    if spec_rate == base_rate == 0.0:
        return f"neither arm meets the SLA at any rate (K={spec.draft_k}): {tpot}"
    capacity = f"capacity {spec_rate:,.2f} vs {base_rate:,.2f} requests/s per replica"
    if spec.tp != base.tp:  # replicas of different sizes: compare what a GPU serves
        spec_rate, base_rate = spec_rate / spec.tp, base_rate / base.tp
        capacity = f"capacity {spec_rate:,.2f} vs {base_rate:,.2f} requests/s per GPU"
    if faster and spec_rate >= base_rate:
        return f"speculation pays (K={spec.draft_k}): {tpot}; {capacity}"
    if faster:
        return f"speculation cuts latency but costs capacity (K={spec.draft_k}): {tpot}; {capacity}"
    if spec_rate > base_rate:
        return f"speculation adds capacity, not speed (K={spec.draft_k}): {tpot}; {capacity}"
    return f"speculation does not pay (K={spec.draft_k}): {tpot}; {capacity}"


def _with_range(value: str, low: str, high: str) -> str:
    return value if low == high == value else f"{value} ({low}–{high})"


def _capacity_cell(arm: ArmResult) -> str:
    capacity = arm.capacity
    if capacity is None:
        return "-"
    value = _number(capacity.max_request_rate)
    if capacity.interval is None:
        return value
    return _with_range(value, *(_number(v) for v in capacity.interval))


def _gpus_cell(arm: ArmResult) -> str:
    fleet = arm.fleet
    if fleet is None or fleet.gpus is None:
        return "-"
    value = _number(fleet.gpus)
    if fleet.gpus_interval is None:
        return value
    low, high = fleet.gpus_interval
    return _with_range(value, _number(low), "no count" if high is None else _number(high))


def _sla_rows(r: CapacityResult, arms: list[ArmResult]) -> list[list[str]]:
    rows = [
        ["meets SLA at this load", *("yes" if a.meets_sla else "no" for a in arms)],
        ["max requests/s per replica", *(_capacity_cell(a) for a in arms)],
    ]
    if any(a.latency_floor is not None for a in arms):
        rows.append(
            ["one request alone uses", *(_floor_cell(a) for a in arms)],
        )
    if r.target_request_rate is not None:
        rows += [
            [
                f"replicas for {r.target_request_rate:g} req/s",
                *(_number(None if a.fleet is None else a.fleet.replicas) for a in arms),
            ],
            ["GPUs", *(_gpus_cell(a) for a in arms)],
        ]
        if r.price_usd_per_hour is not None:
            rows.append(
                [
                    "$/hour",
                    *(_number(None if a.fleet is None else a.fleet.usd_per_hour) for a in arms),
                ]
            )
    return rows


def _floor_cell(arm: ArmResult) -> str:
    floor = arm.latency_floor
    if floor is None:
        return "-"
    return f"{floor.share:.0%} of {floor.term.split('<')[0]}"


def _within_range(arm: ArmResult) -> str:
    """A breach at a load inside the capacity's range is the draws' luck, not a verdict."""
    rate, capacity = arm.load_request_rate, arm.capacity
    if rate is None or capacity is None or capacity.interval is None:
        return ""
    low, high = capacity.interval
    if not low <= rate <= high:
        return ""
    return (
        f" (inside capacity's 95 % range {low:,.2f}–{high:,.2f}: these draws break it, "
        "others do not; --headroom leaves a margin)"
    )


def _deployment_line(r: CapacityResult) -> str:
    drafter = "" if r.draft is None else f" + {r.draft} ({r.method})"
    tps = {arm.tp for arm in r.arms.values()}
    layout = f"× {r.tp}" if len(tps) == 1 else "× TP per arm (below)"
    return f"Deployment:  {r.target}{drafter} on {r.gpu_name} {layout} ({r.engine})"


def render_capacity(console: Console, r: CapacityResult) -> None:
    w = r.workload
    if w["request_rate"] is not None:
        load = f"{w['request_rate']:g} requests/s ({w['arrival']})"
    elif w["concurrency"] is not None:
        load = f"{w['concurrency']} concurrent clients"
    else:
        load = f"each replica's share of {r.target_request_rate:g} requests/s ({w['arrival']})"
    lengths = f"{w['input_tokens']:,.0f} in / {w['output_tokens']:,.0f} out tokens"
    if w["lengths_file"]:
        lengths = f"trace {w['lengths_file']} (mean {lengths})"
    console.print(_deployment_line(r), markup=False, highlight=False)
    console.print(
        f"Workload:    {lengths}; {load}; {w['requests']:,} requests, seed {w['seed']}",
        markup=False,
        highlight=False,
    )
    if r.sla:
        console.print(f"SLA:         {r.sla}", markup=False, highlight=False)
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("")
    arms = list(r.arms.values())
    for kind, arm in r.arms.items():
        table.add_column(f"{kind.key} (K={arm.draft_k})", justify="right")
    if len({arm.tp for arm in arms}) > 1:
        table.add_row("TP (GPUs per replica)", *(str(a.tp) for a in arms))
    rows = [_rows(arm) for arm in arms]
    for i, (label, _) in enumerate(rows[0]):
        table.add_row(label, *(row[i][1] for row in rows))
    if r.sla:
        for row in _sla_rows(r, arms):
            table.add_row(*row)
    console.print(table)
    console.print(_headline(r), markup=False, highlight=False)
    for kind, arm in r.arms.items():
        if arm.capacity is not None:
            line = f"capacity ({kind.key}): {arm.capacity.why}"
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        if arm.sla_breaches and not arm.meets_sla:
            line = f"at this load ({kind.key}, {arm.load}): {'; '.join(arm.sla_breaches)}"
            console.print(line + _within_range(arm), markup=False, highlight=False, soft_wrap=True)
    if r.confidence != "high":
        line = f"confidence {r.confidence}: {r.confidence_reason}"
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    for note in r.notes:
        console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)


FLEET_COLUMNS = [
    "gpu",
    "plain decoding",
    "GPUs",
    "$/h",
    "with speculation",
    "K",
    "GPUs ",
    "$/h ",
    "saves",
]


def _deployment(row: dict[str, Any] | None, speculative: bool) -> str:
    if row is None:
        return "no row meets the SLA"
    tp = f" tp{row['tp']}" if row["tp"] != 1 else ""
    text = f"{row['target']} {row['target_quant']}{tp} kv {row['kv_dtype']}"
    if speculative:
        quant = "" if row["draft_quant"] == "none" else f" {row['draft_quant']}"
        text += f" + {row['draft']}{quant}"
    return text


def fleet_rows(rows: list[dict[str, Any]]) -> list[list[str]]:
    """`best --request-rate`: per GPU type, the best plain and speculative deployment."""
    out = []
    for entry in rows:
        plain, spec = entry[BASELINE.key], entry[SPECULATIVE.key]
        saves = entry["speculation_saves_gpus"]
        out.append(
            [
                str(entry["gpu"]),
                _deployment(plain, False),
                _number(None if plain is None else plain["gpus"]),
                _number(None if plain is None else plain["usd_per_hour"]),
                _deployment(spec, True),
                "-" if spec is None else str(spec["draft_k"]),
                _number(None if spec is None else spec["gpus"]),
                _number(None if spec is None else spec["usd_per_hour"]),
                "-" if saves is None else f"{saves:+d}",
            ]
        )
    return out
