"""The `infersize capacity` panel: the deployment and workload, both arms side by side, and one
line on whether speculation pays at this load. Reads a CapacityResult; computes nothing."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from infersize.core.metrics import Stats
from infersize.service.capacity_result import ArmResult, CapacityResult


def _ms(stats: Stats, statistic: str) -> str:
    return f"{stats.get(statistic):,.1f}"


def _number(value: float | int | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    return f"{value:,}" if isinstance(value, int) else f"{value:,.{digits}f}"


def _rows(arm: ArmResult) -> list[tuple[str, str]]:
    return [
        ("TTFT p50 / p99 (ms)", f"{_ms(arm.ttft_ms, 'p50')} / {_ms(arm.ttft_ms, 'p99')}"),
        ("TPOT p50 / p99 (ms)", f"{_ms(arm.tpot_ms, 'p50')} / {_ms(arm.tpot_ms, 'p99')}"),
        ("ITL p50 / p99 (ms)", f"{_ms(arm.itl_ms, 'p50')} / {_ms(arm.itl_ms, 'p99')}"),
        ("e2e p50 / p99 (s)", f"{arm.e2e_latency_s.p50:,.2f} / {arm.e2e_latency_s.p99:,.2f}"),
        ("output tokens/s", _number(arm.output_tokens_per_s, 0)),
        ("requests/s", _number(arm.requests_per_s)),
        ("mean running sequences", _number(arm.mean_running_sequences, 1)),
        ("preemptions", _number(arm.preemptions)),
        ("KV pool (tokens) / max_num_seqs", f"{arm.kv_pool_tokens:,} / {arm.max_num_seqs:,}"),
    ]


def _headline(r: CapacityResult) -> str:
    """One line: does speculation pay at this load?"""
    spec, base = r.speculative, r.baseline
    if spec is None:
        return "no drafter: the target alone"
    if spec.draft_k == 0 and r.draft_fits is False:
        return "the draft leaves no room for a KV cache at any K: plain decoding (K = 0)"
    if spec.draft_k == 0:
        return "speculation does not pay at this load: the best K is 0 (plain decoding)"
    tpot = f"p50 TPOT {spec.tpot_ms.p50:.1f} ms vs {base.tpot_ms.p50:.1f} ms"
    faster = spec.tpot_ms.p50 < base.tpot_ms.p50
    if r.max_request_rate is None:
        verdict = "pays" if faster else "does not pay"
        return f"speculation {verdict} at this load (K={spec.draft_k}): {tpot}"
    spec_rate = r.max_request_rate["speculative"] or 0.0
    base_rate = r.max_request_rate["baseline"] or 0.0
    if spec_rate == base_rate == 0.0:
        return f"neither arm meets the SLA at any rate (K={spec.draft_k}): {tpot}"
    capacity = f"capacity {spec_rate:,.2f} vs {base_rate:,.2f} requests/s per replica"
    if faster and spec_rate >= base_rate:
        return f"speculation pays (K={spec.draft_k}): {tpot}; {capacity}"
    if faster:
        return f"speculation cuts latency but costs capacity (K={spec.draft_k}): {tpot}; {capacity}"
    if spec_rate > base_rate:
        return f"speculation adds capacity, not speed (K={spec.draft_k}): {tpot}; {capacity}"
    return f"speculation does not pay (K={spec.draft_k}): {tpot}; {capacity}"


def render_capacity(console: Console, r: CapacityResult) -> None:
    w = r.workload
    load = (
        f"{w['request_rate']:g} requests/s ({w['arrival']})"
        if w["request_rate"] is not None
        else f"{w['concurrency']} concurrent clients"
    )
    lengths = f"{w['input_tokens']:,.0f} in / {w['output_tokens']:,.0f} out tokens"
    if w["lengths_file"]:
        lengths = f"trace {w['lengths_file']} (mean {lengths})"
    drafter = "" if r.draft is None else f" + {r.draft} ({r.method})"
    console.print(f"Deployment:  {r.target}{drafter} on {r.gpu_name} × {r.tp} ({r.engine})")
    console.print(f"Workload:    {lengths}; {load}; {w['requests']:,} requests, seed {w['seed']}")
    if r.sla:
        console.print(f"SLA:         {r.sla}")
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("")
    arms = [("baseline", r.baseline)] + (
        [] if r.speculative is None else [("speculative", r.speculative)]
    )
    for name, arm in arms:
        table.add_column(f"{name} (K={arm.draft_k})", justify="right")
    rows = [_rows(arm) for _, arm in arms]
    for i, (label, _) in enumerate(rows[0]):
        table.add_row(label, *(row[i][1] for row in rows))
    if r.sla:
        table.add_row("meets SLA at this load", *("yes" if a.meets_sla else "no" for _, a in arms))
        table.add_row("max requests/s per replica", *(_number(a.max_request_rate) for _, a in arms))
    if r.replicas is not None and r.gpus is not None:
        table.add_row(
            f"replicas for {r.target_request_rate:g} req/s",
            *(_number(r.replicas[n]) for n, _ in arms),
        )
        table.add_row("GPUs", *(_number(r.gpus[n]) for n, _ in arms))
        if r.usd_per_hour is not None and r.price_usd_per_hour is not None:
            table.add_row("$/hour", *(_number(r.usd_per_hour[n]) for n, _ in arms))
    console.print(table)
    console.print(_headline(r))
    for name, arm in arms:
        if arm.max_request_rate_why:
            console.print(f"capacity ({name}): {arm.max_request_rate_why}")
    for note in r.notes:
        console.print(f"note: {note}", highlight=False, soft_wrap=True)


FLEET_COLUMNS = [
    "gpu", "plain decoding", "GPUs", "$/h", "with speculation", "K", "GPUs ", "$/h ", "saves",
]  # fmt: skip


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
        plain, spec = entry["plain"], entry["speculative"]
        saves = entry["speculation_saves_gpus"]
        out.append([
            str(entry["gpu"]), _deployment(plain, False),
            _number(None if plain is None else plain["gpus"]),
            _number(None if plain is None else plain["usd_per_hour"]),
            _deployment(spec, True), "-" if spec is None else str(spec["draft_k"]),
            _number(None if spec is None else spec["gpus"]),
            _number(None if spec is None else spec["usd_per_hour"]),
            "-" if saves is None else f"{saves:+d}",
        ])  # fmt: skip
    return out
