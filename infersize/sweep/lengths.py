"""A trace of request lengths to replay: a CSV, JSON Lines or Parquet file with the columns
`input_tokens` and `output_tokens` (other columns are ignored), read by pyarrow."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from infersize.bounds import ANSWER_TOKENS, PROMPT_TOKENS
from infersize.errors import InfersizeError
from infersize.files import InputFileError, read_input

MAX_LENGTHS_BYTES = 512 * 2**20
COLUMNS = ("input_tokens", "output_tokens")
BOUNDS = {"input_tokens": PROMPT_TOKENS, "output_tokens": ANSWER_TOKENS}


class LengthsFileError(InfersizeError):
    """A lengths file that cannot be read, or whose lengths are not positive integers."""


def _table(path: Path, data: bytes) -> dict[str, list[object]]:
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(io.BytesIO(data)).to_pydict()  # type: ignore[no-any-return]
    if suffix == ".csv":
        import pyarrow.csv as pcsv

        return pcsv.read_csv(io.BytesIO(data)).to_pydict()  # type: ignore[no-any-return]
    if suffix in (".jsonl", ".ndjson", ".json"):
        rows = [json.loads(line) for line in data.decode("utf-8-sig").splitlines() if line.strip()]
        if not all(isinstance(row, dict) for row in rows):
            raise LengthsFileError(f"{path}: every line must be a JSON object")
        return {name: [row.get(name) for row in rows] for name in COLUMNS}
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
