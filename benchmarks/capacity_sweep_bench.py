"""A capacity sweep at fleet scale: sweeps/capacity.yaml widened to more than 10,000 capacity
rows (four GPU types, the two Llama targets in two precisions, separate drafts, EAGLE-3 heads
and n-gram lookup, three workloads, two SLAs, six target rates each), run end to end as a user
runs it: once with `--jobs 2`, then as two independent `--jobs 1` runs at once, then once more
with every row simulated (`capacity: {simulate_all: true}`). Prints the rows, the share the
simulator answered, each wall time, rows per second, the throughput of `--jobs 2` over the
pair's (the two cores used either way), checks that `--jobs 1` and `--jobs 2` wrote the same
bytes, and whether `best --request-rate` chooses alike from the sweep and from the fully
simulated run (benchmarks/capacity_best_agreement.py).

Usage: python benchmarks/capacity_sweep_bench.py [--rows N] [--write-sweep FILE]
    [--skip-pair] [--skip-agreement]
--rows N widens the grid further, one real axis at a time (Qwen3 targets with their draft and
EAGLE-3 head, a strict SLA, B200s, target rates of 2.5 and 320 requests/s, a longer chat
workload, a batch SLA), until it holds at least N rows (at most 101,376). --write-sweep only
writes the sweep file (to run it by hand) and exits. --skip-pair and --skip-agreement leave
out the pair of `--jobs 1` runs and the fully simulated run.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
Doc = dict[str, Any]


def widened() -> Doc:
    """sweeps/capacity.yaml with every capacity axis widened."""
    doc: Doc = yaml.safe_load((ROOT / "sweeps" / "capacity.yaml").read_text())
    doc["name"] = "capacity-fleet"
    doc["target_quants"] = ["fp8", "bf16"]
    doc["gpus"] = [
        {"name": "h100", "tp": [1, 2, 4]},
        {"name": "h200", "tp": [1, 2]},
        {"name": "a100", "tp": [1, 4]},
        {"name": "l40s", "tp": [1, 4]},
    ]
    doc["workloads"] = [
        {"name": "chat", "input_tokens": 1024, "output_tokens": 256},
        {"name": "rag", "input_tokens": 6000, "output_tokens": 300},
        {"name": "code", "input_tokens": 2048, "output_tokens": 512},
    ]
    doc["target_request_rates"] = [5, 10, 20, 40, 80, 160]
    doc["output"] = {"dir": "outputs/capacity-fleet", "formats": ["parquet", "csv"]}
    return doc


def _qwen(doc: Doc) -> None:
    doc["targets"] += ["qwen3-8b", "qwen3-32b"]
    doc["drafts"] += ["qwen3-0.6b"]


def _strict(doc: Doc) -> None:
    doc["slas"]["strict"] = "ttft:p99<=500ms;tpot:p99<=25ms"


def _b200(doc: Doc) -> None:
    doc["gpus"].append({"name": "b200", "tp": [1, 2]})


def _rates(doc: Doc) -> None:
    doc["target_request_rates"] = [2.5, *doc["target_request_rates"], 320]


def _long_chat(doc: Doc) -> None:
    doc["workloads"].append({"name": "long-chat", "input_tokens": 4096, "output_tokens": 1024})


def _batch(doc: Doc) -> None:
    doc["slas"]["batch"] = "ttft:p99<=30s;tpot:p99<=200ms"


# the widening steps of --rows, in order: each adds real values of one axis
WIDER: tuple[Callable[[Doc], None], ...] = (_qwen, _strict, _b200, _rates, _long_chat, _batch)


def capacity_rows(doc: Doc) -> tuple[int, int]:
    """The sweep's capacity rows, as its plan counts them, and as its size check bounds them
    before planning (settings that do not apply included), which `max_rows` must admit."""
    from infersize.sweep.config import load_sweep
    from infersize.sweep.plan import build_plan
    from infersize.sweep.size import capacity_rows_upper_bound

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "sweep.yaml")
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        loaded = load_sweep(path)
        bound = math.ceil(capacity_rows_upper_bound(loaded[0]))
        return build_plan(*loaded).capacity_rows, bound


def with_rows(rows: int) -> Doc:
    """The widened sweep, widened further one step at a time until it holds `rows` rows."""
    doc = widened()
    steps = list(WIDER)
    while (count := capacity_rows(doc))[0] < rows:
        if not steps:
            sys.exit(f"the widest grid holds {count[0]:,} rows, fewer than {rows:,}")
        steps.pop(0)(doc)
    doc["capacity"]["max_rows"] = max(count[1], doc["capacity"].get("max_rows", 0))
    return doc


def timed_runs(sweep: Path, outs: list[Path], jobs: int) -> float:
    """Wall seconds of `infersize sweep run` into each of `outs` at once."""
    exe = shutil.which("infersize") or sys.exit("infersize is not installed")
    start = time.perf_counter()
    argv = [exe, "sweep", "run", str(sweep), "--jobs", str(jobs), "-q", "--out"]
    procs = [subprocess.Popen([*argv, str(out)], stdout=subprocess.DEVNULL) for out in outs]
    if any(proc.wait() != 0 for proc in procs):
        sys.exit("a sweep run failed")
    return time.perf_counter() - start


def _pair(tmp: Path, sweep: Path, rows: int, two: float) -> None:
    """Two --jobs 1 runs at once against the --jobs 2 run's `two` seconds."""
    pair = timed_runs(sweep, [tmp / "a", tmp / "b"], 1)
    same = all(
        (tmp / "jobs2" / name).read_bytes() == (tmp / "a" / name).read_bytes()
        for name in ("capacity.parquet", "capacity.csv", "best_pairs.parquet")
    )
    print(f"two --jobs 1 runs at once: {pair:.1f} s ({2 * rows / pair:,.1f} rows/s)")
    print(f"--jobs 2 over two --jobs 1 runs, throughput: {(rows / two) / (2 * rows / pair):.2f}x")
    print(f"--jobs 1 and --jobs 2 wrote the same bytes: {'yes' if same else 'NO'}")


def _agreement(tmp: Path, doc: Doc) -> None:
    """The sweep again with every row simulated, and whether best --request-rate agrees."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from capacity_best_agreement import agreement, summary

    every = copy.deepcopy(doc)
    every["capacity"]["simulate_all"] = True
    sweep = tmp / "simulate-all.yaml"
    sweep.write_text(yaml.safe_dump(every, sort_keys=False))
    seconds = timed_runs(sweep, [tmp / "all"], 2)
    print(f"every row simulated (simulate_all), --jobs 2: {seconds:.1f} s")
    result = agreement(tmp / "jobs2", tmp / "all")
    print(summary(result) + "".join(f"\n  differs: {line}" for line in result.differ))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int)
    parser.add_argument("--write-sweep", type=Path)
    parser.add_argument("--skip-pair", action="store_true")
    parser.add_argument("--skip-agreement", action="store_true")
    args = parser.parse_args()
    doc = widened() if args.rows is None else with_rows(args.rows)
    text = yaml.safe_dump(doc, sort_keys=False)
    if args.write_sweep:
        args.write_sweep.write_text(text)
        return
    print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f} at start")
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        sweep = tmp / "capacity-fleet.yaml"
        sweep.write_text(text)
        two = timed_runs(sweep, [tmp / "jobs2"], 2)
        manifest = json.loads((tmp / "jobs2" / "manifest.json").read_text())
        rows, simulated = manifest["capacity"]["rows"], manifest["capacity"]["simulated_rows"]
        print(
            f"capacity rows: {rows:,} ({simulated:,} answered by the simulator, "
            f"{simulated / rows:.0%}); {manifest['cells']:,} decode cells"
        )
        print(f"--jobs 2: {two:.1f} s ({rows / two:,.1f} rows/s)")
        if not args.skip_pair:
            _pair(tmp, sweep, rows, two)
        if not args.skip_agreement:
            _agreement(tmp, doc)
    print(f"load at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
