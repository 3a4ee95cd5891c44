"""A trace of request lengths to replay: a CSV, JSON Lines or Parquet file with the columns
`input_tokens` and `output_tokens` (other columns are never read): Parquet read by polars, CSV
by pyarrow."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from infersize.bounds import ANSWER_TOKENS, PROMPT_TOKENS
from infersize.errors import InfersizeError
from infersize.files import InputFileError, read_input

MAX_LENGTHS_BYTES = 512 * 2**20
COLUMNS = ("input_tokens", "output_tokens")
BOUNDS = {"input_tokens": PROMPT_TOKENS, "output_tokens": ANSWER_TOKENS}


class LengthsFileError(InfersizeError):
    """A lengths file that cannot be read, or whose lengths are not positive integers."""


def _arrow_columns(table: Any, path: Path) -> dict[str, list[object]]:
    """The two columns of an Arrow table as Python lists, once their types are checked: only
    whole numbers are converted, and other columns are never read."""
    import pyarrow as pa

    columns: dict[str, list[object]] = {}
    for name in COLUMNS:
        if name not in table.column_names:
            continue
        column = table.column(name)
        if not (pa.types.is_integer(column.type) or pa.types.is_null(column.type)):
            raise LengthsFileError(
                f"{path}: {name} must hold whole numbers, not {column.type} values"
            )
        columns[name] = column.to_pylist()
    return columns


def _json_lines(path: Path, data: bytes) -> dict[str, list[object]]:
    rows = []
    for number, line in enumerate(data.decode("utf-8-sig").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except RecursionError:  # a line nested past the parser's depth: no lengths row is
            raise LengthsFileError(f"{path}: line {number}: nested too deep") from None
    if not all(isinstance(row, dict) for row in rows):
        raise LengthsFileError(f"{path}: every line must be a JSON object")
    return {name: [row.get(name) for row in rows] for name in COLUMNS}


def _parquet_columns(path: Path, data: bytes) -> dict[str, list[object]]:
    """Read by polars: pyarrow's Parquet reader leaves threads that abort the process at exit
    now and then (SIGABRT after the right message), whatever its use_threads."""
    import polars as pl

    schema = pl.read_parquet_schema(io.BytesIO(data))
    wanted = [name for name in COLUMNS if name in schema]
    for name in wanted:
        if not (schema[name].is_integer() or schema[name] == pl.Null):
            raise LengthsFileError(
                f"{path}: {name} must hold whole numbers, not {schema[name]} values"
            )
    frame = pl.read_parquet(io.BytesIO(data), columns=wanted)
    return {name: frame[name].to_list() for name in wanted}


def _table(path: Path, data: bytes) -> dict[str, list[object]]:
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return _parquet_columns(path, data)
    if suffix == ".csv":
        import pyarrow.csv as pcsv

        options = pcsv.ReadOptions(use_threads=False)  # its reader's threads can abort the exit
        return _arrow_columns(pcsv.read_csv(io.BytesIO(data), options), path)
    if suffix in (".jsonl", ".ndjson", ".json"):
        return _json_lines(path, data)
    raise LengthsFileError(f"{path}: a lengths file is .csv, .jsonl or .parquet, not '{suffix}'")


def read_lengths(path: Path) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(input tokens, output tokens) of every request of the trace, in its order."""
    try:
        data = read_input(path, MAX_LENGTHS_BYTES)
        table = _table(path, data)
    except InputFileError as exc:
        raise LengthsFileError(str(exc)) from None
    except (ValueError, UnicodeDecodeError, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise LengthsFileError(f"{path}: cannot read it ({reason})") from None
    missing = [name for name in COLUMNS if name not in table]
    if missing:
        raise LengthsFileError(f"{path}: missing column(s) {', '.join(missing)}")
    columns = []
    for name in COLUMNS:
        values, bound = table[name], BOUNDS[name]
        if not values:
            raise LengthsFileError(f"{path}: no rows")
        for row, value in enumerate(values, start=1):
            whole = isinstance(value, int) and not isinstance(value, bool)
            if not whole or not bound.contains(value):
                raise LengthsFileError(
                    f"{path}: row {row}: {name} must be a whole number in {bound.range_text()}, "
                    f"got {value!r}"
                )
        columns.append(tuple(int(np.int64(v)) for v in values))  # type: ignore[arg-type]
    return columns[0], columns[1]
