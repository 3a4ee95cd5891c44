"""Cheap option values: the plain strings, numbers and paths most command lines carry are
converted here, without the Pydantic TypeAdapter Typer builds for every option of a command
(importing Pydantic and building 30 adapters was a third of `spec`'s start-up).

Only values whose conversion is unambiguous take this path: a str, an int written as ASCII
digits, a float written as a plain decimal, a path, a number inside its option's range.
Anything else (a number out of range, choices, a value Pydantic might read differently or
reject) goes to Typer's own adapter, built then, so every error message and every accepted
spelling stay Typer's (tests/test_cli_coerce.py holds the two to the same answers)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, get_args, get_origin

from typer import core
from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
from typer._param_types import coerce_cli_path

_INT = re.compile(r"-?[0-9]{1,15}", re.ASCII)
_FLOAT = re.compile(
    r"-?([0-9]{1,15}(\.[0-9]{0,15})?|\.[0-9]{1,15})([eE][-+]?[0-9]{1,2})?", re.ASCII
)
_NOT_QUICK = object()


def quick_value(annotation: Any, value: Any) -> Any:
    """`value` converted to `annotation`, or _NOT_QUICK when Typer's adapter must decide."""
    if get_origin(annotation) is list and isinstance(value, list | tuple):
        (item,) = get_args(annotation)
        items = [quick_value(item, v) for v in value]
        return _NOT_QUICK if any(v is _NOT_QUICK for v in items) else items
    if type(value) is annotation and annotation in (int, float, str):  # a default, as is
        return value
    if not isinstance(value, str):
        return _NOT_QUICK
    if annotation is str:
        return value
    if annotation is int and _INT.fullmatch(value):
        return int(value)
    if annotation is float and _FLOAT.fullmatch(value):
        return float(value)
    if annotation is Path and value and "\x00" not in value:
        return Path(value)
    return _NOT_QUICK


def _is_number(value: Any) -> bool:
    return type(value) in (int, float)


def _quick_allowed(descriptor: TypeDescriptor) -> bool:
    """Options with a parser, a clamped range, a file to open or path rules beyond the type:
    Typer's."""
    info = descriptor.parameter_info
    plain_path = not (info.exists or info.resolve_path or info.allow_dash or info.path_type)
    return (
        descriptor.file_annotation is None and info.parser is None and not info.clamp and plain_path
    )


class QuickRuntimeParam(RuntimeParam):
    """Converts plain values itself and builds Typer's adapter only for the rest."""

    descriptor: TypeDescriptor

    def __init__(self, descriptor: TypeDescriptor) -> None:
        super().__init__(parameter_info=descriptor.parameter_info, annotation=descriptor.annotation)
        object.__setattr__(self, "descriptor", descriptor)

    def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
        quick = quick_value(self.annotation, value)
        if quick is _NOT_QUICK or not self._in_range(quick):  # Typer words the error
            typer_param = build_runtime_param(self.descriptor)
            return typer_param._coerce_value(value, param=param, ctx=ctx)
        if isinstance(quick, list):
            return [self._path_checked(v, param, ctx) for v in quick]
        return self._path_checked(quick, param, ctx)

    def _in_range(self, value: Any) -> bool:
        low, high = self.parameter_info.min, self.parameter_info.max
        numbers = [v for v in (value if isinstance(value, list) else [value]) if _is_number(v)]
        return not any(
            (low is not None and v < low) or (high is not None and v > high) for v in numbers
        )

    def _path_checked(self, value: Any, param: Any, ctx: Any) -> Any:
        """A path goes through Typer's checks after the conversion (file_okay, dir_okay, ...)."""
        if not isinstance(value, Path):
            return value
        return coerce_cli_path(value, self.parameter_info, path_type=Path, param=param, ctx=ctx)


def _runtime_param(self: core._TyperParameter) -> RuntimeParam:
    if self._runtime_param is None:
        descriptor = self.type_descriptor
        if _quick_allowed(descriptor):
            self._runtime_param = QuickRuntimeParam(descriptor)
        else:
            self._runtime_param = build_runtime_param(descriptor)
    return self._runtime_param


def install() -> None:
    """Route every Typer option and argument of this process through the quick path."""
    core._TyperParameter.get_runtime_param = _runtime_param  # type: ignore[method-assign]
