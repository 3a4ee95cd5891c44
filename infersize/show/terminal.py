"""Terminal rendering (rich): consoles and tables. Renders results; computes nothing."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rich import box
from rich.console import Console
from rich.table import Table

WRAPPING = ("name", "target", "draft")
TEXT_COLUMNS = ("id", "name", "family", "tokenizer", "gpu", "target", "draft", "axis")


def console(stderr: bool = False, quiet: bool = False, width: int | None = None) -> Console:
    """A console that does not crop tables when output goes to a file or pipe (unless a
    width is asked for)."""
    stream = sys.stderr if stderr else sys.stdout
    if width is None and not stream.isatty():
        width = 160
    return Console(stderr=stderr, quiet=quiet, width=width)


def render_table(
    console: Console, title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]
) -> None:
    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    for col in columns:
        table.add_column(
            col,
            justify="left" if col in TEXT_COLUMNS else "right",
            # long names wrap inside their cell; numbers and ids never lose a column
            no_wrap=col not in WRAPPING,
            min_width=len(col) if col not in WRAPPING else 12,
        )
    for row in rows:
        table.add_row(*(str(v) for v in row))
    console.print(table)


BEST_COLUMNS = [
    "gpu",
    "target",
    "tp",
    "KV",
    "draft",
    "method",
    "K",
    "speedup",
    "tokens/s",
    "tok/s/GPU",
    "GiB",
    "$/Mtok",
]


def best_rows(rows: Sequence[dict[str, object]]) -> list[list[str]]:
    """Compact rows of best_pairs for the terminal and the report: precision folded into the
    model columns; TP and the KV cache dtype on their own (rows may differ only by them)."""
    out = []
    for r in rows:
        usd = r["usd_per_mtok"]
        out.append(
            [
                str(r["gpu"]),
                f"{r['target']} {r['target_quant']}",
                str(r["tp"]),
                str(r["kv_dtype"]),
                str(r["draft"])
                if r["draft_quant"] == "none"
                else f"{r['draft']} {r['draft_quant']}",
                str(r["method"]),
                str(r["optimal_k"]),
                f"{r['speedup']:.2f}x",
                f"{r['speculative_tokens_per_s']:,.0f}",
                f"{r['speculative_tokens_per_s_per_gpu']:,.0f}",
                f"{r['combined_gib']:.1f}",
                "-" if usd is None else f"{usd:.3f}",
            ]
        )
    return out
