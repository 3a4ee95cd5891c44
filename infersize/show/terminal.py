"""Terminal rendering (rich): consoles and tables. Renders results; computes nothing."""

from __future__ import annotations

import io
import sys
from collections.abc import Sequence
from typing import TextIO

from rich import box
from rich.console import Console
from rich.table import Table

WRAPPING = ("name", "target", "draft")
TEXT_COLUMNS = ("id", "name", "family", "tokenizer", "gpu", "target", "draft", "axis")


# what a terminal that cannot show them gets instead (a latin-1 or ASCII locale)
ASCII_FALLBACK = str.maketrans(
    {
        "α": "alpha",
        "γ": "gamma",
        "★": "*",
        "×": "x",
        "→": "->",
        "−": "-",
        "…": "...",
        "≤": "<=",
        "≥": ">=",
        "·": "*",
        "—": "-",
        "–": "-",
        "↓": " down",
        "↑": " up",
        "²": "^2",
        "√": "sqrt",
    }
)


class _Transliterating(io.TextIOBase):
    """A text stream that writes what its encoding can hold: Greek letters and symbols spelt
    out, anything else replaced, instead of a UnicodeEncodeError half-way through a panel."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._encoding = stream.encoding or "ascii"

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._encoding

    def write(self, text: str) -> int:
        safe = text.translate(ASCII_FALLBACK).encode(self._encoding, "replace")
        return self._stream.write(safe.decode(self._encoding))

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()


def can_encode(stream: TextIO, sample: str = "αγ★─") -> bool:
    try:
        sample.encode(stream.encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def ascii_safe_streams() -> None:
    """Wrap stdout and stderr when their encoding cannot show what infersize prints."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if (
            stream is not None
            and not isinstance(stream, _Transliterating)
            and not can_encode(stream)
        ):
            setattr(sys, name, _Transliterating(stream))


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
