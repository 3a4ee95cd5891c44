"""Typed errors. Every user mistake is an InfersizeError; the CLI turns it into one line, exit 2."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class InfersizeError(Exception):
    """A problem with what the user asked for (bad name, value, file). Exit code 2."""


class UnknownNameError(InfersizeError):
    """A model, GPU, precision or KV dtype name that the catalog does not know."""

    def __init__(self, kind: str, name: str, known: Iterable[str], hint: str = "") -> None:
        self.kind, self.name = kind, name
        known = sorted(set(known))
        near = difflib.get_close_matches(name.lower(), known, n=3, cutoff=0.5)
        if near:
            suggestion = "did you mean " + ", ".join(f"'{n}'" for n in near) + "?"
        else:
            suggestion = hint or f"run 'infersize {kind}s list' to see them"
        super().__init__(f"unknown {kind} '{name}': {suggestion}")


class CatalogError(InfersizeError):
    """A catalog or overlay file that is missing, malformed or fails validation."""


class ValueRangeError(InfersizeError):
    """A number outside the range the model is defined on (α outside [0, 1], K < 1, ...)."""
