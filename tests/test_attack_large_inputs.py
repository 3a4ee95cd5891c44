"""Sweeps too large to run, refused before they are planned, with the count that passes the
limit: a capacity table of millions of rows (300 workloads × 300 SLAs would have run for
hours, 3,000 × 3,000 died of MemoryError after minutes of planning), target rates by the
hundred thousand, and a grid cut into more chunks than memory holds."""

from __future__ import annotations

import time

from infersize.cli import app
from tests.support.sweeps import SWEEP

BASE = SWEEP.split("workloads:")[0]


def _capacity_sweep(workloads: int, slas: int, rates: str = "[5, 40]", extra: str = "") -> str:
    listed = "".join(
        f"  - {{name: w{i}, input_tokens: {100 + i}, output_tokens: 128}}\n"
        for i in range(workloads)
    )
    named = "".join(f'  s{i}: "ttft:p99<={1000 + i}ms"\n' for i in range(slas))
    return (
        f"{BASE}workloads:\n{listed}slas:\n{named}target_request_rates: {rates}\n"
        f"capacity: {{requests: 300, simulate_top: 1{extra}}}\n"
    )


def _validate(runner, tmp_path, text: str):
    path = tmp_path / "big.yaml"
    path.write_text(text)
    start = time.perf_counter()
    result = runner.invoke(app, ["sweep", "validate", str(path)])
    return path, result, time.perf_counter() - start


def test_thousands_of_workloads_and_slas_are_refused_before_planning(runner, tmp_path):
    path, result, seconds = _validate(runner, tmp_path, _capacity_sweep(3000, 3000))
    assert (result.exit_code, result.stderr) == (
        2,
        f"error: {path}: the capacity table would hold up to 540,000,000 rows (settings × "
        "target rates × SLAs), each a capacity search, over the limit of 50,000; raise it with "
        "capacity: {max_rows: N} in the YAML\n",
    )
    assert seconds < 60  # generous: planning it took minutes and gigabytes


def test_a_hundred_thousand_target_rates_are_refused(runner, tmp_path):
    rates = "[" + ", ".join(str(1 + i) for i in range(100_000)) + "]"
    path, result, _ = _validate(runner, tmp_path, _capacity_sweep(1, 1, rates))
    assert result.exit_code == 2
    assert result.stderr.startswith(
        f"error: {path}: the capacity table would hold up to 3,000,000 rows"
    )


def test_the_row_limit_is_raised_in_the_file(runner, tmp_path):
    text = _capacity_sweep(30, 30, extra=", max_rows: 1000000")
    result = _validate(runner, tmp_path, text)[1]
    assert result.exit_code == 0, result.output


def test_a_grid_cut_into_too_many_chunks_is_refused(runner, tmp_path):
    text = (
        BASE.replace(
            "context_lengths: [4096]", "context_lengths: {start: 1000, stop: 100999, step: 1}"
        ).replace("batch_sizes: [1]", "batch_sizes: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]")
    ) + "max_cells: 100000000000\nchunk_cells: 1000\n"
    path, result, seconds = _validate(runner, tmp_path, text)
    assert (result.exit_code, result.stderr) == (
        2,
        f"error: {path}: 120,000,000 cells in chunks of 1,000 make up to 120,000 chunks, over "
        "the limit of 100,000; raise chunk_cells: in the YAML\n",
    )
    assert seconds < 60
