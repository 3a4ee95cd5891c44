"""A record behaves as the frozen dataclass it replaces: each class below is declared twice, once
with `@record` and once with `@dataclass(frozen=True, ...)`, and every operation gives the same
outcome on both (values, repr, equality, hash, the exception and its message)."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
import re
from dataclasses import FrozenInstanceError, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest

from infersize.record import record


def _twins(kw_only: bool = True) -> tuple[type, type]:
    """Sizes: required fields, a default, a default factory; one as a record, one as a
    dataclass, both named `Sizes` so their reprs and messages can be compared as they are."""

    def body() -> dict[str, Any]:
        return {
            "__annotations__": {
                "name": "str",
                "weight_bytes": "int",
                "kv_bytes": "int",
                "note": "str",
                "parts": "list[str]",
            },
            "__module__": __name__,
            "__qualname__": "Sizes",
            "__doc__": "Weight and KV-cache bytes of one model.",
            "note": "",
            "parts": field(default_factory=list),
            "total_bytes": property(lambda self: self.weight_bytes + self.kv_bytes),
        }

    as_record = record(kw_only=kw_only)(type("Sizes", (), body()))
    as_dataclass = dataclass(frozen=True, kw_only=kw_only)(type("Sizes", (), body()))
    return as_record, as_dataclass


def _outcome(action: Any, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    try:
        return "value", action(*args, **kwargs)
    except Exception as exc:
        return type(exc).__name__, str(exc)


def _state(obj: Any) -> tuple[str, Any]:
    """What an object shows: its repr and its attributes in the order they were set."""
    return repr(obj), list(obj.__dict__.items())


CALLS = [
    ((), {"name": "a", "weight_bytes": 1, "kv_bytes": 2}),
    ((), {"name": "a", "weight_bytes": 1, "kv_bytes": 2, "note": "n", "parts": ["x"]}),
    ((), {"kv_bytes": 2, "weight_bytes": 1, "name": "a"}),  # keywords in another order
    ((), {"name": "a", "weight_bytes": 1}),  # one missing
    ((), {"name": "a"}),  # two missing
    ((), {}),  # three missing
    ((), {"name": "a", "weight_bytes": 1, "kv_bytes": 2, "colour": "red"}),  # unknown
    (("a",), {"weight_bytes": 1, "kv_bytes": 2}),  # positional
    (("a", 1, 2), {}),
    (("a",), {"name": "b", "weight_bytes": 1, "kv_bytes": 2}),  # twice
    (("a", 1, 2, "n", [], "extra"), {}),  # too many
]


@pytest.mark.parametrize("kw_only", [True, False])
@pytest.mark.parametrize(("args", "kwargs"), CALLS)
def test_construction_and_its_errors_match_the_dataclass(kw_only, args, kwargs):
    """The same fields, or the same TypeError; too many positional arguments are worded more
    shortly than Python words them ('takes 1 positional argument but 2 were given')."""
    as_record, as_dataclass = _twins(kw_only)
    made = _outcome(as_record, *args, **kwargs)
    expected = _outcome(as_dataclass, *args, **kwargs)
    if expected[0] == "value":
        assert made[0] == "value"
        assert _state(made[1]) == _state(expected[1])
        assert made[1].total_bytes == expected[1].total_bytes
    elif re.search(r"takes .* positional arguments? but", expected[1]):
        assert made[0] == "TypeError"
        assert re.fullmatch(
            r"Sizes.__init__\(\) takes \d positional arguments? but \d were given", made[1]
        )
    else:
        assert made == expected


def test_equality_hash_and_frozenness_match_the_dataclass():
    as_record, as_dataclass = _twins()
    for kind in (as_record, as_dataclass):
        a = kind(name="a", weight_bytes=1, kv_bytes=2)
        same = kind(name="a", weight_bytes=1, kv_bytes=2)
        other = kind(name="a", weight_bytes=1, kv_bytes=3)
        assert (a == same, a != same, a == other, a == (("a", 1, 2, "", [])), a == 1) == (
            True,
            False,
            False,
            False,
            False,
        )
        assert hash(kind(name="a", weight_bytes=1, kv_bytes=2, parts=())) == hash(
            ("a", 1, 2, "", ())
        )
    r = as_record(name="a", weight_bytes=1, kv_bytes=2)
    d = as_dataclass(name="a", weight_bytes=1, kv_bytes=2)
    assert r != d and d != r  # a record is not equal to another class with the same fields
    for action in (
        lambda obj: setattr(obj, "name", "b"),
        lambda obj: setattr(obj, "colour", "red"),
        lambda obj: delattr(obj, "name"),
        lambda obj: hash(obj),  # a list field: unhashable, as the dataclass's
    ):
        assert _outcome(action, r) == _outcome(action, d)
    with pytest.raises(FrozenInstanceError):
        r.name = "b"  # type: ignore[misc]


def test_dataclass_functions_see_a_record_as_a_dataclass():
    as_record, as_dataclass = _twins()
    r = as_record(name="a", weight_bytes=1, kv_bytes=2, parts=["x"])
    d = as_dataclass(name="a", weight_bytes=1, kv_bytes=2, parts=["x"])
    assert dataclasses.is_dataclass(r) and dataclasses.is_dataclass(as_record)
    assert [f.name for f in dataclasses.fields(r)] == [f.name for f in dataclasses.fields(d)]
    assert dataclasses.asdict(r) == dataclasses.asdict(d)
    assert dataclasses.astuple(r) == dataclasses.astuple(d)
    changed = dataclasses.replace(r, kv_bytes=5)
    assert type(changed) is as_record and changed.kv_bytes == 5 and changed.parts == ["x"]
    assert _outcome(dataclasses.replace, r, colour=1)[0] == "TypeError"


def test_signature_and_docstring_match_the_dataclass():
    for kw_only in (True, False):
        as_record, as_dataclass = _twins(kw_only)
        assert str(inspect.signature(as_record)) == str(inspect.signature(as_dataclass))

    def undocumented() -> dict[str, Any]:
        annotations = {"size_bytes": "int", "parts": "list[str]"}
        return {"__annotations__": annotations, "parts": field(default_factory=list)}

    as_record = record(type("Sized", (), undocumented()))
    as_dataclass = dataclass(frozen=True, kw_only=True)(type("Sized", (), undocumented()))
    expected = "Sized(*, size_bytes: 'int', parts: 'list[str]' = <factory>)"
    assert as_record.__doc__ == as_dataclass.__doc__ == expected


@record
class _Nested:
    """A record holding records, and a repr that points back at itself."""

    limit_bytes: int
    inner: list[Any] = field(default_factory=list)


def test_nested_records_as_dicts_and_a_recursive_repr():
    outer = _Nested(limit_bytes=1, inner=[_Nested(limit_bytes=2)])
    assert dataclasses.asdict(outer) == {
        "limit_bytes": 1,
        "inner": [{"limit_bytes": 2, "inner": []}],
    }
    for clone in (copy.copy(outer), copy.deepcopy(outer), pickle.loads(pickle.dumps(outer))):
        assert type(clone) is _Nested and clone == outer and _state(clone) == _state(outer)
    outer.inner.append(outer)
    assert repr(outer).endswith(", ...])")  # as a dataclass's repr marks the cycle


@record
class _Checked:
    """Checks its fields after they are set, as a dataclass's __post_init__ does; a class
    variable is no field."""

    rule: ClassVar[str] = "low <= high"
    low: int
    high: int

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ValueError(f"{self.rule}: {self.low} > {self.high}")


@record
class _Ranged(_Checked):
    """A subclass adds fields after the parent's."""

    step: int = 1


def test_post_init_class_variables_and_inheritance():
    assert [f.name for f in dataclasses.fields(_Ranged)] == ["low", "high", "step"]
    assert repr(_Ranged(low=1, high=2)) == "_Ranged(low=1, high=2, step=1)"
    with pytest.raises(ValueError, match=re.escape("low <= high: 3 > 2")):
        _Ranged(low=3, high=2)


@record
class _OwnMethods:
    """Methods the class defines are kept (a dataclass keeps them); its own __eq__ still
    leaves it hashable by its fields, as a frozen dataclass is."""

    unit: str

    def __repr__(self) -> str:
        return f"<{self.unit}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _OwnMethods) and other.unit.lower() == self.unit.lower()


def test_a_class_keeps_its_own_methods():
    assert repr(_OwnMethods(unit="GiB")) == "<GiB>"
    assert _OwnMethods(unit="GiB") == _OwnMethods(unit="gib")
    assert hash(_OwnMethods(unit="GiB")) == hash(("GiB",))


def test_what_a_record_cannot_be():
    with pytest.raises(TypeError, match="every field of a record is an argument"):

        @record
        class _Derived:
            total: int = field(init=False, default=0)

    with pytest.raises(TypeError, match="a record is frozen"):

        @record
        class _Settable:
            count: int

            def __setattr__(self, name: str, value: Any) -> None: ...


def test_frozen_dataclasses_of_the_package_are_records():
    """Start-up: a `@dataclass(frozen=True)` compiles six methods when its module is imported
    (about half a millisecond); the package declares its frozen records with `@record`."""
    package = Path(__file__).resolve().parent.parent / "infersize"
    declared = [
        f"{path.relative_to(package)}:{number}"
        for path in sorted(package.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.match(r"\s*@(dataclasses\.)?dataclass\(.*frozen=True", line)
    ]
    assert declared == []
