"""Typed errors. Every user mistake is an InfersizeError; the CLI turns it into one line, exit 2."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from typing import TypeVar

E = TypeVar("E", bound="InfersizeError")


class InfersizeError(Exception):
    """A problem with what the user asked for (bad name, value, file). Exit code 2.

    The library does not word a front end. A setting the message names is written `{name}`
    (the library's name, allow_cross_tokenizer) and listed in `settings`; a command of the
    command line is written `{words}` (`{sweep run}`) and listed in `commands`. Each front end
    renders them in its own words (`render`): the command line as --allow-cross-tokenizer and
    'infersize sweep run'; str() shows the names themselves."""

    def __init__(
        self, message: str, *, settings: tuple[str, ...] = (), commands: tuple[str, ...] = ()
    ) -> None:
        self.message, self.settings, self.commands = message, settings, commands
        super().__init__(self.render(str, lambda words: f"'{words}'"))

    def inside(self, kind: type[E], before: str, after: str = "") -> E:
        """This error inside other words (a sweep file's location) as a `kind`: its settings
        named as they are (a file's keys), its commands still left to the front end."""
        text = self.render(str, lambda words: "{" + words + "}")
        return kind(before + text + after, commands=self.commands)

    def render(self, setting: Callable[[str], str], command: Callable[[str], str]) -> str:
        """The message with its settings and commands named by the front end."""
        text = self.message
        for name in self.settings:
            text = text.replace("{" + name + "}", setting(name))
        for words in self.commands:
            text = text.replace("{" + words + "}", command(words))
        return text


class UnknownNameError(InfersizeError):
    """A model, GPU, precision or KV dtype name that the catalog does not know."""

    def __init__(self, kind: str, name: str, known: Iterable[str], hint: str = "") -> None:
        self.kind, self.name = kind, name
        names = sorted(set(known))
        near = difflib.get_close_matches(name.lower(), names, n=3, cutoff=0.5)
        listing = f"{kind}s list"
        if near:
            suggestion = "did you mean " + ", ".join(f"'{n}'" for n in near) + "?"
        else:
            suggestion = hint or f"run {{{listing}}} to see them"
        shown = name if len(name) <= 80 else name[:77] + "..."
        super().__init__(f"unknown {kind} '{shown}': {suggestion}", commands=(listing,))


class CatalogError(InfersizeError):
    """A catalog or overlay file that is missing, malformed or fails validation."""


class ValueRangeError(InfersizeError):
    """A number outside the range the model is defined on (α outside [0, 1], K < 1, ...).

    `field` is the setting's name in the library (acceptance_rate); the command line shows it as
    its flag (--acceptance-rate), a sweep file as its key. Other settings the problem mentions
    are written `{name}` in it and rendered the same way."""

    def __init__(self, field: str, problem: str) -> None:
        self.field, self.problem = field, problem
        named = tuple(dict.fromkeys([field, *re.findall(r"\{([a-z_]+)\}", problem)]))
        super().__init__("{" + field + "} " + problem, settings=named)


class SweepConfigError(InfersizeError):
    """A sweep file that is missing, malformed or fails the schema."""
