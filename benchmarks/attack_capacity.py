"""The third suite's cases for benchmarks/attack.py: `capacity`, its lengths files, capacity
sweeps and the tables and manifests they leave, by group (SLA, load, lengths, deployment,
sweep configuration, kills, tables read back, large inputs), and a fuzzed sample of capacity's
numeric options. An answer (exit 0) must hold no NaN or infinity in its JSON."""

from __future__ import annotations

import datetime
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path

import polars as pl
from attack_tools import Ran, command, judge

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.support.sweeps import SWEEP

Outcome = tuple[str, str]
CAP = ["capacity", "--target", "qwen2.5-7b", "--draft", "qwen2.5-0.5b", "--gpu", "h100"]
LOAD = ["--input-tokens", "500", "--output-tokens", "100", "--request-rate", "1"]
SMALL = ["--requests", "40", "--replications", "2", "--acceptance-rate", "0.7"]
HOSTILE_SLA = "ttft:p99<=1" + "e" * 120_000 + "!"
WHEN = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)


def _finite_json(ran: Ran) -> Outcome:
    """judge's outcome for exit 0 or 2, and for exit 0 a JSON answer without NaN or infinity."""
    outcome = judge(ran, {0, 2})
    if outcome[0] != "clean" or ran.code != 0 or not ran.stdout.lstrip().startswith("{"):
        return outcome
    text = ran.stdout
    if any(word in text for word in ("NaN", "Infinity")):
        return "wrong", "NaN or infinity in the JSON"
    numbers = [v for v in _leaves(json.loads(text)) if isinstance(v, float)]
    return outcome if all(map(math.isfinite, numbers)) else ("wrong", "a non-finite number")


def _leaves(value: object) -> list[object]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def _one(argv: list[str], code: int, words: str = "") -> Callable[[Path], Outcome]:
    def case(tmp: Path) -> Outcome:
        ran = command([a.replace("{tmp}", str(tmp)) for a in argv], tmp)
        return _finite_json(ran) if code == 0 else judge(ran, code, words)

    return case


def _with_file(name: str, write: Callable[[Path], None], argv: list[str], code: int, words: str):
    def case(tmp: Path) -> Outcome:
        write(tmp / name)
        return _one(argv, code, words)(tmp)

    return case


def _repeat(times: int, case: Callable[[Path], Outcome]) -> Callable[[Path], Outcome]:
    """`case` run `times` times: clean only if every run is (an abort one run in ten)."""

    def repeated(tmp: Path) -> Outcome:
        for i in range(times):
            outcome = case(tmp)
            if outcome[0] != "clean":
                return outcome[0], f"run {i + 1}: {outcome[1]}"
        return outcome

    return repeated


def _sweep_file(text: str, argv: list[str], code: int, words: str) -> Callable[[Path], Outcome]:
    return _with_file("s.yaml", lambda p: p.write_text(text), argv, code, words)


VALIDATE = ["sweep", "validate", "{tmp}/s.yaml"]
LENGTHS = [*CAP, *SMALL, "--request-rate", "1", "--lengths"]


def _parquet(frame: dict[str, list[object]]) -> Callable[[Path], None]:
    return lambda path: pl.DataFrame(frame).write_parquet(path)


def _capacity_sweep(workloads: int, slas: int, rates: str = "[5, 40]") -> str:
    base = SWEEP.split("workloads:")[0]
    listed = "".join(
        f"  - {{name: w{i}, input_tokens: {100 + i}, output_tokens: 128}}\n"
        for i in range(workloads)
    )
    named = "".join(f'  s{i}: "ttft:p99<={1000 + i}ms"\n' for i in range(slas))
    return (
        f"{base}workloads:\n{listed}slas:\n{named}target_request_rates: {rates}\n"
        "capacity: {requests: 300, simulate_top: 1}\n"
    )


CASES: list[tuple[str, str, Callable[[Path], Outcome]]] = [
    (
        "sla",
        "120k regex-hostile on the line",
        _one([*CAP, *LOAD, "--sla", HOSTILE_SLA], 2, "1,000"),
    ),
    (
        "sla",
        "120k regex-hostile in sweep YAML",
        _sweep_file(
            SWEEP.replace('"ttft:p99<=5s;tpot:p99<=100ms"', f'"{HOSTILE_SLA}"'),
            VALIDATE,
            2,
            "1,000",
        ),
    ),
    (
        "sla",
        "1,000 characters, hostile",
        _one([*CAP, *LOAD, "--sla", HOSTILE_SLA[:999] + "!"], 2, "unit"),
    ),
    (
        "load",
        "1-token answers",
        _one(
            [
                *CAP,
                *SMALL,
                "--input-tokens",
                "1",
                "--output-tokens",
                "1",
                "--request-rate",
                "1",
                "--json",
            ],
            0,
        ),
    ),
    (
        "load",
        "tpot on 1-token answers",
        _one(
            [
                *CAP,
                *SMALL,
                "--input-tokens",
                "9",
                "--output-tokens",
                "1",
                "--request-rate",
                "1",
                "--sla",
                "tpot:p99<=50ms",
            ],
            2,
            "one token",
        ),
    ),
    (
        "load",
        "--request-rate 5e-324",
        _one([*CAP, *SMALL, *LOAD[:4], "--request-rate", "5e-324"], 2, "--request-rate"),
    ),
    (
        "load",
        "--target-request-rate 1e308",
        _one(
            [*CAP, *SMALL, *LOAD, "--sla", "ttft:p90<=2s", "--target-request-rate", "1e308"],
            2,
            "--target-request-rate",
        ),
    ),
    (
        "load",
        "--headroom 1e308",
        _one(
            [
                *CAP,
                *SMALL,
                *LOAD,
                "--sla",
                "ttft:p90<=2s",
                "--target-request-rate",
                "5",
                "--headroom",
                "1e308",
            ],
            2,
            "--headroom",
        ),
    ),
    (
        "load",
        "--price 1e308",
        _one([*CAP, *SMALL, *LOAD, "--price-usd-per-hour", "1e308"], 2, "--price-usd-per-hour"),
    ),
    ("load", "--seed -1", _one([*CAP, *SMALL, *LOAD, "--seed", "-1"], 2, "--seed")),
    (
        "load",
        "--arrival gamma:1e-300",
        _one([*CAP, *SMALL, *LOAD, "--arrival", "gamma:1e-300"], 2, "--arrival"),
    ),
    (
        "load",
        "--requests 1 for a p99",
        _one(
            [
                *CAP,
                *LOAD,
                "--requests",
                "1",
                "--sla",
                "ttft:p99<=2s",
                "--target-request-rate",
                "10",
            ],
            2,
            "too few",
        ),
    ),
    (
        "load",
        "--acceptance-length nan",
        _one(
            [*CAP, *LOAD, "--requests", "40", "--acceptance-length", "nan"],
            2,
            "--acceptance-length",
        ),
    ),
    (
        "lengths",
        "JSON Lines nested 100,000 deep",
        _with_file(
            "l.jsonl",
            lambda p: p.write_text("[" * 100_000 + "]" * 100_000),
            [*LENGTHS, "{tmp}/l.jsonl"],
            2,
            "nested too deep",
        ),
    ),
    (
        "lengths",
        "Parquet timestamp column, 10 runs",
        _repeat(
            10,
            _with_file(
                "l.parquet",
                _parquet({"input_tokens": [WHEN], "output_tokens": [9]}),
                [*LENGTHS, "{tmp}/l.parquet"],
                2,
                "whole numbers",
            ),
        ),
    ),
    (
        "lengths",
        "CSV timestamp column",
        _with_file(
            "l.csv",
            lambda p: p.write_text("input_tokens,output_tokens\n2024-01-01T00:00:00Z,3\n"),
            [*LENGTHS, "{tmp}/l.csv"],
            2,
            "whole numbers",
        ),
    ),
    (
        "lengths",
        "Parquet with extra timestamp",
        _with_file(
            "l.parquet",
            _parquet({"input_tokens": [9], "output_tokens": [9], "sent": [WHEN]}),
            [*LENGTHS, "{tmp}/l.parquet", "--json"],
            0,
            "",
        ),
    ),
    (
        "sweep configuration",
        "requests 99 for a p99",
        _sweep_file(SWEEP.replace("requests: 300", "requests: 99"), VALIDATE, 2, "too few"),
    ),
    (
        "sweep configuration",
        "tpot on 1-token workload",
        _sweep_file(
            SWEEP.replace("output_tokens: 128}", "output_tokens: 1}"), VALIDATE, 2, "one token"
        ),
    ),
    (
        "sweep configuration",
        "price 1e308",
        _sweep_file(
            SWEEP.replace(
                "{name: l40s, tp: [1]}", "{name: l40s, tp: [1], price_usd_per_hour: 1e308}"
            ),
            VALIDATE,
            2,
            "price_usd_per_hour",
        ),
    ),
    (
        "sweep configuration",
        "gamma:1e-300 workload",
        _sweep_file(
            SWEEP.replace("output_tokens: 128}", "output_tokens: 128, arrival: 'gamma:1e-300'}"),
            VALIDATE,
            2,
            "gamma",
        ),
    ),
    (
        "sweep configuration",
        "target rate 1e308",
        _sweep_file(
            SWEEP.replace("target_request_rates: [5, 40]", "target_request_rates: [5, 1e308]"),
            VALIDATE,
            2,
            "request rates",
        ),
    ),
    (
        "large inputs",
        "3,000 workloads × 3,000 SLAs",
        _sweep_file(_capacity_sweep(3000, 3000), VALIDATE, 2, "max_rows"),
    ),
    (
        "large inputs",
        "300 workloads × 300 SLAs",
        _sweep_file(_capacity_sweep(300, 300), VALIDATE, 2, "max_rows"),
    ),
    (
        "large inputs",
        "100,000 target rates",
        _sweep_file(
            _capacity_sweep(1, 1, "[" + ", ".join(str(1 + i) for i in range(100_000)) + "]"),
            VALIDATE,
            2,
            "max_rows",
        ),
    ),
    (
        "large inputs",
        "millions of chunks",
        _sweep_file(
            SWEEP.split("workloads:")[0]
            .replace(
                "context_lengths: [4096]", "context_lengths: {start: 1000, stop: 100999, step: 1}"
            )
            .replace("batch_sizes: [1]", "batch_sizes: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]")
            + "max_cells: 100000000000\nchunk_cells: 1000\n",
            VALIDATE,
            2,
            "chunks",
        ),
    ),
]
