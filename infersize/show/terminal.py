"""Terminal rendering (rich): consoles and tables. Renders results; computes nothing."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rich import box
from rich.console import Console
from rich.table import Table

WRAPPING = ("name", "target", "draft")
TEXT_COLUMNS = ("id", "name", "family", "tokenizer", "gpu", "target", "draft", "axis")


def console(stderr: bool = False, quiet: bool = False) -> Console:
    """A console that does not crop tables when output goes to a file or pipe."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, quiet=quiet, width=None if stream.isatty() else 160)


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


BEST_COLUMNS = ["gpu", "target", "draft", "K", "speedup", "tokens/s", "tok/s/GPU", "GiB", "$/Mtok"]


def best_rows(rows: Sequence[dict[str, object]]) -> list[list[str]]:
    """Compact rows of best_pairs for the terminal and the report: precision and TP folded
    into the model columns."""
    out = []
    for r in rows:
        tp = f" tp{r['tp']}" if r["tp"] != 1 else ""
        usd = r["usd_per_mtok"]
        out.append(
            [
                str(r["gpu"]),
                f"{r['target']} {r['target_quant']}{tp}",
                f"{r['draft']} {r['draft_quant']}",
                str(r["optimal_k"]),
                f"{r['speedup']:.2f}x",
                f"{r['speculative_tokens_per_s']:,.0f}",
                f"{r['speculative_tokens_per_s_per_gpu']:,.0f}",
                f"{r['combined_gib']:.1f}",
                "-" if usd is None else f"{usd:.3f}",
            ]
        )
    return out
