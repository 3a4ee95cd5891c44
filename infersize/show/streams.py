"""What infersize writes to a terminal whose encoding cannot show it (a latin-1 or ASCII
locale): Greek letters and symbols spelt out. Apart from the rich rendering (show/terminal.py)
so that every command can wrap its streams without loading the terminal library."""

from __future__ import annotations

import io
import sys
from typing import TextIO

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
