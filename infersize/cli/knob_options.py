"""The engine settings' command-line options, made from their declarations (core/knobs.py): a
command decorated with `with_engine_knobs` takes one option per setting, placed after --engine,
and receives them as one mapping, `engine_knobs` (setting name to value, None where not given).
A setting registered once is an option of every such command (spec, capacity, schedule)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

from infersize.core.knobs import ENGINE_KNOBS, Knob

F = TypeVar("F", bound=Callable[..., Any])
KNOBS_PARAMETER = "engine_knobs"
PANEL = "Engine settings"


def _help(knob: Knob) -> str:
    """The declared help, with the range or the choices the check enforces."""
    bounds = knob.range_text()
    if not bounds or knob.choices:
        return knob.help
    unit = f" {knob.unit}" if knob.unit else ""
    return f"{knob.help} Range {bounds}{unit}."


def _parameter(knob: Knob) -> inspect.Parameter:
    flag = f"{knob.flag}/--no-{knob.flag[2:]}" if knob.kind is bool else knob.flag
    option = typer.Option(flag, help=_help(knob), rich_help_panel=PANEL)
    return inspect.Parameter(
        knob.name,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        default=knob.default,
        annotation=Annotated[knob.kind | None, option],
    )


def with_engine_knobs(command: F) -> F:
    """`command` with one option per engine setting; its parameter `engine_knobs` receives them."""
    signature = inspect.signature(command, eval_str=True)
    own = [p for p in signature.parameters.values() if p.name != KNOBS_PARAMETER]
    names = [p.name for p in own]
    at = names.index("engine") + 1 if "engine" in names else len(own)
    knobs = [_parameter(knob) for knob in ENGINE_KNOBS.values()]
    parameters = own[:at] + knobs + own[at:]

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        given = {name: kwargs.pop(name, ENGINE_KNOBS[name].default) for name in ENGINE_KNOBS}
        return command(*args, **kwargs, **{KNOBS_PARAMETER: given})

    run.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in parameters}
    return run  # type: ignore[return-value]
