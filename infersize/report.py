"""Terminal rendering (rich) of the spec panel and of catalog listings. No maths here."""

from __future__ import annotations

import sys
from typing import Any

from rich import box
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

UNITS = {"gib": (2**30, "GiB"), "gb": (1e9, "GB")}
TITLE = "SPECULATIVE DECODING JOINT SIZER & LEVIATHAN SPEEDUP"
LABEL_WIDTH = 20
VERDICT_STYLE = {"safe": "green", "tight": "yellow", "OOM": "bold red"}


def _size(n_bytes: float, units: str) -> str:
    scale, label = UNITS[units]
    return f"{n_bytes / scale:.2f} {label}"


def _line(console: Console, label: str, value: str | Text, width: int = LABEL_WIDTH) -> None:
    text = Text(f"{label + ':':<{width}}")
    text.append(value if isinstance(value, Text) else Text(value))
    console.print(text, highlight=False, soft_wrap=True)


def _next(console: Console, label: str, value: str | Text) -> None:
    """A line of the part after the seed's panel (longer labels)."""
    _line(console, label, value, width=22)


def _speedup_label(model: str) -> str:
    return {
        "leviathan": "Leviathan Speedup",
        "roofline": "Roofline Speedup",
        "linear": "Seed Linear Speedup",
    }[model]


def render_spec(console: Console, d: dict[str, Any], units: str = "gib") -> None:
    """The seed's panel (same labels, same order), then what a user needs next."""
    console.print(Panel(Text(TITLE, justify="center"), box=box.HEAVY, expand=False, width=63))
    per_gpu = f" per GPU (TP {d['gpu']['count']})" if d["gpu"]["count"] > 1 else ""
    t, dr = d["target"], d["draft"]
    _line(
        console,
        "Target Model",
        f"{t['model']} ({t['quant']}) -> {_size(t['total_bytes'], units)} VRAM{per_gpu}",
    )
    if dr:
        _line(
            console,
            "Draft Model",
            f"{dr['model']} ({dr['quant']}) -> {_size(dr['total_bytes'], units)} VRAM",
        )
    else:
        _line(console, "Draft Model", "none (the target alone, no speculation)")
    verdict = Text(f"{_size(d['combined_bytes'], units)} (")
    verdict.append(
        d["verdict"].capitalize() if d["verdict"] != "OOM" else "OOM",
        style=VERDICT_STYLE[d["verdict"]],
    )
    verdict.append(f" on {d['gpu']['name']}, {d['utilization'] * 100:.1f}% utilized)")
    _line(console, "Combined VRAM", verdict)
    if dr:
        _line(console, "Acceptance Rate α", f"{d['acceptance_rate']:g}")
        _line(console, "Draft Length K", str(d["draft_k"]))
        source = "" if d.get("latency_ratio_source") == "given" else " (roofline step times)"
        _line(console, "Latency Ratio γ", f"{d['latency_ratio']:.1f}x{source}")
        _line(
            console,
            _speedup_label(d["speedup_model"]),
            f"{d['speedup']:.2f}x wall-clock acceleration",
        )
    console.print()
    _render_breakdown(console, d, units)
    _render_next(console, d)


def _render_breakdown(console: Console, d: dict[str, Any], units: str) -> None:
    scale, label = UNITS[units]
    t, dr = d["target"], d["draft"]
    per_gpu = " per GPU" if d["gpu"]["count"] > 1 else ""
    table = Table(title=f"Memory ({label}{per_gpu})", box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("")
    table.add_column("target", justify="right")
    table.add_column("draft", justify="right")
    tokens = d["context_length"] + (d["draft_k"] or 0)

    def cell(side: dict[str, Any] | None, key: str) -> str:
        return f"{side[key] / scale:.2f}" if side else "-"

    table.add_row("weights", cell(t, "weights_bytes"), cell(dr, "weights_bytes"))
    table.add_row(
        f"KV cache ({d['kv_dtype']}, {tokens} tokens × {d['batch_size']})",
        cell(t, "kv_cache_bytes"),
        cell(dr, "kv_cache_bytes"),
    )
    table.add_row(
        "workspace (logits, activations)", cell(t, "workspace_bytes"), cell(dr, "workspace_bytes")
    )
    table.add_row(
        f"runtime overhead ({d['engine']}, one process)", "", f"{d['overhead_bytes'] / scale:.2f}"
    )
    table.add_row("combined", "", f"{d['combined_bytes'] / scale:.2f}", style="bold")
    console.print(table)
    if "kv_pool_bytes" in d:
        _next(
            console,
            "vLLM KV pool",
            f"{_size(d['kv_pool_bytes'], units)} per GPU at "
            f"gpu_memory_utilization {d['gpu_memory_utilization']:g}: "
            f"{d['kv_pool_tokens']:,} tokens, {d['max_concurrent_sequences']:.1f}x concurrency "
            f"at {d['context_length']} tokens",
        )


def _render_next(console: Console, d: dict[str, Any]) -> None:
    if d["draft"]:
        _next(
            console,
            "Expected tokens/step",
            f"{d['expected_tokens_per_step']:.2f} (E = (1 − α^(K+1)) / (1 − α))",
        )
        if d["optimal_k"] is None:
            _next(console, "Optimal K", "none: no K fits in memory")
        else:
            _next(
                console,
                "Optimal K",
                f"{d['optimal_k']} -> {d['speedup_at_optimal_k']:.2f}x "
                f"({d['speedup_model']}, within memory)",
            )
        be = d["break_even_acceptance_rate"]
        _next(
            console,
            "Break-even α",
            (f"{be:.3f} at K={d['draft_k']} (below it speculation slows decoding)")
            if be is not None
            else f"none at K={d['draft_k']}: speculation never pays",
        )
    per = f"batch {d['batch_size']}"
    if d["draft"]:
        tput = (
            f"{d['baseline_tokens_per_s']:,.0f} -> {d['speculative_tokens_per_s']:,.0f} "
            f"tokens/s ({per}); {d['baseline_ms_per_token']:.2f} -> "
            f"{d['speculative_ms_per_token']:.2f} ms/token"
        )
    else:
        tput = (
            f"{d['baseline_tokens_per_s']:,.0f} tokens/s ({per}); "
            f"{d['baseline_ms_per_token']:.2f} ms/token"
        )
    _next(console, "Throughput", tput)
    if d["usd_per_mtok"] is not None:
        _next(
            console,
            "Cost",
            f"${d['usd_per_mtok']:.3f} per million tokens at "
            f"${d['price_usd_per_hour']:.2f}/GPU-hour",
        )
    if d["draft"]:
        cross = d["crossover_batch_size"]
        _next(
            console,
            "Crossover batch",
            (
                f"{cross} (roofline: speculation stops paying)"
                if cross
                else "none up to 2048 (roofline)"
            )
            + _fitting(d),
        )
    for note in d["notes"]:
        console.print(Text(f"note: {note}", style="dim"), soft_wrap=True)


def console(stderr: bool = False, quiet: bool = False) -> Console:
    """A console that does not crop tables when output goes to a file or pipe."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, quiet=quiet, width=None if stream.isatty() else 160)


def _fitting(d: dict[str, Any]) -> str:
    """The crossover ignores memory: say which batches fit at all."""
    largest = d.get("max_fitting_batch_size")
    if largest is None:
        return "; no batch fits at this K"
    return f"; batches up to {largest} fit in memory"


WRAPPING = ("name", "target", "draft")


def render_table(console: Console, title: str, columns: list[str], rows: list[list[Any]]) -> None:
    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    for col in columns:
        text_column = col in ("id", "name", "family", "tokenizer", "gpu", "target", "draft", "axis")
        table.add_column(
            col,
            justify="left" if text_column else "right",
            # long names wrap inside their cell; numbers and ids never lose a column
            no_wrap=col not in WRAPPING,
            min_width=len(col) if col not in WRAPPING else 12,
        )
    for row in rows:
        table.add_row(*(str(v) for v in row))
    console.print(table)
