"""A capacity sweep at fleet scale: sweeps/capacity.yaml widened to more than 10,000 capacity
rows (four GPU types, the two Llama targets in two precisions, separate drafts, EAGLE-3 heads
and n-gram lookup, three workloads, two SLAs, six target rates each), run end to end as a user
runs it: once with `--jobs 2`, then as two independent `--jobs 1` runs at once. Prints the rows,
the share the simulator answered, each wall time, rows per second, and the throughput of
`--jobs 2` over the pair's (the two cores used either way), and checks that `--jobs 1` and
`--jobs 2` wrote the same bytes.

Usage: python benchmarks/capacity_sweep_bench.py [--write-sweep FILE]
--write-sweep only writes the widened sweep file (to run it by hand) and exits.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def widened() -> dict[str, object]:
    """sweeps/capacity.yaml with every capacity axis widened."""
    doc = yaml.safe_load((ROOT / "sweeps" / "capacity.yaml").read_text())
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


def timed_runs(sweep: Path, outs: list[Path], jobs: int) -> float:
    """Wall seconds of `infersize sweep run` into each of `outs` at once."""
    exe = shutil.which("infersize") or sys.exit("infersize is not installed")
    start = time.perf_counter()
    argv = [exe, "sweep", "run", str(sweep), "--jobs", str(jobs), "-q", "--out"]
    procs = [subprocess.Popen([*argv, str(out)], stdout=subprocess.DEVNULL) for out in outs]
    if any(proc.wait() != 0 for proc in procs):
        sys.exit("a sweep run failed")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write-sweep", type=Path)
    args = parser.parse_args()
    text = yaml.safe_dump(widened(), sort_keys=False)
    if args.write_sweep:
        args.write_sweep.write_text(text)
        return
    print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f} at start")
    with tempfile.TemporaryDirectory() as tmp:
        sweep = Path(tmp, "capacity-fleet.yaml")
        sweep.write_text(text)
        two = timed_runs(sweep, [Path(tmp, "jobs2")], 2)
        pair = timed_runs(sweep, [Path(tmp, "a"), Path(tmp, "b")], 1)
        manifest = json.loads(Path(tmp, "jobs2", "manifest.json").read_text())
        figures = manifest["capacity"]
        rows, simulated = figures["rows"], figures["simulated_rows"]
        same = all(
            Path(tmp, "jobs2", name).read_bytes() == Path(tmp, "a", name).read_bytes()
            for name in ("capacity.parquet", "capacity.csv", "best_pairs.parquet")
        )
    print(
        f"capacity rows: {rows:,} ({simulated:,} answered by the simulator, "
        f"{simulated / rows:.0%}); {manifest['cells']:,} decode cells"
    )
    print(f"--jobs 2: {two:.1f} s ({rows / two:,.1f} rows/s)")
    print(f"two --jobs 1 runs at once: {pair:.1f} s ({2 * rows / pair:,.1f} rows/s)")
    print(f"--jobs 2 over two --jobs 1 runs, throughput: {(rows / two) / (2 * rows / pair):.2f}x")
    print(f"--jobs 1 and --jobs 2 wrote the same bytes: {'yes' if same else 'NO'}")
    print(f"load at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
