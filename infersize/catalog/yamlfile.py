"""Safe YAML loading with line numbers, so schema errors can name the file, line and key."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from infersize.errors import CatalogError, InfersizeError
from infersize.files import InputFileError, read_input

try:  # the C loader is 5-10x faster; both are safe loaders (no object construction)
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - pyyaml built without libyaml
    _Loader = yaml.SafeLoader


class _UniqueKeyLoader(_Loader):  # type: ignore[misc]
    """A safe loader that refuses a key given twice in one mapping (YAML would keep the last
    silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[tuple[str, str]] = set()
        for key_node, _ in node.value:  # keys compared as written: no second construction
            if isinstance(key_node, yaml.ScalarNode):
                key = (key_node.tag, key_node.value)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key '{key_node.value}' is given twice", key_node.start_mark
                    )
                seen.add(key)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


def _yaml_12_scalars(loader: Any) -> None:
    """YAML 1.2's core schema for plain scalars: only true/false are booleans (1.1 also reads
    yes, no, on and off, so `yes` would pass as the number 1), and 1e12 is a float (1.1 wants
    1.0e+12 and reads 1e12 as a string)."""
    resolvers = {
        first: [(tag, rx) for tag, rx in pairs if tag != "tag:yaml.org,2002:bool"]
        for first, pairs in loader.yaml_implicit_resolvers.items()
    }
    loader.yaml_implicit_resolvers = resolvers
    loader.add_implicit_resolver(
        "tag:yaml.org,2002:bool",
        re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
        list("tTfF"),
    )
    loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(
            r"^[-+]?(?:[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?|[0-9][0-9_]*[eE][-+]?[0-9]+)$"
        ),
        list("-+0123456789"),
    )


_yaml_12_scalars(_UniqueKeyLoader)


class YamlDocument:
    """A parsed YAML file: its data and, on demand, the line of any key path inside it."""

    def __init__(self, path: Path, text: str, data: Any) -> None:
        self.path, self.text, self.data = path, text, data
        self._root: yaml.Node | None = None

    def where(self, *loc: int | str) -> str:
        """'FILE: line N: key a.b.c' for a key of the document (its line where it exists)."""
        line = self.line_of(tuple(loc))
        key = ".".join(str(p) for p in loc)
        return f"{self.path}: " + (f"line {line}: " if line else "") + f"key '{key}'"

    def line_of(self, loc: tuple[int | str, ...]) -> int | None:
        """1-based line of the deepest node on `loc` that exists (a pydantic error location)."""
        if self._root is None:
            self._root = yaml.compose(self.text, Loader=yaml.SafeLoader)
        node, line = self._root, None
        for part in loc:
            if isinstance(node, yaml.MappingNode):
                found = next(((k, v) for k, v in node.value if k.value == part), None)
                if found is None:
                    break
                line, node = found[0].start_mark.line + 1, found[1]
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
                if part >= len(node.value):
                    break
                node = node.value[part]
                line = node.start_mark.line + 1
            else:
                break
        if line is None and node is not None:
            line = node.start_mark.line + 1
        return line


def read_yaml(path: Path, error: type[InfersizeError] = CatalogError) -> YamlDocument:
    """Read and parse a YAML file; any I/O or syntax problem becomes one-line `error`."""
    try:
        raw = read_input(Path(path))
    except InputFileError as exc:
        raise error(str(exc)) from None
    return parse_yaml(path, raw, error)


def parse_yaml(path: Path, raw: bytes, error: type[InfersizeError] = CatalogError) -> YamlDocument:
    """Parse the bytes read from `path`; any syntax problem becomes one-line `error`."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise error(f"{path}: not a text file (invalid UTF-8)") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # safe: no object construction
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}" if mark is not None else "unknown line"
        raise error(f"{path}: {where}: invalid YAML ({exc.problem})") from None
    except yaml.YAMLError as exc:
        raise error(f"{path}: invalid YAML ({exc})") from None
    except RecursionError:
        raise error(f"{path}: invalid YAML (nested too deeply)") from None
    return YamlDocument(Path(path), text, data)


def _is_union_tag(part: str) -> bool:
    return part[:1].isupper() or "[" in part or part in ("str", "int", "float", "bool")


def describe_validation_error(
    doc: YamlDocument, exc: ValidationError, loc_prefix: tuple[int | str, ...] = ()
) -> str:
    """The first pydantic error as 'FILE: line N: key a.b.c: message'. An unknown key comes
    first: a misspelt key is the cause of the 'missing' error on the key it meant."""
    errors = exc.errors()
    # most telling first: an unknown key, then a value error, then a type mismatch (for a union
    # such as list | Range, the branch of the wrong type only says "should be a valid list")
    err = min(errors, key=lambda e: (e["type"] != "extra_forbidden", e["type"].endswith("_type")))
    # drop the union-member tags pydantic adds ('list[int]', 'Range'): they are not YAML keys
    loc = loc_prefix + tuple(p for p in err["loc"] if isinstance(p, int) or not _is_union_tag(p))
    line = doc.line_of(loc)
    key = ".".join(str(p) for p in loc) or "(top level)"
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = "unknown key"
    elif err["type"] == "missing":
        msg = "required key is missing"
    where = f"line {line}: " if line else ""
    return f"{doc.path}: {where}key '{key}': {msg}"


def validate(
    doc: YamlDocument,
    schema: type[Any],
    data: Any,
    loc_prefix: tuple[int | str, ...] = (),
    error: type[InfersizeError] = CatalogError,
) -> Any:
    """Validate `data` (part of `doc` at `loc_prefix`) against `schema`, errors with file:line."""
    from infersize.catalog.validation import validate_record

    try:
        return validate_record(schema, data)
    except ValidationError as exc:
        raise error(describe_validation_error(doc, exc, loc_prefix)) from None
