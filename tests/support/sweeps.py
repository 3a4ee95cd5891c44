"""Sweep files and output folders the tests share."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from infersize.sweep.config import load_sweep
from infersize.sweep.plan import build_plan

# Two targets of different size with n-gram lookup on two GPU types: at 40 requests/s on the
# L40S the 3B serves with speculation on one GPU and the 8B needs two, so an answer that took
# the fewest GPUs over both targets would give the 3B's number for the 8B. The workload and SLA
# are the README's names (tests/test_figures_overlap.py draws its fleet figure from this sweep).
TWO_TARGETS = """\
name: two-targets
pairs:
  - {target: llama-3.1-8b, draft: ngram, acceptance_rates: [0.6]}
  - {target: llama-3.2-3b, draft: ngram, acceptance_rates: [0.6]}
methods: [ngram]
target_quants: [fp8]
draft_quants: [fp16]
gpus:
  - {name: h100, tp: [1]}
  - {name: l40s, tp: [1]}
context_lengths: [4096]
batch_sizes: [1]
draft_k: {start: 1, stop: 3, step: 1}
engine: vllm
workloads:
  - {name: chat, input_tokens: 512, output_tokens: 128}
slas:
  interactive: "ttft:p99<=1000ms;tpot:p99<=40ms"
target_request_rates: [5, 40]
capacity: {requests: 200, simulate_top: 1}
"""


# Two GPU types, a separate draft and n-gram lookup, one workload, two SLAs, two fleet rates.
# The draft's lowest α (0.1) is one where speculation cannot pay: its rows answer K = 0.
SWEEP = """\
name: fleet-test
targets: [llama-3.1-8b]
drafts: [llama-3.2-1b]
methods: [draft, ngram]
pairs:
  - {target: llama-3.1-8b, draft: llama-3.2-1b, acceptance_rates: [0.1, 0.6, 0.8]}
  - {target: llama-3.1-8b, draft: ngram, acceptance_rates: [0.3, 0.5, 0.6]}
target_quants: [fp8]
draft_quants: [bf16]
gpus:
  - {name: h100, tp: [1]}
  - {name: l40s, tp: [1]}
context_lengths: [4096]
batch_sizes: [1]
draft_k: {start: 1, stop: 4, step: 1}
engine: vllm
workloads:
  - {name: chat, input_tokens: 512, output_tokens: 128}
slas:
  interactive: "ttft:p99<=1000ms;tpot:p99<=40ms"
  relaxed: "ttft:p99<=5s;tpot:p99<=100ms"
target_request_rates: [5, 40]
capacity: {requests: 300, simulate_top: 1}
"""


# A small decode sweep (two targets, two GPUs, two contexts, batches and α) at any speedup
# model: the writer-safety tests run it again and again
TINY = """\
name: tiny
targets: [qwen2.5-7b, llama-3.1-8b]
drafts: [qwen2.5-0.5b, llama-3.2-1b]
gpus: [l4, h100]
context_lengths: [2048, 8192]
batch_sizes: [1, 8]
acceptance_rates: [0.6, 0.8]
draft_k: {start: 1, stop: 4, step: 1}
speedup_model: SPEEDUP
chunk_cells: 1000
"""
BIG = (  # 36 chunks of up to 1,000 cells: workers, and time to kill the run in the middle
    TINY.replace("SPEEDUP", "roofline")
    .replace("context_lengths: [2048, 8192]", "context_lengths: [1024, 2048, 4096, 8192, 16384]")
    .replace("gpus: [l4, h100]", "gpus: [l4, h100, a100-40gb, rtx-4090, l40s, a10g]")
    .replace("batch_sizes: [1, 8]", "batch_sizes: [1, 2, 4, 8, 16, 32]")
    .replace("acceptance_rates: [0.6, 0.8]", "acceptance_rates: [0.5, 0.6, 0.7, 0.8]")
    .replace("stop: 4", "stop: 16")
)

PUBLISHED = [
    "frontier.parquet",
    "frontier.csv",
    "best_pairs.parquet",
    "best_pairs.csv",
    "coverage.parquet",
    "manifest.json",
    "sweep.resolved.yaml",
]


def plan_of(tmp: Path, speedup: str = "leviathan", extra: str = ""):
    path = tmp / f"{speedup}.yaml"
    path.write_text(TINY.replace("SPEEDUP", speedup) + extra)
    config, doc = load_sweep(path)
    return build_plan(config, doc)


def best_pair_row(tmp: Path, sweep_yaml: str) -> dict:
    """The first best-pairs row of `sweep_yaml`, run at --jobs 1 into tmp/out."""
    import polars as pl

    from infersize.sweep.run import RunOptions, run_sweep

    path = tmp / "one-row.yaml"
    path.write_text(sweep_yaml)
    config, doc = load_sweep(path)
    run_sweep(build_plan(config, doc), tmp / "out", RunOptions(jobs=1))
    return pl.read_parquet(tmp / "out" / "best_pairs.parquet").row(0, named=True)


def published(out: Path) -> dict[str, bytes]:
    """The tables a reader sees through the folder's links (the manifest without timings)."""
    tables = {n: (out / n).read_bytes() for n in PUBLISHED if n != "manifest.json"}
    manifest = json.loads((out / "manifest.json").read_text())
    for key in ("started_at", "finished_at", "seconds", "cells_per_s", "chunks_resumed"):
        manifest.pop(key)
    return {**tables, "manifest": json.dumps(manifest, sort_keys=True).encode()}


def temp_files(out: Path) -> list[Path]:
    return [p for p in out.rglob("*") if ".tmp" in p.name or ".link-" in p.name]


def wait_for_chunks(out: Path, proc: subprocess.Popen, n: int) -> None:
    """Until `n` chunks of the run writing into `out` are done (it must still be running)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if len(list(out.glob(".generations/*.partial/parts/done/*.json"))) >= n:
            return
        time.sleep(0.002)
    raise AssertionError("the run ended before it could be killed")


def scored_unfinished(out: Path, plan, monkeypatch, **settings) -> None:
    """A run into `out` that scored every chunk and then failed merging (a full disk): an
    unfinished run, its parts all there, for a resume."""
    import pytest

    from infersize.sweep import run as run_module
    from infersize.sweep.run import OutputError, RunOptions, run_sweep

    def disk_full(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(run_module.TableMerge, "finish", disk_full)
        with pytest.raises(OutputError):
            run_sweep(plan, out, RunOptions(**settings))
