"""Lengths files a careless or hostile user gives `capacity --lengths`: each refused in one line
with exit code 2, and the process ends there (no abort in a library's teardown after it)."""

from __future__ import annotations

import datetime
import subprocess
import sys

import polars as pl
import pytest

from infersize.cli import app
from tests.support.commands import QWEN_CAPACITY

BASE = [
    *QWEN_CAPACITY,
    "--requests",
    "40",
    "--request-rate",
    "1",
]
WHEN = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)


def _refused(runner, path, message: str) -> None:
    result = runner.invoke(app, [*BASE, "--lengths", str(path)])
    assert (result.exit_code, result.output) == (2, f"error: {path}: {message}\n")


def test_a_json_line_nested_past_the_parsers_depth_is_one_line(runner, tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text('{"input_tokens": 5, "output_tokens": 5}\n' + "[" * 100_000 + "]" * 100_000)
    _refused(runner, path, "line 2: nested too deep")


def test_a_timestamp_column_in_csv_is_named_with_its_type(runner, tmp_path):
    path = tmp_path / "when.csv"
    path.write_text("input_tokens,output_tokens\n2024-01-01T00:00:00Z,3\n")
    _refused(runner, path, "input_tokens must hold whole numbers, not timestamp[s, tz=UTC] values")


@pytest.mark.parametrize(
    ("values", "shown"),
    [([WHEN, WHEN], "Datetime(time_unit='us', time_zone='UTC')"), ([1.5, 2.0], "Float64")],
    ids=["timestamp", "float"],
)
def test_a_parquet_column_of_another_type_is_named_with_its_type(runner, tmp_path, values, shown):
    path = tmp_path / "lengths.parquet"
    pl.DataFrame({"input_tokens": values, "output_tokens": [10, 20]}).write_parquet(path)
    _refused(runner, path, f"input_tokens must hold whole numbers, not {shown} values")


def test_columns_besides_the_lengths_are_never_read(runner, tmp_path):
    path = tmp_path / "trace.parquet"
    frame = {"input_tokens": [100, 200], "output_tokens": [10, 20], "sent": [WHEN, WHEN]}
    pl.DataFrame(frame).write_parquet(path)
    result = runner.invoke(app, [*BASE, "--lengths", str(path), "--json"])
    assert result.exit_code == 0, result.output


def test_a_refused_parquet_file_ends_the_process_with_exit_2_every_time(tmp_path):
    """Read by pyarrow, such a file printed the right line and then aborted (exit 134) in about
    one run of ten: twelve real processes all end with exit 2 and that line alone."""
    path = tmp_path / "when.parquet"
    pl.DataFrame({"input_tokens": [WHEN], "output_tokens": [10]}).write_parquet(path)
    script = "import sys; from infersize.cli import app; sys.argv[0] = 'infersize'; app()"
    for _ in range(12):
        ran = subprocess.run(
            [sys.executable, "-c", script, *BASE, "--lengths", str(path)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert ran.returncode == 2 and ran.stderr.count("\n") == 1, ran.stderr
