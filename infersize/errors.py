"""Typed errors. Every user mistake is an InfersizeError; the CLI turns it into one line, exit 2."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable


class InfersizeError(Exception):
    """A problem with what the user asked for (bad name, value, file). Exit code 2."""


class UnknownNameError(InfersizeError):
    """A model, GPU, precision or KV dtype name that the catalog does not know."""

    def __init__(self, kind: str, name: str, known: Iterable[str], hint: str = "") -> None:
        self.kind, self.name = kind, name
        names = sorted(set(known))
        near = difflib.get_close_matches(name.lower(), names, n=3, cutoff=0.5)
        if near:
            suggestion = "did you mean " + ", ".join(f"'{n}'" for n in near) + "?"
        else:
            suggestion = hint or f"run 'infersize {kind}s list' to see them"
        shown = name if len(name) <= 80 else name[:77] + "..."
        super().__init__(f"unknown {kind} '{shown}': {suggestion}")


class CatalogError(InfersizeError):
    """A catalog or overlay file that is missing, malformed or fails validation."""


class ValueRangeError(InfersizeError):
    """A number outside the range the model is defined on (α outside [0, 1], K < 1, ...).

    `field` is the setting's name in the library (acceptance_rate); the command line shows it as
    its flag (--acceptance-rate), a sweep file as its key. Other settings the problem mentions
    are written `{name}` in it and rendered the same way."""

    def __init__(self, field: str, problem: str) -> None:
        self.field, self.problem = field, problem
        super().__init__(self.render(str))

    def render(self, name: Callable[[str], str]) -> str:
        """The message with every setting named by `name` (a flag, a YAML key)."""
        other = re.sub(r"\{([a-z_]+)\}", lambda m: name(m.group(1)), self.problem)
        return f"{name(self.field)} {other}"
