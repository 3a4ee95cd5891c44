"""A capacity sweep file's numbers that would make its rows meaningless or overflow them: each
refused by `sweep validate` in one line naming the file, line and key, with exit code 2."""

from __future__ import annotations

import pytest

from infersize.cli import app
from tests.support.sweeps import SWEEP

BAD = [
    (
        ("capacity: {requests: 300, simulate_top: 1}", "capacity: {requests: 99}"),
        "line 23: key 'capacity': Value error, requests 99 is too few for SLA 'interactive', "
        "term 'ttft:p99<=1s': its p99 needs at least 100 requests",
    ),
    (
        ("output_tokens: 128}", "output_tokens: 1}"),
        "line 19: key 'slas': Value error, SLA 'interactive' limits tpot, but every answer of "
        "workload 'chat' is one token: no request has one (answers need at least 2 tokens)",
    ),
    (
        ("{name: l40s, tp: [1]}", "{name: l40s, tp: [1], price_usd_per_hour: 1e308}"),
        "line 12: key 'gpus.1.price_usd_per_hour': Input should be less than or equal to 1000000",
    ),
    (
        ("{name: l40s, tp: [1]}", "{name: l40s, tp: [1], price_usd_per_hour: .nan}"),
        "line 12: key 'gpus.1.price_usd_per_hour': Input should be a finite number",
    ),
    (
        ("output_tokens: 128}", "output_tokens: 128, arrival: 'gamma:1e-300'}"),
        "line 18: key 'workloads.0.arrival': Value error, gamma's coefficient of variation must "
        "be in [0.01, 100], got '1e-300'",
    ),
    (
        ("target_request_rates: [5, 40]", "target_request_rates: [5, 1e308]"),
        "line 22: key 'target_request_rates': Value error, request rates must be numbers in "
        "[1e-06, 1e+09]",
    ),
]


@pytest.mark.parametrize(("change", "message"), BAD, ids=lambda v: str(v)[:40])
def test_a_number_that_spoils_the_capacity_rows_names_its_file_line_and_key(
    runner, tmp_path, change, message
):
    old, new = change
    assert old in SWEEP
    path = tmp_path / "fleet.yaml"
    path.write_text(SWEEP.replace(old, new, 1))
    result = runner.invoke(app, ["sweep", "validate", str(path)])
    assert (result.exit_code, result.stderr) == (2, f"error: {path}: {message}\n")
