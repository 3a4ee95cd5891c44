"""The `--draft auto` table of `spec` and `capacity`: every drafter the catalog has for the
target, best first, with why each ranks where it does. Reads the rows of the JSON `candidates`
list; computes nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

# the columns each command's rows carry, as the table heads them (key, head)
COLUMNS = (
    ("method", "method"),
    ("drafter", "drafter"),
    ("draft_quant", "precision"),
    ("draft_k", "K"),
    ("acceptance_rate", "α"),
    ("speedup", "speedup"),
    ("gpus", "GPUs"),
    ("usd_per_hour", "$/hour"),
    ("max_request_rate", "req/s per replica"),
)


def _cell(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key == "acceptance_rate":
        return f"{value:.2f}"
    if key == "speedup":
        return f"{value:.2f}x"
    if key == "usd_per_hour":
        return f"{value:,.2f}"
    if key == "max_request_rate":
        return f"{value:.2f}"
    return str(value)


def render_candidates(
    console: Console, rows: Sequence[dict[str, Any]], notes: Sequence[str], by: str
) -> None:
    """The candidates, best first, ranked `by` (words)."""
    console.print(Text(f"Drafters for this target, best first (by {by}):"))
    keys = [(key, head) for key, head in COLUMNS if rows and key in rows[0]]
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("#", justify="right")
    for key, head in keys:
        table.add_column(head, justify="left" if key in ("method", "drafter") else "right")
    table.add_column("why", justify="left")
    for rank, row in enumerate(rows, start=1):
        table.add_row(str(rank), *(_cell(k, row[k]) for k, _ in keys), row["why"])
    console.print(table)
    for note in notes:
        console.print(Text(f"note: {note}"), soft_wrap=True)
    console.print()
