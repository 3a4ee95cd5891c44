"""Which part of a sweep's work two cores slow down: each phase of a chunk timed in one process
alone, then in two processes at once, on the same chunks (the ~100 M-cell variant of
sweeps/fleet.yaml that sweep_bench.py builds, chunks 10-17: 2 M cells each).

  score    the core's evaluate() over the chunk and the tables' reductions (numpy)
  chunk    the same, plus writing the chunk's parts (Arrow IPC, uncompressed, as a loky worker
           writes them): a worker's whole job
  merge    appending those parts to frontier and best_pairs (Parquet and CSV): the main
           process's job (polars formats the CSV on its thread pool)

Each phase runs once to warm up, then ROUNDS times; the figures are medians over rounds of the
wall seconds for the 8 chunks, alone and (the slower of) the pair, and of the cores the phase
keeps busy alone (CPU seconds of all its threads over wall seconds). A phase that two cores
slow down shares something (a cache, memory bandwidth, or an idle core it otherwise uses).

Usage: python benchmarks/two_cores.py [ROUNDS]   (default 3)
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PHASES = ("score", "chunk", "merge")
CHUNKS = slice(10, 18)


def phase_seconds(phase: str, big: Path, scratch: Path) -> tuple[float, float]:
    """Wall and CPU seconds (all this process's threads) for `phase` over the chunks, after one
    warm-up pass."""
    import pyarrow as pa

    from infersize.sweep.chunks import Where, chunk_tasks, part_name, read_part, run_chunk
    from infersize.sweep.config import load_sweep
    from infersize.sweep.merge import _StreamedTable  # what the merge appends each part with
    from infersize.sweep.plan import build_plan
    from infersize.sweep.score import score
    from infersize.sweep.store import generations
    from infersize.sweep.tables import OUTPUT_TABLES

    pa.set_cpu_count(1)  # as in a worker
    plan = build_plan(*load_sweep(big))
    tasks = chunk_tasks(plan, 3, False)[CHUNKS]
    scratch.mkdir(parents=True, exist_ok=True)  # an output folder, as `sweep run` makes it
    run = generations.start(scratch, generations.new_run_id())  # a run's folders, as a run has
    for sub in (*OUTPUT_TABLES, "done"):
        (run.parts / sub).mkdir()
    where = Where(str(scratch), run.run_id, os.getppid())  # a worker's: its main process alive

    def score_all() -> None:
        for task in tasks:
            scored = score(task)
            for table in OUTPUT_TABLES.values():
                table.build(task, scored)

    def chunk_all() -> None:
        for task in tasks:
            run_chunk(task, where)

    def merge_all() -> None:
        for name in ("frontier", "best_pairs"):
            with run.open("gen") as gen, run.open("tmp") as tmp, run.open("parts", name) as parts:
                stream = _StreamedTable(OUTPUT_TABLES[name])
                stream.open(tmp, ["parquet", "csv"])
                for task in tasks:
                    stream.append(read_part(parts, part_name(task.index), mapped=True))
                stream.close(True, gen, tmp)

    chunk_all()  # the parts merge_all reads
    work = {"score": score_all, "chunk": chunk_all, "merge": merge_all}[phase]
    work()
    start, cpu = time.perf_counter(), time.process_time()
    work()
    return time.perf_counter() - start, time.process_time() - cpu


def in_processes(phase: str, big: Path, n: int) -> tuple[float, float]:
    """Wall and CPU seconds of the slowest of `n` processes running `phase` at once (each in
    its own scratch folder)."""
    with tempfile.TemporaryDirectory() as tmp:
        argv = [sys.executable, __file__, "--phase", phase, str(big)]
        procs = [
            subprocess.Popen([*argv, str(Path(tmp, str(i)))], stdout=subprocess.PIPE, text=True)
            for i in range(n)
        ]
        outputs = [proc.communicate()[0] for proc in procs]
        if any(proc.returncode != 0 for proc in procs):
            raise SystemExit(f"the {phase} phase failed")
        wall, cpu = max(tuple(float(x) for x in out.split()) for out in outputs)
        return wall, cpu


def main() -> None:
    if sys.argv[1:2] == ["--phase"]:  # one process's part of a measurement
        print(*phase_seconds(sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])))
        return
    sys.path.insert(0, str(Path(__file__).parent))
    from sweep_bench import bigger

    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f} at start")
    with tempfile.TemporaryDirectory() as tmp:
        big = bigger(Path("sweeps/fleet.yaml"), Path(tmp))
        for phase in PHASES:
            alone, pair, cores = [], [], []
            for _ in range(rounds):
                wall, cpu = in_processes(phase, big, 1)
                alone.append(wall)
                cores.append(cpu / wall)
                pair.append(in_processes(phase, big, 2)[0])
            a, p = statistics.median(alone), statistics.median(pair)
            print(
                f"{phase}: alone {a:.2f} s on {statistics.median(cores):.2f} cores, two at "
                f"once {p:.2f} s ({p / a - 1:+.0%}; rounds alone "
                f"{', '.join(f'{x:.2f}' for x in alone)}, "
                f"two {', '.join(f'{x:.2f}' for x in pair)})"
            )
    print(f"load at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
