"""Scoring one chunk: the same core as `spec`, broadcast over settings × context × batch × α × K,
reduced to its frontier and best-pair rows before it returns (bounded memory)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from infersize.catalog import load_catalog
from infersize.deployment import Side, crossover_batch, stack
from infersize.engines import get_engine
from infersize.memory import GIB
from infersize.optimize import best_k
from infersize.sources import resolve_side
from infersize.speculative import expected_tokens
from infersize.sweep.plan import Scoring, Setting


@dataclass(frozen=True)
class ChunkTask:
    """What a worker needs: picklable, small (the chunk's settings only)."""

    index: int
    settings: tuple[Setting, ...]
    contexts: tuple[int, ...]
    batches: tuple[int, ...]
    alphas: tuple[float, ...]
    ks: tuple[int, ...]
    scoring: Scoring
    best_top_n: int
    with_cells: bool


@dataclass
class Scored:
    """Row-wise results of a chunk: per (setting, context, batch, α) at the best K."""

    columns: dict[str, NDArray]  # numeric columns, one value per row
    setting: NDArray[np.int64]  # row → index into task.settings
    valid: NDArray[np.bool_]  # the α applies to the setting's pair and some K fits
    scenario: NDArray[np.int64]  # position of the row's α in its pair's own α list
    cells: dict[str, NDArray] | None  # per (setting, context, batch, α, K), when asked


def _sides(task: ChunkTask) -> tuple[list[Side], list[Side], list[float], list[float]]:
    catalog = load_catalog(tuple(task.scoring.catalog_files))
    cache: dict[tuple, Side] = {}

    def side(model: str, quant: str, kv: str, gpu: str, tp: int) -> Side:
        key = (model, quant, kv, gpu, tp)
        if key not in cache:
            cache[key] = resolve_side(
                model, quant, catalog, catalog.kv_dtype(kv), catalog.gpu(gpu), tp
            )[0]
        return cache[key]

    targets, drafts, memory, prices = [], [], [], []
    for s in task.settings:
        targets.append(side(s.target, s.target_quant, s.kv_dtype, s.gpu, s.tp))
        drafts.append(side(s.draft, s.draft_quant, s.kv_dtype, s.gpu, 1))
        gpu = catalog.gpu(s.gpu)
        memory.append(gpu.memory_bytes)
        price = s.price_usd_per_hour if s.price_usd_per_hour is not None else gpu.price_usd_per_hour
        prices.append(np.nan if price is None else price)
    return targets, drafts, memory, prices


def score(task: ChunkTask) -> Scored:
    targets, drafts, memory, prices = _sides(task)
    how = task.scoring
    engine = get_engine(how.engine, how.gpu_memory_utilization, how.overhead_gib)
    n_s = len(task.settings)
    t_num = stack([t.numbers for t in targets], ndim=5)  # (S, 1, 1, 1, 1): K axis comes last
    d_num = stack([d.numbers for d in drafts], ndim=5)
    memory_bytes = np.asarray(memory, dtype=np.float64).reshape(n_s, 1, 1, 1)
    context = np.asarray(task.contexts, dtype=np.float64).reshape(1, -1, 1, 1)
    batch = np.asarray(task.batches, dtype=np.float64).reshape(1, 1, -1, 1)
    alpha = np.asarray(task.alphas, dtype=np.float64).reshape(1, 1, 1, -1)
    budget_bytes = memory_bytes * (1.0 - how.memory_headroom)
    choice = best_k(
        t_num,
        d_num,
        budget_bytes[..., None],
        engine,
        context,
        batch,
        alpha,
        np.asarray(task.ks),
        how.speedup_model,
    )
    shape = choice.k.shape  # (S, C, B, A)
    idx = choice.index[..., None]

    def at_k(values: NDArray) -> NDArray:
        full = np.broadcast_to(values, (*shape, len(task.ks)))
        return np.take_along_axis(full, idx, axis=-1)[..., 0]

    mem = choice.memory
    t_weights = np.asarray([t.weights.total for t in targets], float).reshape(n_s, 1, 1, 1)
    d_weights = np.asarray([d.weights.total for d in drafts], float).reshape(n_s, 1, 1, 1)
    combined = at_k(mem.combined)
    k = choice.k.astype(np.float64)
    speedup = choice.speedup
    t_target = np.broadcast_to(choice.speed.t_target_s[..., 0], shape)
    tp = np.asarray([s.tp for s in task.settings], float).reshape(n_s, 1, 1, 1)
    baseline_tps = batch / t_target
    tokens_per_s = baseline_tps * speedup
    price = np.asarray(prices, dtype=np.float64).reshape(n_s, 1, 1, 1)
    columns = {
        "optimal_k": choice.k,
        "speedup": speedup,
        "expected_tokens_per_step": expected_tokens(alpha, k),
        "latency_ratio": np.broadcast_to(choice.speed.latency_ratio[..., 0], shape),
        "target_gib": (t_weights + at_k(mem.target_kv) + at_k(mem.target_workspace)) / GIB,
        "draft_gib": (d_weights + at_k(mem.draft_kv) + at_k(mem.draft_workspace)) / GIB,
        "overhead_gib": np.broadcast_to(mem.overhead[..., 0] / GIB, shape),
        "combined_gib": combined / GIB,
        "gpu_memory_gib": np.broadcast_to(memory_bytes / GIB, shape),
        "utilization": combined / memory_bytes,
        "share_of_budget": combined / at_k(mem.budget),
        "baseline_tokens_per_s": baseline_tps,
        "tokens_per_s": tokens_per_s,
        "tokens_per_s_per_gpu": tokens_per_s / tp,
        "ms_per_token": t_target * 1e3 / speedup,
        "usd_per_mtok": price * tp / 3600.0 / tokens_per_s * 1e6,
        # smallest batch at which speculation at this α and K stops paying (roofline)
        "crossover_batch_size": crossover_batch(t_num, d_num, engine, context, alpha, k),
    }
    # vLLM-style engines: the KV pool per GPU left after weights and activations, and how many
    # sequences of this context it holds at once (null for the plain engine)
    pooled = mem.kv_pool is not None
    columns["kv_pool_gib"] = at_k(mem.kv_pool) / GIB if pooled else np.full(shape, np.nan)
    columns["max_concurrent_sequences"] = (
        at_k(mem.max_concurrent_sequences) if pooled else np.full(shape, np.nan)
    )
    scenario = acceptance_scenarios(task)
    applies = scenario >= 0
    valid = applies & choice.fits
    rows = {name: np.broadcast_to(v, shape).ravel() for name, v in columns.items()}
    cells = _cells(task, choice, applies, shape) if task.with_cells else None
    setting = np.broadcast_to(np.arange(n_s).reshape(n_s, 1, 1, 1), shape).ravel()
    scenario = np.broadcast_to(scenario, shape).ravel()
    return Scored(rows, setting, valid.ravel(), scenario, cells)


def acceptance_scenarios(task: ChunkTask) -> NDArray[np.int64]:
    """(S, 1, 1, A): for each setting, the position of each swept α in that pair's own α list
    (-1 where it does not apply). Pairs with their own acceptance rates (a better draft accepts
    more) are compared scenario by scenario: the i-th α of each pair."""
    scenario = np.tile(np.arange(len(task.alphas)), (len(task.settings), 1))
    for i, s in enumerate(task.settings):
        if s.alphas is not None:
            own = {a: j for j, a in enumerate(s.alphas)}
            scenario[i] = [own.get(a, -1) for a in task.alphas]
    return scenario.reshape(len(task.settings), 1, 1, -1)


def _cells(task: ChunkTask, choice, applies: NDArray, shape: tuple[int, ...]) -> dict[str, NDArray]:
    """Every (setting, context, batch, α, K) cell: speedup, memory and fit at that K."""
    full = (*shape, len(task.ks))
    keep = np.broadcast_to(applies[..., None], full).ravel()
    grid = np.indices(full).reshape(len(full), -1)
    return {
        "setting": grid[0][keep],
        "context": grid[1][keep],
        "batch": grid[2][keep],
        "alpha": grid[3][keep],
        "k": np.asarray(task.ks)[grid[4][keep]],
        "speedup": np.broadcast_to(choice.speed.speedup, full).ravel()[keep],
        "combined_gib": np.broadcast_to(choice.memory.combined, full).ravel()[keep] / GIB,
        "fits": np.broadcast_to(choice.memory.fits, full).ravel()[keep],
    }
