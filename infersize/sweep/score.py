"""Scoring one chunk: the core's one `evaluate`, broadcast over settings × context × batch × α × K,
reduced to its frontier and best-pair rows before it returns (bounded memory)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from infersize.catalog.store import Catalog, load_catalog
from infersize.core.arrays import BoolArray, FloatArray, IntArray, floats
from infersize.core.deployment import (
    DeploymentNumbers,
    Side,
    deployment_numbers,
    scheduler_limits,
    select,
    stack,
)
from infersize.core.engines import Engine, configure_engine
from infersize.core.evaluate import Evaluation, Grid, Point, evaluate
from infersize.core.limits import crossover_batch
from infersize.core.memory import GIB
from infersize.core.profile import extend_profile, iid_profile, limit_positions
from infersize.core.speedup import SpeedupModel, get_speedup_model
from infersize.core.tree import CHAIN, Tree
from infersize.record import record
from infersize.service.resolve import resolve_side
from infersize.sweep.settings import CapacityPlan, Scoring, Setting

GRID_NDIM = 4  # (setting, context, batch, α)


@record
class ChunkTask:
    """What a worker needs: picklable, small (the chunk's settings only)."""

    index: int
    settings: tuple[Setting, ...]
    contexts: tuple[int, ...]
    batches: tuple[int, ...]
    scenarios: int
    ks: tuple[int, ...]
    scoring: Scoring
    best_top_n: int
    with_cells: bool
    decode: bool = True  # scores its decode cells (else its decode tables are empty)
    # the capacity table's axes, narrowed to the workload and SLA whose rows the chunk answers
    capacity: CapacityPlan | None = None


@dataclass(kw_only=True)
class Scored:
    """Row-wise results of a chunk: per (setting, context, batch, scenario) at the best K."""

    columns: dict[str, FloatArray]  # numeric columns, one value per row
    # columns computed only for the rows that reach a table: name -> f(row indices) -> values
    lazy: dict[str, Callable[[IntArray], FloatArray]]
    setting: IntArray  # row → index into task.settings
    valid: BoolArray  # some K fits
    scenario: IntArray  # row → acceptance scenario
    cells: dict[str, FloatArray] | None  # per (setting, context, batch, scenario, K), when asked


def _numbers(task: ChunkTask, catalog: Catalog, engine: Engine) -> list[DeploymentNumbers]:
    """Each setting's deployment numbers (sides shared between settings resolved once, and
    each GPU, its scheduler limits and each KV dtype looked up once)."""
    gpus = {name: catalog.gpu(name) for name in {s.gpu for s in task.settings}}
    limits = {name: scheduler_limits(engine, gpu) for name, gpu in gpus.items()}
    kvs = {name: catalog.kv_dtype(name) for name in {s.kv_dtype for s in task.settings}}
    cache: dict[tuple[str, str, str, str, int, str | None], Side] = {}

    def side(model: str, quant: str, kv: str, gpu: str, tp: int, target: str | None) -> Side:
        """`target`: the target's architecture (which decides all-reduce fusion), or None
        where `model` is the target."""
        key = (model, quant, kv, gpu, tp, target)
        found = cache.get(key)
        if found is None:
            found = cache[key] = resolve_side(
                model,
                quant,
                catalog,
                kvs[kv],
                gpus[gpu],
                tp,
                engine.support_family,
                engine.dp_attention and tp > 1,
                engine,
                target,
            )[0]
        return found

    def numbers(s: Setting) -> DeploymentNumbers:
        target = side(s.target, s.target_quant, s.kv_dtype, s.gpu, s.tp, None)
        draft_tp = s.tp if engine.draft_shares_tp else 1
        draft = side(s.draft, s.draft_quant, s.kv_dtype, s.gpu, draft_tp, target.model.architecture)
        return deployment_numbers(
            target, draft, gpus[s.gpu], s.price_usd_per_hour, engine, limits[s.gpu]
        )

    return [numbers(s) for s in task.settings]


def _grid(task: ChunkTask) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Context (1, C, 1, 1), batch (1, 1, B, 1) and each setting's α per scenario (S, 1, 1, A)."""
    context = floats(task.contexts).reshape(1, -1, 1, 1)
    batch = floats(task.batches).reshape(1, 1, -1, 1)
    alpha = floats([s.alphas for s in task.settings]).reshape(len(task.settings), 1, 1, -1)
    return context, batch, alpha


def _rates(task: ChunkTask, alpha: FloatArray) -> FloatArray | None:
    """Per-position acceptance r_1 … r_Kmax on a last axis, (S, 1, 1, A, Kmax), when a pair of
    the chunk has a measured profile or a head's figure measured at one K: its profile
    (extended past its end), r_i = α^i up to the measured K and 0 past it (limit_positions,
    as `spec`), and r_i = α^i for the others. None when no pair has either: the i.i.d. E."""
    if all(s.profile is None and s.acceptance_positions is None for s in task.settings):
        return None
    k_max = max(task.ks)
    positions = floats([s.acceptance_positions or np.inf for s in task.settings])
    rates = limit_positions(iid_profile(alpha, k_max), positions.reshape(-1, 1, 1, 1))
    for i, setting in enumerate(task.settings):
        if setting.profile is not None:
            rates[i] = limit_positions(extend_profile(setting.profile, k_max), positions[i])
    return rates


def _columns(best: Point, dep: DeploymentNumbers) -> dict[str, FloatArray]:
    shape = best.k.shape  # (S, C, B, A)
    mem = best.memory

    def full(values: FloatArray | None) -> FloatArray:
        return np.full(shape, np.nan) if values is None else floats(np.broadcast_to(values, shape))

    target = (mem.target_weights, mem.target_kv, mem.target_workspace)
    draft = (mem.draft_weights, mem.draft_kv, mem.draft_workspace)
    return {
        "optimal_k": floats(best.k),
        "speedup": best.speed.speedup,
        "expected_tokens_per_step": full(best.speed.expected_tokens),
        "latency_ratio": full(best.speed.latency_ratio),
        "target_weights_gib": full(mem.target_weights / GIB),
        "target_kv_gib": full(mem.target_kv / GIB),
        "target_workspace_gib": full(mem.target_workspace / GIB),
        "target_gib": full((target[0] + target[1] + target[2]) / GIB),
        "draft_weights_gib": full(mem.draft_weights / GIB),
        "draft_kv_gib": full(mem.draft_kv / GIB),
        "draft_workspace_gib": full(mem.draft_workspace / GIB),
        "draft_gib": full((draft[0] + draft[1] + draft[2]) / GIB),
        "overhead_gib": full(mem.overhead / GIB),
        "combined_gib": mem.combined / GIB,
        "gpu_memory_gib": full(mem.device / GIB),
        "utilization": mem.utilization,
        "share_of_budget": mem.share,
        "baseline_tokens_per_s": best.baseline_tokens_per_s,
        "speculative_tokens_per_s": best.speculative_tokens_per_s,
        "speculative_tokens_per_s_per_gpu": best.speculative_tokens_per_s_per_gpu,
        "baseline_ms_per_token": full(best.baseline_ms_per_token),
        "speculative_ms_per_token": best.speculative_ms_per_token,
        "price_usd_per_hour": full(floats(dep.price_usd_per_hour)),
        "usd_per_mtok": best.usd_per_mtok,
        # vLLM-style engines: the KV pool per GPU left after weights and activations, and how
        # many sequences of this context it holds at once (null for the plain engine)
        "kv_pool_gib": full(None if mem.pool is None else mem.pool.kv_pool / GIB),
        "kv_pool_tokens": full(None if mem.pool is None else mem.pool.kv_pool_tokens),
        "max_concurrent_sequences": full(
            None if mem.pool is None else mem.pool.max_concurrent_sequences
        ),
    }


def _tree(how: Scoring) -> Tree:
    """The sweep's draft shape: chains, or trees of the width and verified tokens it names."""
    return CHAIN if how.eagle_topk == 1 else Tree(how.eagle_topk, how.num_draft_tokens)


class _Crossover:
    """The crossover batch of a chunk's rows: the smallest batch at which speculation at the
    row's α (or profile) and K stops paying, by the sweep's speedup model. A ladder of step
    times per row, so only for rows that reach a table, and once per (setting, context,
    scenario, K) however many rows have it (the batch is the ladder's: rows that differ only
    in batch and have the same best K share it) and however many tables ask."""

    def __init__(
        self,
        *,
        task: ChunkTask,
        dep: DeploymentNumbers,
        engine: Engine,
        model: SpeedupModel,
        shape: tuple[int, ...],
        rates: FloatArray | None,
        k: FloatArray,
        tree: Tree,
    ) -> None:
        self.task, self.dep, self.engine, self.model = task, dep, engine, model
        self.shape, self.rates, self.k, self.tree = shape, rates, k, tree
        self.k_span = int(max(task.ks)) + 1  # K is 0 for the target alone
        keys = shape[0] * shape[1] * shape[3] * self.k_span
        self.known = np.full(keys, np.nan)
        self.asked = np.zeros(keys, dtype=np.bool_)

    def __call__(self, picked: IntArray) -> FloatArray:
        s, c, _, a = np.unravel_index(picked, self.shape)
        key: IntArray = ((s * self.shape[1] + c) * self.shape[3] + a) * self.k_span
        key += self.k[picked].astype(np.int64)
        fresh = ~self.asked[key]
        new, first = np.unique(key[fresh], return_index=True)
        if new.size:  # a chunk whose rows are all beyond context or never fit asks for none
            self.known[new], self.asked[new] = self._batches(picked[fresh][first]), True
        return self.known[key]

    def _batches(self, rows: IntArray) -> FloatArray:
        s, c, _, a = np.unravel_index(rows, self.shape)
        context, _, alpha = _grid(self.task)
        return crossover_batch(
            select(self.dep, s),
            self.engine,
            self.model,
            context.ravel()[c],
            alpha[s, 0, 0, a],
            self.k[rows],
            rates=None if self.rates is None else self.rates[s, 0, 0, a],
            tree=self.tree,
        )


def score(task: ChunkTask) -> Scored:
    how = task.scoring
    catalog = load_catalog(tuple(task.scoring.catalog_files))
    engine = configure_engine(how.engine)
    dep = stack(_numbers(task, catalog, engine), ndim=GRID_NDIM)  # fields (S, 1, 1, 1)
    context, batch, alpha = _grid(task)
    rates = _rates(task, alpha)
    grid = Grid(
        context=context,
        batch=batch,
        alpha=alpha,
        ks=np.asarray(task.ks),
        headroom=how.memory_headroom,
        rates=rates,
        tree=_tree(how),
    )
    model = get_speedup_model(how.speedup_model)
    ev = evaluate(dep, engine, model, grid)
    best = ev.optimal
    shape = best.k.shape  # (S, C, B, A)
    columns = _columns(best, dep)
    rows = {name: floats(np.broadcast_to(v, shape)).ravel() for name, v in columns.items()}
    cells = _cells(task, ev, shape) if task.with_cells else None
    index = np.indices(shape)
    k = floats(best.k).ravel()

    crossover = _Crossover(
        task=task,
        dep=dep,
        engine=engine,
        model=model,
        shape=shape,
        rates=rates,
        k=k,
        tree=grid.tree,
    )
    lazy: dict[str, Callable[[IntArray], FloatArray]] = {"crossover_batch_size": crossover}
    return Scored(
        columns=rows,
        lazy=lazy,
        setting=index[0].ravel(),
        valid=ev.fits_any.ravel(),
        scenario=index[3].ravel(),
        cells=cells,
    )


def _cells(task: ChunkTask, ev: Evaluation, shape: tuple[int, ...]) -> dict[str, FloatArray]:
    """Every (setting, context, batch, scenario, K) cell: speedup, memory and fit at that K."""
    full = (*shape, len(task.ks))
    grid = np.indices(full).reshape(len(full), -1)
    return {
        "setting": grid[0],
        "context": grid[1],
        "batch": grid[2],
        "scenario": grid[3],
        "k": np.asarray(task.ks)[grid[4]],
        "speedup": np.broadcast_to(ev.speed.speedup, full).ravel(),
        "combined_gib": np.broadcast_to(ev.memory.combined, full).ravel() / GIB,
        "fits": np.broadcast_to(ev.memory.fits, full).ravel(),
    }
