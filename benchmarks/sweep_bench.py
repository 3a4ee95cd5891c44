"""The sweep's speed against its floor, measured in one run.

For a sweep file (default sweeps/fleet.yaml) and a ~100 M-cell variant of it (12 contexts, 12
batch sizes, K up to 16), each run end to end as a user runs it (the installed command, a new
process, tables written), REPEAT rounds of one run at --jobs 1 and one at --jobs 2 (in
alternating order, so the machine's load falls on both alike): the median wall time and the
peak resident memory of the whole process tree (the CLI and its workers, sampled from /proc
every 50 ms), with the scoring seconds the manifests record; the same sweep once more through
Dask (a LocalCluster of 2) when Dask is installed. For the big variant each round also runs
two independent --jobs 1 runs at once: what two cores of this machine give at most (they
share memory bandwidth, the page cache and, on a VM, the host; benchmarks/two_cores.py shows
which work slows), the ceiling --jobs 2 is held to: a round's share of it is the two runs' wall
over twice that round's --jobs 2 wall (two runs' throughput against one's), the median of rounds
the figure.
Medians are the figures; the fastest round of each kind is printed too, as the least
disturbed by the machine's other load (a shared VM's disk stalls a run for seconds at times).
Then the floor of the same sweep, each part timed here as a median:
  import   a Python process importing what a run needs (numpy, polars, pyarrow, infersize)
  numpy    every cell's memory, speedup and best K: the core's evaluate() over all settings at
           once, in this process
  write    polars writing the run's final tables (Parquet and CSV) from memory
and `infersize report` on the finished run. Prints one line per figure; README figures quote it.
Every process runs as an installed program does: with the package's bytecode cache (pip
compiles it at install; an editable install writes it on first import), compiled before the
first run, whatever PYTHONDONTWRITEBYTECODE says in this shell (where set, every process of
every run, a --jobs 2 run's worker too, would compile the package again).

Usage: python benchmarks/sweep_bench.py [SWEEP] [--repeat 3] [--skip-big | --only-big]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

PAGE = os.sysconf("SC_PAGE_SIZE")


def tree_rss_bytes(root: int) -> int:
    """Sum of RSS over `root` and all its descendants, found through /proc/PID/task/*/children
    (only this tree is read: a scan costs a tenth of a millisecond, not a share of a core)."""
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
            for task in os.scandir(f"/proc/{pid}/task"):
                todo += [int(c) for c in Path(task.path, "children").read_text().split()]
        except (OSError, ValueError):  # it ended between two reads
            continue
    return total


def timed_process(argv: list[str]) -> tuple[float, int]:
    """Wall seconds and peak tree RSS of one command."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_rss_bytes(proc.pid))
        time.sleep(0.05)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed with exit code {proc.returncode}")
    return wall, peak


def sweep_argv(sweep: Path, out: Path, jobs: int, *extra: str) -> list[str]:
    """The installed command running `sweep` into `out`, quietly, whatever its size."""
    exe = shutil.which("infersize") or "infersize"
    return [
        exe,
        "sweep",
        "run",
        str(sweep),
        "--out",
        str(out),
        "--jobs",
        str(jobs),
        "-q",
        "--max-cells",
        "2000000000",
        *extra,
    ]


def run_once(sweep: Path, out: Path, jobs: int, *extra: str) -> tuple[float, int, float]:
    """Wall seconds, peak tree RSS and the scoring seconds the run's manifest records (chunks
    scored and appended to the tables, without start-up). Dirty pages of earlier runs are
    flushed first, so no run pays for another's writeback."""
    os.sync()
    wall, peak = timed_process(sweep_argv(sweep, out, jobs, *extra))
    return wall, peak, json.loads((out / "manifest.json").read_text())["seconds"]["scoring"]


def two_at_once(sweep: Path, tmp: Path) -> float:
    """Wall seconds of two independent --jobs 1 runs started together: all two cores can give
    (no coordination, nothing shared but the machine), the ceiling for --jobs 2."""
    os.sync()
    outs = [tmp / f"{sweep.stem}-pair-{n}" for n in (0, 1)]
    start = time.perf_counter()
    procs = [subprocess.Popen(sweep_argv(sweep, out, 1), stdout=subprocess.DEVNULL) for out in outs]
    if any(proc.wait() != 0 for proc in procs):
        raise SystemExit(f"two runs of {sweep} at once failed")
    wall = time.perf_counter() - start
    for out in outs:
        shutil.rmtree(out)
    return wall


def paired_runs(
    sweep: Path, tmp: Path, repeat: int, ceiling: list[float] | None = None
) -> tuple[dict[int, list[Any]], list[float]]:
    """`repeat` rounds of one --jobs 1 and one --jobs 2 run, in alternating order, so a change
    in the machine's load falls on both alike; each round's ratio is one sample. With
    `ceiling`, each round also times two --jobs 1 runs at once and appends their wall time
    (two cores' throughput over one's is 2 x the --jobs 1 wall / that wall)."""
    runs: dict[int, list[Any]] = {1: [], 2: []}
    ratios = []
    for i in range(repeat):
        walls = {}
        for jobs in (1, 2) if i % 2 == 0 else (2, 1):
            out = tmp / f"{sweep.stem}-j{jobs}-{i}"
            wall, peak, scoring = run_once(sweep, out, jobs)
            if runs[jobs]:  # only the newest folder of each is kept: no writeback piles up
                shutil.rmtree(runs[jobs][-1][3])
            runs[jobs].append((wall, peak, scoring, out))
            walls[jobs] = wall
        ratios.append(walls[1] / walls[2])
        if ceiling is not None:
            ceiling.append(two_at_once(sweep, tmp))
    return runs, ratios


def summary(runs: list[Any]) -> tuple[float, int, float, Path]:
    """Median wall, peak RSS, median scoring seconds and the last output folder."""
    walls, peaks, scoring, outs = zip(*runs, strict=True)
    return statistics.median(walls), max(peaks), statistics.median(scoring), outs[-1]


def median_of(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def floor(sweep: Path, done: Path, tmp: Path, repeat: int) -> dict[str, float]:
    """The three parts of the floor, each a median over `repeat` runs."""
    import numpy as np
    import polars as pl

    from infersize.catalog.store import load_catalog
    from infersize.core.deployment import stack
    from infersize.core.engines import configure_engine
    from infersize.core.evaluate import Grid, evaluate
    from infersize.core.speedup import get_speedup_model
    from infersize.sweep.chunks import chunk_tasks
    from infersize.sweep.config import load_sweep
    from infersize.sweep.plan import build_plan
    from infersize.sweep.score import GRID_NDIM, _grid, _numbers

    imports = "import numpy, polars, pyarrow, infersize.sweep.run, infersize.cli"
    t_import = median_of(lambda: subprocess.run([sys.executable, "-c", imports], check=True), 3)
    config, doc = load_sweep(sweep)
    plan = build_plan(config, doc)
    engine = configure_engine(plan.scoring.engine)
    model = get_speedup_model(plan.scoring.speedup_model)
    catalog = load_catalog()
    chunks = []
    for task in chunk_tasks(plan, 3, False):  # the run's own chunks: memory stays bounded
        dep = stack(_numbers(task, catalog, engine), ndim=GRID_NDIM)
        context, batch, alpha = _grid(task)
        chunks.append(
            (dep, Grid(context=context, batch=batch, alpha=alpha, ks=np.asarray(plan.ks)))
        )
    t_numpy = median_of(
        lambda: [evaluate(dep, engine, model, work).optimal for dep, work in chunks], repeat
    )
    frames = {
        n: pl.read_parquet(done / f"{n}.parquet") for n in ("frontier", "best_pairs", "coverage")
    }

    def write() -> None:
        for name, frame in frames.items():
            frame.write_parquet(tmp / f"floor-{name}.parquet", compression="zstd")
            frame.write_csv(tmp / f"floor-{name}.csv")

    t_write = median_of(write, repeat)
    return {"import": t_import, "numpy": t_numpy, "write": t_write}


def bigger(sweep: Path, tmp: Path) -> Path:
    """The same fleet with 12 contexts, 12 batch sizes and K up to 16 (about 100 M cells)."""
    config = yaml.safe_load(sweep.read_text())
    config["name"] = f"{config.get('name', 'sweep')}-big"
    config["context_lengths"] = [
        512,
        1024,
        2048,
        4096,
        8192,
        12288,
        16384,
        24576,
        32768,
        65536,
        98304,
        131072,
    ]
    config["batch_sizes"] = [1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128]
    config["draft_k"] = {"start": 1, "stop": 16, "step": 1}
    path = tmp / "big.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def fleet_figures(sweep: Path, tmp: Path, repeat: int) -> None:
    """The sweep at --jobs 1 and 2, through Dask, its floor and `infersize report` on it."""
    fleet, _ = paired_runs(sweep, tmp, repeat)
    runs = {}
    for jobs in (1, 2):
        wall, peak, scoring, done = summary(fleet[jobs])
        runs[jobs] = wall
        print(
            f"{sweep.name} --jobs {jobs}: median {wall:.2f} s (scoring and writing "
            f"{scoring:.2f} s), peak tree RSS {peak / 2**30:.2f} GiB"
        )
    if importlib.util.find_spec("distributed") is not None:
        dask = []
        for _ in range(repeat):
            dask.append(run_once(sweep, tmp / "dask", 1, "--backend", "dask"))
            shutil.rmtree(tmp / "dask")
        print(
            f"{sweep.name} --backend dask (a LocalCluster of 2 started for the run): "
            f"median {statistics.median(d[0] for d in dask):.2f} s"
        )
    parts = floor(sweep, done, tmp, repeat)
    total = sum(parts.values())
    print(
        "floor: "
        + ", ".join(f"{k} {v:.2f} s" for k, v in parts.items())
        + f" = {total:.2f} s; the sweep is {min(runs.values()) / total:.2f}x its floor"
    )
    report = median_of(
        lambda: subprocess.run(
            ["infersize", "report", str(done), "--out", str(tmp / "r.html")],
            check=True,
            stdout=subprocess.DEVNULL,
        ),
        repeat,
    )
    print(f"infersize report on it: median {report:.2f} s")


def big_figures(sweep: Path, tmp: Path, repeat: int) -> None:
    """The ~100 M-cell variant at --jobs 1 and 2, each round with two --jobs 1 runs at once."""
    big = bigger(sweep, tmp)
    ceiling: list[float] = []
    runs, ratios = paired_runs(big, tmp, repeat, ceiling)
    for jobs in (1, 2):
        wall, peak, scoring, out = summary(runs[jobs])
        cells = json.loads((out / "manifest.json").read_text())["cells"]
        walls = ", ".join(f"{run[0]:.2f}" for run in runs[jobs])
        print(
            f"{cells:,} cells --jobs {jobs}: median {wall:.2f} s (scoring and writing "
            f"{scoring:.2f} s; rounds {walls}), "
            f"peak tree RSS {peak / 2**30:.2f} GiB"
        )
    shown = ", ".join(f"{r:.2f}" for r in ratios)
    print(
        f"--jobs 2 over --jobs 1 at {cells:,} cells: {statistics.median(ratios):.2f}x "
        f"faster (median of {len(ratios)} rounds run back to back: {shown})"
    )
    two_cores = [2 * run[0] / pair for run, pair in zip(runs[1], ceiling, strict=True)]
    shown = ", ".join(f"{r:.2f}" for r in two_cores)
    # each round's share: --jobs 2's throughput (one run in its wall) over two runs at once
    # (two runs in theirs), pair / (2 x jobs-2 wall); the --jobs 1 run cancels out, and with
    # it the noise of a third timing
    shares = [pair / (2 * run[0]) for run, pair in zip(runs[2], ceiling, strict=True)]
    print(
        f"two --jobs 1 runs at once, the most two cores of this machine give: "
        f"{statistics.median(two_cores):.2f}x the throughput of one (rounds: {shown}); "
        f"--jobs 2 reaches {statistics.median(shares):.0%} of it (each round's two at once "
        f"over twice its --jobs 2 wall: {', '.join(f'{r:.0%}' for r in shares)})"
    )
    fastest = {jobs: min(run[0] for run in runs[jobs]) for jobs in (1, 2)}
    print(
        f"the fastest round of each, the least disturbed by the machine's other load: "
        f"--jobs 1 {fastest[1]:.2f} s, --jobs 2 {fastest[2]:.2f} s, "
        f"{fastest[1] / fastest[2]:.2f}x; two --jobs 1 at once {min(ceiling):.2f} s, "
        f"{2 * fastest[1] / min(ceiling):.2f}x"
    )


def installed_bytecode() -> None:
    """The package's bytecode cache written now, and read and kept by every process started
    from here on (spec_startup.py runs the same way)."""
    import compileall

    import infersize

    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    compileall.compile_dir(Path(infersize.__file__).parent, quiet=1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("sweep", type=Path, nargs="?", default=Path("sweeps/fleet.yaml"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-big", action="store_true", help="only the sweep's own figures")
    parser.add_argument("--only-big", action="store_true", help="only the ~100 M-cell figures")
    args = parser.parse_args()
    installed_bytecode()
    load = os.getloadavg()[0]
    print(f"machine: {os.cpu_count()} CPUs, load {load:.2f} at start")
    with tempfile.TemporaryDirectory() as tmp_name:
        if not args.only_big:
            fleet_figures(args.sweep, Path(tmp_name), args.repeat)
        if not args.skip_big:
            big_figures(args.sweep, Path(tmp_name), args.repeat)
    print(f"load at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
