"""`infersize bench`: the sweep end to end against a plain-Python per-cell loop over the same
core functions, on one generated grid, in one process.

Engine: what `infersize sweep run --jobs 1` does for the grid: plan it, score every chunk, reduce
to the frontier and best-pair rows, merge and write the tables (Parquet and CSV) into a new
folder; the median of REPEAT runs. Loop: the core's memory and speedup functions called once
per cell with Python scalars (no arrays across cells), for at least a second and at least
LOOP_CELLS cells; no reduction or writing, so it is the loop's best case. Ratio: the engine's
cells per second over the loop's."""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from infersize.catalog.store import load_catalog
from infersize.core.deployment import deployment_numbers, prepare_side
from infersize.core.engines import configure_engine
from infersize.core.fit import deployment_memory
from infersize.core.speed import deployment_speed
from infersize.core.speedup import get_speedup_model
from infersize.record import record
from infersize.service.context import max_context_tokens
from infersize.service.resolve import ssm_state_dtype
from infersize.sweep.plan import Plan, make_chunks
from infersize.sweep.settings import Scoring, Setting

PAIRS = [
    ("qwen2.5-7b", "qwen2.5-0.5b"),
    ("qwen2.5-32b", "qwen2.5-1.5b"),
    ("llama-3.1-8b", "llama-3.2-1b"),
    ("llama-3.1-70b", "llama-3.2-1b"),
]


@record(kw_only=False)
class BenchResult:
    engine_cells: int
    engine_s: float
    loop_cells: int
    loop_s: float

    @property
    def engine_rate(self) -> float:
        return self.engine_cells / self.engine_s

    @property
    def loop_rate(self) -> float:
        return self.loop_cells / self.loop_s

    @property
    def ratio(self) -> float:
        return self.engine_rate / self.loop_rate


def _tp(target: str) -> int:
    return 2 if "70b" in target or "32b" in target else 1


def bench_plan(n_alphas: int = 41) -> Plan:
    alphas = tuple(np.round(np.linspace(0.5, 0.9, n_alphas), 6).tolist())
    catalog = load_catalog()
    settings = tuple(
        Setting(
            gpu=gpu,
            tp=_tp(t),
            target=t,
            target_quant=tq,
            kv_dtype="fp16",
            draft=d,
            draft_quant=dq,
            price_usd_per_hour=None,
            target_max_context_tokens=catalog.model(t).max_position_embeddings,
            draft_max_context_tokens=max_context_tokens(catalog.model(d)),
            alphas=alphas,
            alpha_source="sweep",
        )
        for gpu in ("a100-80gb-sxm", "h100-sxm")
        for t, d in PAIRS
        for tq in ("bf16", "fp8")
        for dq in ("bf16", "int4")
    )
    plan = Plan(
        name="bench",
        settings=settings,
        contexts=(1024, 2048, 4096, 8192, 16384, 32768),
        batches=(1, 8, 32, 128),
        scenarios=n_alphas,
        ks=tuple(range(1, 11)),
        scoring=Scoring(),
    )
    return replace(plan, chunks=make_chunks(plan, 1_000_000))


def run_engine(plan: Plan) -> float:
    """Seconds for one end-to-end run of `plan` into a new folder (jobs 1, in this process)."""
    from infersize.sweep.run import RunOptions, run_sweep

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        run_sweep(plan, Path(tmp) / "bench", RunOptions(jobs=1))
        return time.perf_counter() - start


def run_loop(plan: Plan, min_cells: int, min_s: float = 1.0) -> tuple[int, float]:
    """One call of the core functions per cell (setting, context, batch, α, K), over the grid
    again and again until both `min_cells` cells and `min_s` seconds are done."""
    catalog, engine = load_catalog(), configure_engine(plan.scoring.engine)
    model = get_speedup_model(plan.scoring.speedup_model)
    done, start = 0, time.perf_counter()
    for s in plan.settings:
        gpu, kv = catalog.gpu(s.gpu), catalog.kv_dtype(s.kv_dtype)
        target_model, draft_model = catalog.model(s.target), catalog.model(s.draft)
        target = prepare_side(
            target_model,
            catalog.weight_format(s.target_quant),
            kv,
            gpu,
            s.tp,
            ssm_dtype=ssm_state_dtype(engine, catalog, target_model),
        )
        draft = prepare_side(
            draft_model,
            catalog.weight_format(s.draft_quant),
            kv,
            gpu,
            1,
            ssm_dtype=ssm_state_dtype(engine, catalog, draft_model),
        )
        dep = deployment_numbers(target, draft, gpu, engine=engine)
        for c in plan.contexts:
            for b in plan.batches:
                for a in plan.alphas:
                    for k in plan.ks:
                        memory = deployment_memory(dep, engine, c, b, k)
                        speed = deployment_speed(
                            target.numbers, draft.numbers, engine, model, c, b, a, k
                        )
                        _ = (memory.fits, speed.speedup)
                        done += 1
                        if done >= min_cells and time.perf_counter() - start >= min_s:
                            return done, time.perf_counter() - start
    return done, time.perf_counter() - start


def run_bench(loop_cells: int = 3000, repeat: int = 3) -> BenchResult:
    plan = bench_plan()
    run_engine(bench_plan(n_alphas=2))  # warm-up: imports, catalog
    engine_s = statistics.median(run_engine(plan) for _ in range(repeat))
    loops = [run_loop(plan, loop_cells) for _ in range(repeat)]
    loop_done, loop_s = max(loops, key=lambda run: run[0] / run[1])  # the loop's best
    return BenchResult(plan.total_cells, engine_s, loop_done, loop_s)
