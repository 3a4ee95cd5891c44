"""Validating records read from files: each record dataclass (catalog/records.py) gets a
Pydantic model built from its own fields, their `Check` markers and its `check()` rules, so a
record is declared once and Pydantic is imported only when files are read (a catalog cache
miss, a checkpoint's config.json), never for a cached catalog.

The models keep what the records promised: unknown keys are refused, booleans, NaN and
infinities are not numbers (strict), no text carries control characters, and no name that
reaches a table starts like a spreadsheet formula (catalog/names.py)."""

from __future__ import annotations

import dataclasses
import re
import types
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin, get_type_hints

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from infersize.catalog.names import TABLE_NAME_FIELDS, formula_problem
from infersize.catalog.records import Check, Record

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_RECORD_OF: dict[type[BaseModel], type[Record]] = {}
_SCHEMA_OF: dict[type[Record], type[BaseModel]] = {}
T = TypeVar("T")


class CatalogFile(BaseModel):
    """The top level of a catalog file: its sections, each entry validated by its record."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    sources: dict[str, str] = Field(default_factory=dict)
    models: list[dict[str, Any]] = Field(default_factory=list)
    gpus: list[dict[str, Any]] = Field(default_factory=list)
    weight_formats: list[dict[str, Any]] = Field(default_factory=list)
    kv_dtypes: list[dict[str, Any]] = Field(default_factory=list)
    published_acceptance: list[dict[str, Any]] = Field(default_factory=list)
    acceptance_prior: dict[str, Any] | None = None
    support_sources: dict[str, str] = Field(default_factory=dict)
    support: dict[str, dict[str, list[dict[str, Any]]]] = Field(default_factory=dict)


def _printable(cls: Any, value: Any, info: ValidationInfo) -> Any:
    """No control characters in any text; no name that reaches a table read as a formula."""
    texts = [t for t in (value if isinstance(value, list) else [value]) if isinstance(t, str)]
    if any(_CONTROL.search(t) for t in texts):
        raise ValueError("contains control characters (terminal escapes are not allowed)")
    if info.field_name in TABLE_NAME_FIELDS:
        for problem in filter(None, map(formula_problem, texts)):
            raise ValueError(problem)
    return value


def _pydantic_type(annotation: Any) -> Any:
    """`annotation` with Check markers as Pydantic Fields and records as their models."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        base, *marks = args
        metadata = [Field(**m.rules) if isinstance(m, Check) else m for m in marks]
        arguments = (_pydantic_type(base), *metadata)
        return Annotated[arguments]
    if origin in (Union, types.UnionType):
        return Union[tuple(_pydantic_type(a) for a in args)]  # noqa: UP007 - built from a tuple
    if origin is list:
        return list[_pydantic_type(args[0])]  # type: ignore[misc]
    if isinstance(annotation, type) and issubclass(annotation, Record):
        return schema_of(annotation)
    return annotation


def _field(record_field: dataclasses.Field[Any], annotation: Any) -> tuple[Any, Any]:
    if record_field.default is not dataclasses.MISSING:
        return _pydantic_type(annotation), record_field.default
    if record_field.default_factory is not dataclasses.MISSING:
        return _pydantic_type(annotation), Field(default_factory=record_field.default_factory)
    return _pydantic_type(annotation), ...


def schema_of(record: type[Record]) -> type[BaseModel]:
    """The Pydantic model that validates `record`'s fields and then its check()."""
    if record not in _SCHEMA_OF:
        _SCHEMA_OF[record] = _build_schema(record)
    return _SCHEMA_OF[record]


def _build_schema(record: type[Record]) -> type[BaseModel]:
    hints = get_type_hints(record, include_extras=True)
    fields = {f.name: _field(f, hints[f.name]) for f in dataclasses.fields(record)}
    aliased = any("alias" in m.rules for h in hints.values() for m in _checks(h))

    def checked(model: BaseModel) -> BaseModel:
        to_record(record, model)  # runs the record's check(): its ValueError is Pydantic's
        return model

    config = ConfigDict(
        extra="forbid",
        frozen=True,
        strict=record.strict,
        allow_inf_nan=False,
        populate_by_name=aliased,
    )
    validators = {
        "printable": field_validator("*", mode="after")(_printable),
        "checked": model_validator(mode="after")(checked),
    }
    model: type[BaseModel] = create_model(  # type: ignore[call-overload]
        record.__name__, __config__=config, __validators__=validators, **fields
    )
    _RECORD_OF[model] = record
    return model


def _checks(annotation: Any) -> list[Check]:
    if get_origin(annotation) is Annotated:
        return [m for m in get_args(annotation)[1:] if isinstance(m, Check)]
    return []


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return to_record(_RECORD_OF[type(value)], value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def to_record(record: type[Record], model: BaseModel) -> Any:
    """The record a validated model holds."""
    return record(**{f.name: _plain(getattr(model, f.name)) for f in dataclasses.fields(record)})


def validate_record(schema: type[T], data: Any) -> T:
    """`data` validated as a record (or as a Pydantic model); raises pydantic.ValidationError."""
    if issubclass(schema, BaseModel):
        return schema.model_validate(data)
    assert issubclass(schema, Record)
    record: T = to_record(schema, schema_of(schema).model_validate(data))
    return record
