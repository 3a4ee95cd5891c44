"""End-to-end sweep benchmark: wall time and peak resident memory of the whole process tree
(the CLI and its joblib workers, sampled from /proc every 20 ms), for a sweep file and for the
same sweep with its α axis made 10x longer.

Usage: python benchmarks/sweep_bench.py sweeps/fleet.yaml [--jobs 2] [--scale 10]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

PAGE = os.sysconf("SC_PAGE_SIZE")


def tree_rss_bytes(root: int) -> int:
    """Sum of RSS over `root` and all its descendants."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry.name), int(fields[1])
        children.setdefault(ppid, []).append(pid)
        rss[pid] = int(fields[21]) * PAGE
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo += children.get(pid, [])
    return total


def run(sweep: Path, out: Path, jobs: int) -> tuple[float, int, dict]:
    exe = shutil.which("infersize")
    start = time.perf_counter()
    proc = subprocess.Popen(
        [
            exe,
            "sweep",
            "run",
            str(sweep),
            "--out",
            str(out),
            "--jobs",
            str(jobs),
            "--quiet",
            "--max-cells",
            "2000000000",
        ],
        stdout=subprocess.DEVNULL,
    )
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_rss_bytes(proc.pid))
        time.sleep(0.02)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"sweep failed with exit code {proc.returncode}")
    return wall, peak, json.loads((out / "manifest.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("sweep", type=Path)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--scale", type=int, default=10, help="α axis multiplied by this")
    args = parser.parse_args()
    config = yaml.safe_load(args.sweep.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        bigger = Path(tmp) / "bigger.yaml"
        rates = config["acceptance_rates"]
        values = rates if isinstance(rates, list) else None
        if values is None:
            n = round((rates["stop"] - rates["start"]) / rates["step"]) + 1
            values = [rates["start"] + i * rates["step"] for i in range(n)]
        low, high = min(values), max(values)
        n_big = len(values) * args.scale
        config["acceptance_rates"] = [
            round(low + (high - low) * i / (n_big - 1), 6) for i in range(n_big)
        ]
        bigger.write_text(yaml.safe_dump(config))
        for label, sweep in (("as given", args.sweep), (f"α axis x{args.scale}", bigger)):
            wall, peak, manifest = run(sweep, Path(tmp) / label.replace(" ", "_"), args.jobs)
            print(
                f"{args.sweep.name} {label}: {manifest['cells']:,} cells, wall {wall:.2f} s "
                f"({manifest['cells'] / wall:,.0f} cells/s end to end), peak RSS of the process "
                f"tree {peak / 2**30:.2f} GiB, frontier {manifest['rows']['frontier']:,} rows"
            )


if __name__ == "__main__":
    main()
