"""Records: frozen dataclasses whose methods are shared instead of written for each class.

`@dataclass(frozen=True)` writes the source of six methods for its class (`__init__`,
`__repr__`, `__eq__`, `__hash__`, `__setattr__`, `__delattr__`) and compiles each one when the
module is imported: about half a millisecond a class on Python 3.11, which for the sixty records
that `infersize spec` imports was most of its start-up beyond Typer's own. A `record` is the same
dataclass (`dataclasses.fields`, `replace`, `asdict` and `is_dataclass` treat it as one), given
one implementation of each method that reads the class's fields: it takes the same arguments
and gives the same repr, equality, hash and `FrozenInstanceError` as
`@dataclass(frozen=True, kw_only=True)`, or as `@dataclass(frozen=True)` with
`@record(kw_only=False)`. A method the class defines itself is kept, as a dataclass keeps it."""

from __future__ import annotations

import dataclasses
import inspect
import operator
import reprlib
from collections.abc import Callable
from dataclasses import MISSING, FrozenInstanceError
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:  # tells type checkers what `record` makes; nothing to do at run time (Python 3.10 too)

    def dataclass_transform(**_: object) -> Callable[[Any], Any]:
        return lambda decorator: decorator


T = TypeVar("T")
_PLAN = "__record_plan__"  # the class attribute that holds a record class's _Plan


def _values_of(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """A function giving the tuple of an object's attributes `names`, in that order."""
    if len(names) > 1:
        return operator.attrgetter(*names)
    return lambda obj: tuple(getattr(obj, name) for name in names)


def _listed(names: list[str]) -> str:
    """Names as Python's own argument errors list them: 'a', 'a' and 'b', 'a', 'b', and 'c'."""
    quoted = [repr(name) for name in names]
    if len(quoted) <= 2:
        return " and ".join(quoted)
    return ", ".join(quoted[:-1]) + ", and " + quoted[-1]


class _Factory:
    def __repr__(self) -> str:
        return "<factory>"  # a default its field's factory makes, as a dataclass shows it


_FACTORY = _Factory()


def _parameter(f: dataclasses.Field[Any]) -> inspect.Parameter:
    kind = inspect.Parameter.KEYWORD_ONLY if f.kw_only else inspect.Parameter.POSITIONAL_OR_KEYWORD
    default = inspect.Parameter.empty if f.default is MISSING else f.default
    if f.default_factory is not MISSING:
        default = _FACTORY
    return inspect.Parameter(f.name, kind, default=default, annotation=f.type)


class _Signature:
    """A record class's signature as inspect gives a dataclass's (from the __init__ written for
    it), worked out when asked (help(), the docstring below)."""

    def __get__(self, obj: object, cls: type) -> inspect.Signature:
        parameters = [_parameter(f) for f in dataclasses.fields(cls)]
        return inspect.Signature(parameters, return_annotation=None)


class _Docstring:
    """The docstring of a record class written without one: its signature, as a dataclass's,
    worked out when read (a dataclass works it out when the class is made)."""

    def __get__(self, obj: object, cls: type) -> str:
        return cls.__name__ + str(inspect.signature(cls)).replace(" -> None", "")


class _Plan:
    """What the shared methods need to know of one record class, worked out once."""

    def __init__(self, cls: type) -> None:
        fields = dataclasses.fields(cls)
        if any(not f.init for f in fields):
            raise TypeError(f"{cls.__qualname__}: every field of a record is an argument")
        self.qualname = cls.__qualname__
        self.names = tuple(f.name for f in fields)
        self.given = frozenset(self.names)
        self.positional = tuple(f.name for f in fields if not f.kw_only)
        self.defaults = {f.name: f.default for f in fields if f.default is not MISSING}
        self.factories = {
            f.name: f.default_factory for f in fields if f.default_factory is not MISSING
        }
        self.required = [
            n for n in self.names if n not in self.defaults and n not in self.factories
        ]
        self.post_init = hasattr(cls, "__post_init__")
        self.shown = tuple(f.name for f in fields if f.repr)
        self.compared = _values_of(tuple(f.name for f in fields if f.compare))
        self.hashed = _values_of(
            tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
        )

    def merge(self, args: tuple[Any, ...], values: dict[str, Any]) -> dict[str, Any]:
        """Positional arguments joined to the keywords, refused as Python refuses them."""
        if len(args) > len(self.positional):
            takes = len(self.positional) + 1  # self too, as Python counts them
            raise TypeError(
                f"{self.qualname}.__init__() takes {takes} positional argument"
                f"{'s' if takes > 1 else ''} but {len(args) + 1} were given"
            )
        by_position = dict(zip(self.positional, args, strict=False))
        twice = [name for name in by_position if name in values]
        if twice:
            raise TypeError(
                f"{self.qualname}.__init__() got multiple values for argument '{twice[0]}'"
            )
        return by_position | values

    def fill(self, state: dict[str, Any], values: dict[str, Any]) -> None:
        """The fields of a record made with some arguments left out: their defaults."""
        unknown = [name for name in values if name not in self.given]
        if unknown:
            raise TypeError(
                f"{self.qualname}.__init__() got an unexpected keyword argument '{unknown[0]}'"
            )
        missing = [name for name in self.required if name not in values]
        if missing:
            kind = "positional" if missing[0] in self.positional else "keyword-only"
            plural = "s" if len(missing) > 1 else ""
            raise TypeError(
                f"{self.qualname}.__init__() missing {len(missing)} required {kind} "
                f"argument{plural}: {_listed(missing)}"
            )
        for name in self.names:
            if name in values:
                state[name] = values[name]
            elif name in self.defaults:
                state[name] = self.defaults[name]
            else:
                state[name] = self.factories[name]()


def _plan(obj: object) -> _Plan:
    plan: _Plan = getattr(type(obj), _PLAN)
    return plan


def _init(self: object, /, *args: Any, **values: Any) -> None:
    plan = _plan(self)
    if args:
        values = plan.merge(args, values)
    state = self.__dict__  # a frozen dataclass's __init__ also writes past __setattr__
    if values.keys() == plan.given:
        for name in plan.names:  # in the fields' order, as a dataclass sets them
            state[name] = values[name]
    else:
        plan.fill(state, values)
    if plan.post_init:
        self.__post_init__()  # type: ignore[attr-defined]


@reprlib.recursive_repr()
def _repr(self: object) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in _plan(self).shown)
    return f"{type(self).__qualname__}({shown})"


def _eq(self: object, other: object) -> object:
    if other.__class__ is self.__class__:
        compared = _plan(self).compared
        return compared(self) == compared(other)
    return NotImplemented


def _hash(self: object) -> int:
    return hash(_plan(self).hashed(self))


def _setattr(self: object, name: str, value: object) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self: object, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


# what a frozen dataclass writes unless the class has its own, and what it always writes
_METHODS: dict[str, Callable[..., object]] = {"__init__": _init, "__repr__": _repr, "__eq__": _eq}
_FROZEN: dict[str, Callable[..., object]] = {"__setattr__": _setattr, "__delattr__": _delattr}
_SIGNATURE = _Signature()
_DOCSTRING = _Docstring()


def _make(cls: type[T], kw_only: bool) -> type[T]:
    own = dict(cls.__dict__)
    if _FROZEN.keys() & own.keys():
        raise TypeError(f"{cls.__qualname__}: a record is frozen, it sets no attributes")
    shared = {name: method for name, method in _METHODS.items() if name not in own}
    # Python gives a class that defines __eq__ `__hash__ = None`; a frozen dataclass, its fields'
    if "__hash__" not in own or (own["__hash__"] is None and "__eq__" in own):
        shared["__hash__"] = _hash
    for name, method in (shared | _FROZEN).items():
        setattr(cls, name, method)
    if "__init__" in shared:
        setattr(cls, "__signature__", _SIGNATURE)  # noqa: B010 - mypy: no such class attribute
    undocumented = not own.get("__doc__")
    if undocumented:  # else the dataclass works the signature out now, for its docstring
        cls.__doc__ = "(worked out when read)"
    made = dataclasses.dataclass(init=False, repr=False, eq=False, kw_only=kw_only)(cls)
    if undocumented:
        made.__doc__ = _DOCSTRING  # type: ignore[assignment]
    setattr(made, _PLAN, _Plan(made))
    return made


@overload
def record(cls: type[T], /) -> type[T]: ...


@overload
def record(*, kw_only: bool = True) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(
    kw_only_default=True,
    frozen_default=True,
    field_specifiers=(dataclasses.field, dataclasses.Field),
)
def record(
    cls: type[T] | None = None, /, *, kw_only: bool = True
) -> type[T] | Callable[[type[T]], type[T]]:
    """A frozen dataclass, its fields keyword-only unless `kw_only=False`."""
    if cls is None:
        return lambda later: _make(later, kw_only)
    return _make(cls, kw_only)
