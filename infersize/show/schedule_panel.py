"""The `infersize schedule` panel: the ranges of batch sizes and their K, the engine's
configuration to paste, and the notes. Reads a ScheduleResult; computes nothing."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from infersize.service.schedule import ScheduleResult
from infersize.show.engine_config import HOW, paste_text

ENGINE_NAMES = {"vllm": "vLLM", "trtllm": "TensorRT-LLM", "sglang": "SGLang"}


def render_schedule(console: Console, r: ScheduleResult) -> None:
    console.print(Text(f"Draft length per batch size: {r.deployment}"), soft_wrap=True)
    if r.buckets and r.curve is not None:
        priced = int(r.curve.batches[-1])
        static = r.buckets[0].static_best_k
        table = Table(box=box.SIMPLE_HEAD)
        for name in ("batches", "K", "at batch", "TPOT ms", "tokens/s", "speedup"):
            table.add_column(name, justify="left" if name == "batches" else "right")
        table.add_column(f"static K={static}", justify="right")
        for b in r.buckets:
            table.add_row(
                f"{b.min_batch:,}-{b.max_batch:,}",
                str(b.draft_k),
                f"{min(b.max_batch, priced):,}",
                f"{b.tpot_ms:.2f}",
                f"{b.output_tokens_per_s:,.0f}",
                f"{b.speedup:.2f}x",
                f"{b.static_best_speedup:.2f}x",
            )
        console.print(table)
        console.print(
            Text(
                "TPOT per sequence, output tokens/s of all sequences, speedups over K = 0, each "
                "at its range's largest batch that fits"
            ),
            soft_wrap=True,
        )
    console.print()
    engine = ENGINE_NAMES[r.engine]
    if not r.buckets:
        console.print(Text(f"{engine}: nothing to schedule"))
    elif r.config is None:
        console.print(Text(f"{engine}: no K pays, serve without a speculative configuration"))
    else:
        what = "K per batch size" if r.scheduled else "one K for every batch"
        console.print(Text(f"{engine}, {what}: {HOW[r.engine]}"), soft_wrap=True)
        console.print(Text(paste_text(r.engine, r.config).rstrip("\n")), soft_wrap=True)
    console.print()
    for note in r.notes:
        console.print(Text(f"note: {note}", style="dim"), soft_wrap=True)
