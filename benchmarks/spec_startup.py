"""Median wall time of `infersize spec` (the seed example) as a user runs it: a fresh process each
time. Usage: python benchmarks/spec_startup.py [RUNS]. Prints the median and the spread."""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time

SEED = ["spec", "--target", "qwen2.5-7b", "--target-quant", "fp16", "--draft", "qwen2.5-0.5b",
        "--draft-quant", "int4", "--gpu", "a100", "--context-length", "4096",
        "--acceptance-rate", "0.72", "--draft-k", "4"]  # fmt: skip


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    exe = shutil.which("infersize")
    if exe is None:
        sys.exit("infersize is not on PATH: install the project first")
    subprocess.run([exe, *SEED], capture_output=True, check=True)  # warm the page cache, .pyc
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([exe, *SEED], capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    times.sort()
    print(
        f"infersize spec (seed example), {runs} runs: median {statistics.median(times):.3f} s, "
        f"min {times[0]:.3f} s, max {times[-1]:.3f} s"
    )


if __name__ == "__main__":
    main()
