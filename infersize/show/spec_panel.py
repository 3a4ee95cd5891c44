"""The `infersize spec` panel: the seven labelled lines of the seed example, in its order,
then the memory breakdown and what a user needs next. Reads a SpecResult; computes nothing."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from infersize.core.engine_constants import VLLM_ENTRYPOINTS
from infersize.core.speedup import get_speedup_model
from infersize.service.spec_result import SideResult, SpecResult
from infersize.show.streams import ASCII_FALLBACK

UNITS = {"gib": (2**30, "GiB"), "gb": (1e9, "GB")}
TITLE = "SPECULATIVE DECODING JOINT SIZER & {model}"
LABEL_WIDTH = 20
VERDICT_STYLE = {"safe": "green", "tight": "yellow", "OOM": "bold red", "unsupported": "bold red"}


def _size(n_bytes: float, units: str) -> str:
    scale, label = UNITS[units]
    return f"{n_bytes / scale:.2f} {label}"


def _line(console: Console, label: str, value: str | Text, width: int = LABEL_WIDTH) -> None:
    if not console.encoding.lower().startswith("utf"):  # spelt out before the padding
        label = label.translate(ASCII_FALLBACK)
    text = Text(f"{label + ':':<{max(width, len(label) + 2)}}")
    text.append(value if isinstance(value, Text) else Text(value))
    console.print(text, highlight=False, soft_wrap=True)


def _next(console: Console, label: str, value: str | Text) -> None:
    """A line of the part after the panel (longer labels)."""
    _line(console, label, value, width=22)


def render_spec(console: Console, r: SpecResult, units: str = "gib") -> None:
    """The panel (same labels, same order as the seed example's), then the details."""
    model = get_speedup_model(r.speedup_model)
    title = TITLE.format(model=model.title)
    console.print(Panel(Text(title, justify="center"), box=box.HEAVY, expand=False))
    per_gpu = f" per GPU (TP {r.gpu.count})" if r.gpu.count > 1 else ""
    t, dr = r.target, r.draft
    _line(
        console,
        "Target Model",
        f"{t.model} ({t.quant}) -> {_size(t.total_bytes, units)} VRAM{per_gpu}",
    )
    if dr:
        _line(
            console,
            "Draft Model",
            f"{dr.model} ({dr.quant}) -> {_size(dr.total_bytes, units)} VRAM",
        )
    else:
        _line(console, "Draft Model", "none (the target alone, no speculation)")
    parts = f"target {_size(t.total_bytes, units).split()[0]}"
    if dr:
        parts += f" + draft {_size(dr.total_bytes, units).split()[0]}"
    parts += f" + overhead {_size(r.overhead_bytes, units).split()[0]}"
    verdict = Text(f"{_size(r.combined_bytes, units)} = {parts} (")
    verdict.append(
        r.verdict.capitalize() if r.verdict in ("safe", "tight") else r.verdict,
        style=VERDICT_STYLE[r.verdict],
    )
    verdict.append(f" on {r.gpu.name}, {r.utilization * 100:.1f}% utilized)")
    _line(console, "Combined VRAM", verdict)
    if dr:
        alpha = f"{r.acceptance_rate:g}"
        if r.acceptance_rates is not None:
            per_position = ", ".join(f"{x:g}" for x in r.acceptance_rates)
            alpha = f"{per_position} per position (i.i.d. equivalent {r.acceptance_rate:.3f})"
        _line(console, "Acceptance Rate α", alpha)
        _line(console, "Draft Length K", str(r.draft_k))
        source = "" if r.latency_ratio_source == "given" else " (roofline step times)"
        gamma = (
            f"{r.latency_ratio:.1f}x{source}"
            if r.latency_ratio is not None
            else "unbounded (n-gram lookup runs on the CPU: no GPU time)"
        )
        _line(console, "Latency Ratio γ", gamma)
        qualifier = model.qualifier.format(batch=r.batch_size)
        why = "the GPU cannot run it" if r.verdict == "unsupported" else "it does not fit"
        speedup = (
            f"{r.speedup:.2f}x wall-clock acceleration{qualifier}"
            if r.speedup is not None
            else f"none: {why}{qualifier}"
        )
        _line(console, model.label, speedup)
    console.print()
    console.print(Text(_context_line(r)))
    console.print()
    _render_breakdown(console, r, units)
    _render_next(console, r)


def _context_line(r: SpecResult) -> str:
    """What the context axis means, and where it came from when given as prompt + answer."""
    line = (
        f"Context {r.context_length:,} tokens: what each sequence holds in the KV cache at a "
        "decode step (prompt + answer so far)"
    )
    if r.input_tokens is not None and r.output_tokens is not None:
        line += (
            f" = {r.input_tokens:,} input + {r.output_tokens:,} output / 2, the average over "
            "the answer's decode steps"
        )
    return line


def _render_breakdown(console: Console, r: SpecResult, units: str) -> None:
    scale, label = UNITS[units]
    per_gpu = " per GPU" if r.gpu.count > 1 else ""
    pooled = r.kv_pool_bytes is not None
    title = f"Memory ({label}{per_gpu})"
    if pooled:
        title = f"Memory ({label} per GPU; {_rules(r)})"
    console.print(Text(title))  # its own line: a table's title would wrap at the table's width
    tokens = r.context_length + (r.num_draft_tokens or 1) - 1

    def cell(side: SideResult | None, value: int) -> str:
        return f"{value / scale:.2f}" if side else "-"

    def one(value: int | None) -> tuple[str, str]:
        return "", f"{(value or 0) / scale:.2f}"

    t, dr = r.target, r.draft
    rows = [("weights", cell(t, t.weights_bytes), cell(dr, dr.weights_bytes if dr else 0))]
    rows.append(
        (
            f"{_kv_label(r, pooled)} ({r.kv_dtype}, {tokens} tokens × {r.batch_size})",
            cell(t, t.kv_cache_bytes),
            cell(dr, dr.kv_cache_bytes if dr else 0),
        )
    )
    if pooled:
        rows += [(name, *one(value)) for name, value in _pool_rows(r, scale)]
    else:
        workspace = (cell(t, t.workspace_bytes), cell(dr, dr.workspace_bytes if dr else 0))
        rows.append(("workspace (logits, activations)", *workspace))
        rows.append((f"runtime overhead ({r.engine}, one process)", *one(r.overhead_bytes)))
    console.print(_plain_table(rows, ("", f"{r.combined_bytes / scale:.2f}")))
    if pooled:
        _render_pool(console, r, units)


def _plain_table(rows: list[tuple[str, str, str]], combined: tuple[str, str]) -> Table:
    """The breakdown: its words and numbers as plain Text, never read as markup (a str is,
    and for emoji codes too, which loads rich's emoji table: 3 ms of the start-up)."""
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column(Text(""))
    table.add_column(Text("target"), justify="right")
    table.add_column(Text("draft"), justify="right")
    for row in rows:
        table.add_row(*map(Text, row))
    table.add_row(*map(Text, ("combined", *combined)), style="bold")
    return table


def _rules(r: SpecResult) -> str:
    """Whose rules sized the pool, and the share setting they applied."""
    if r.max_total_num_tokens is not None:
        return (
            f"SGLang {r.engine_release} rules, mem_fraction_static {r.mem_fraction_static:g} "
            "of the free memory"
        )
    if r.max_tokens_in_paged_kv_cache is not None:
        return (
            f"TensorRT-LLM {r.engine_release} rules, {r.kv_cache_free_gpu_memory_fraction:g} of "
            "what its profiled prefill leaves"
        )
    return f"vLLM {r.vllm_release} rules, {r.gpu_memory_utilization:g} of the device"


def _pool_rows(r: SpecResult, scale: float) -> list[tuple[str, int | None]]:
    """The non-KV parts an engine's pool is sized against."""
    if r.max_total_num_tokens is not None:
        return [
            (f"activations (a chunk of {r.chunked_prefill_size} tokens)", r.activation_peak_bytes),
            ("not free at start (CUDA context, NCCL)", r.non_torch_bytes),
        ]
    if r.max_tokens_in_paged_kv_cache is not None:
        return [
            (f"activation peak (profiling {r.max_num_tokens} tokens)", r.activation_peak_bytes),
            ("outside torch (CUDA context, graphs, NCCL)", r.non_torch_bytes),
        ]
    drafting = (
        f", {r.speculative_peak_bytes / scale:.2f} of it the drafter's"
        if r.speculative_peak_bytes
        else ""
    )
    return [
        (
            f"activation peak (profiling {r.max_num_batched_tokens} tokens, "
            f"{r.max_num_seqs} sequences{drafting})",
            r.activation_peak_bytes,
        ),
        ("non-torch memory", r.non_torch_bytes),
        ("CUDA graphs (estimated before the pool)", r.cuda_graph_bytes),
    ]


def _kv_label(r: SpecResult, pooled: bool) -> str:
    """What the sequences hold: their KV cache, in the pool, and their states in a pool of
    their own (SGLang's hybrid models)."""
    if r.max_mamba_cache_size is not None:
        return "KV cache and states in the pools"
    return f"KV cache{' in the pool' if pooled else ''}"


def _render_pool(console: Console, r: SpecResult, units: str) -> None:
    """The pool's lines as the engine logs them at start-up."""
    size = _size(r.kv_pool_bytes or 0, units)
    if r.max_total_num_tokens is not None:
        pools = "; the draft's pool holds as many" if r.draft else ""
        _next(
            console,
            "KV Cache is allocated",
            f"#tokens: {r.max_total_num_tokens:,} ({size} "
            f"per GPU{pools}); max_running_requests {r.max_running_requests}",
        )
        if r.max_mamba_cache_size is not None:
            _next(
                console,
                "Mamba Cache is allocated",
                f"max_mamba_cache_size: {r.max_mamba_cache_size:,} "
                f"({_size(r.mamba_pool_bytes or 0, units)} per GPU; ssm state {r.mamba_ssm_dtype})",
            )
    elif r.max_tokens_in_paged_kv_cache is not None:
        _next(
            console,
            "Max tokens in KV cache",
            f"{r.max_tokens_in_paged_kv_cache:,} ({size} per "
            f"GPU, target and draft); max_batch_size {r.max_batch_size}",
        )
    else:
        layers = "target and draft layers, one pool" if r.draft else "one pool"
        _next(
            console, "GPU KV cache size", f"{r.kv_pool_tokens:,} tokens ({size} per GPU; {layers})"
        )
    _next(
        console,
        "Maximum concurrency",
        f"{r.max_concurrent_sequences:.2f}x for {r.context_length:,} tokens per request",
    )
    if r.vllm_entrypoint in VLLM_ENTRYPOINTS:  # SGLang and TensorRT-LLM have no such choice
        _next(
            console,
            "vLLM entry point",
            f"{VLLM_ENTRYPOINTS[r.vllm_entrypoint]}: its defaults profile "
            f"{r.max_num_batched_tokens or 0:,} tokens and {r.max_num_seqs or 0:,} sequences",
        )


def _render_speculation(console: Console, r: SpecResult) -> None:
    _next(
        console,
        "Expected tokens/step",
        f"{r.expected_tokens_per_step:.2f} "
        + (
            f"(a tree of width {r.eagle_topk} verifying {r.num_draft_tokens} tokens: E = 1 + "
            "the accepted share at each depth)"
            if (r.eagle_topk or 1) > 1
            else "(E = 1 + r1 + ... + rK, the mean acceptance length)"
            if r.acceptance_rates is not None
            else f"(E = 1 + α + ... + α^m, credited up to position m = {r.acceptance_positions}, "
            "where it was measured)"
            if r.acceptance_positions is not None and r.acceptance_positions < (r.draft_k or 0)
            else "(E = (1 − α^(K+1)) / (1 − α))"
        ),
    )
    if r.optimal_k is None:
        _next(console, "Optimal K", "none: no K fits in memory")
    else:
        _next(
            console,
            "Optimal K",
            f"{r.optimal_k} -> {r.speedup_at_optimal_k or 0:.2f}x "
            f"({r.speedup_model}, within memory)",
        )
    _next(console, "Break-even α", _break_even(r))


def _break_even(r: SpecResult) -> str:
    be, least = r.break_even_acceptance_rate, r.min_break_even_acceptance_rate
    at_k = f"{be:.3f} at K={r.draft_k}" if be is not None else f"none at K={r.draft_k}"
    if least is None:
        return f"{at_k}: speculation never pays at any K"
    if r.min_break_even_draft_k != r.draft_k:
        at_k += f", least {least:.3f} at K={r.min_break_even_draft_k}"
    if r.acceptance_rates is not None and r.break_even_expected_tokens_per_step is not None:
        at_k += f"; mean acceptance length {r.break_even_expected_tokens_per_step:.2f}"
    return at_k + " (below it speculation slows decoding)"


def _render_throughput(console: Console, r: SpecResult) -> None:
    per = f"batch {r.batch_size}"
    if r.baseline_tokens_per_s is None or r.baseline_ms_per_token is None:
        why = "the GPU cannot run it" if r.verdict == "unsupported" else "it does not fit"
        _next(console, "Throughput", f"none: {why}")
    elif r.draft and r.speculative_tokens_per_s is not None:
        _next(
            console,
            "Throughput",
            f"{r.baseline_tokens_per_s:,.0f} -> {r.speculative_tokens_per_s:,.0f} "
            f"tokens/s ({per}); {r.baseline_ms_per_token:.2f} -> "
            f"{r.speculative_ms_per_token or 0:.2f} ms/token",
        )
    else:
        _next(
            console,
            "Throughput",
            f"{r.baseline_tokens_per_s:,.0f} tokens/s ({per}); "
            f"{r.baseline_ms_per_token:.2f} ms/token",
        )
    if r.usd_per_mtok is not None:
        _next(
            console,
            "Cost",
            f"${r.usd_per_mtok:.3f} per million tokens at "
            f"${r.price_usd_per_hour or 0:.2f}/GPU-hour",
        )


def _limits(r: SpecResult) -> str:
    context = r.max_fitting_context_length
    batch = r.max_fitting_batch_size
    parts = [
        f"context up to {context:,} tokens at batch {r.batch_size}"
        if context is not None
        else f"no context at batch {r.batch_size}",
        f"batch up to {batch:,} at {r.context_length:,} tokens"
        if batch is not None
        else f"no batch at {r.context_length:,} tokens",
        f"TP {r.min_fitting_tp}" if r.min_fitting_tp else "no TP up to 8",
    ]
    if r.fitting_target_quant:
        parts.append(f"target at {r.fitting_target_quant}")
    if r.fitting_kv_dtype:
        parts.append(f"KV cache at {r.fitting_kv_dtype}")
    return "; ".join(parts)


def _render_next(console: Console, r: SpecResult) -> None:
    if r.support_reason:
        _next(console, "Kernel support", f"{r.support}: {r.support_reason}")
    if r.draft:
        _render_speculation(console, r)
    _render_throughput(console, r)
    if r.draft:
        cross = r.crossover_batch_size
        _next(
            console,
            "Crossover batch",
            f"{cross} (roofline: speculation stops paying)"
            if cross
            else "none up to 2048 (roofline)",
        )
    _next(console, "Fits in memory" if r.fits else "Would fit", _limits(r))
    for note in r.notes:
        if note.startswith("warning: "):
            console.print(Text(note, style="yellow"), soft_wrap=True)
        else:
            console.print(Text(f"note: {note}", style="dim"), soft_wrap=True)
