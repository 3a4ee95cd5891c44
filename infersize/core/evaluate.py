"""The one evaluation of a deployment over arrays of settings: memory, speed, the best K that
fits, and the derived metrics (throughput, latency, cost). `infersize spec` evaluates one cell,
a sweep chunk millions, the figures a curve: all through `evaluate`.

The K axis is always the last axis. Memory rises with K (K lookahead KV slots per sequence, K+1
fp32 logit rows, K draft distributions), so the feasible Ks of a consecutive range are a prefix;
the best K is the masked argmax of the speedup over that axis (for Leviathan's model the same K
as its Lambert-W closed form, tested).
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike

from infersize.core.arrays import BoolArray, FloatArray, IntArray, floats
from infersize.core.deployment import DeploymentNumbers, with_trailing_axis
from infersize.core.engines import Engine
from infersize.core.fit import Memory, deployment_memory
from infersize.core.profile import conditional_rates, expected_tokens_profile, iid_profile
from infersize.core.speculative import bisect_increasing
from infersize.core.speed import Speed, deployment_speed, plain_speed
from infersize.core.speedup import SpeedupModel, alpha_for_speedup
from infersize.core.tree import CHAIN, Tree, tree_expected_tokens
from infersize.record import record

D = TypeVar("D")
MAX_K = 256  # far past any useful draft length; bounds every K axis searched


@record
class Grid:
    """The settings an evaluation runs over: arrays that broadcast against each other and
    against the stacked deployments; `ks` becomes a new last axis."""

    context: ArrayLike
    batch: ArrayLike
    alpha: ArrayLike
    ks: ArrayLike  # consecutive draft lengths, 1-D
    latency_ratio: ArrayLike | None = None  # γ given by the user: replaces the draft step time
    # per-position acceptance r_1 … r_max(ks) on a last axis (core/profile.py): replaces the
    # i.i.d. E(α, K); α then only prices break-even
    rates: ArrayLike | None = None
    headroom: float = 0.0  # share of the device kept free
    tree: Tree = CHAIN  # what each step drafts: a chain of K, or a tree of depth K


@record
class Point:
    """The deployment at one K per setting (no K axis): what tables and the panel report."""

    k: IntArray  # draft length (0 for the target alone)
    memory: Memory
    speed: Speed
    baseline_tokens_per_s: FloatArray  # decode throughput of the whole deployment, no draft
    speculative_tokens_per_s: FloatArray
    speculative_tokens_per_s_per_gpu: FloatArray
    baseline_ms_per_token: FloatArray  # per sequence
    speculative_ms_per_token: FloatArray
    usd_per_mtok: FloatArray  # NaN when the price is unknown


@record
class Evaluation:
    numbers: DeploymentNumbers
    model: SpeedupModel
    ks: IntArray  # the K axis
    batch: FloatArray
    memory: Memory  # over (..., K)
    speed: Speed  # over (..., K)
    best_index: IntArray  # the fitting K of highest speedup (index 0 where none fits)
    fits_k: BoolArray  # over (..., K): fits in memory (and within a head's K)
    fits_any: BoolArray  # some K of the axis fits
    tree: Tree = CHAIN

    def at(self, index: ArrayLike) -> Point:
        """The evaluation at one K position per setting."""
        shape = np.broadcast_shapes(self.memory.combined.shape, self.speed.speedup.shape)
        position = np.broadcast_to(np.asarray(index, dtype=np.int64), shape[:-1])[..., None]

        def pick(values: FloatArray) -> FloatArray:
            full = np.broadcast_to(values, shape)
            return floats(np.take_along_axis(full, position, axis=-1)[..., 0])

        memory = _map_arrays(self.memory, pick)
        speed = _map_arrays(self.speed, pick)
        k = self.ks[position[..., 0]]
        return _derive(self.numbers, pick(np.broadcast_to(self.batch, shape)), k, memory, speed)

    @property
    def optimal(self) -> Point:
        return self.at(self.best_index)

    def break_even_alpha(self) -> FloatArray:
        """α at which speculation only breaks even (S = 1), at each K of the axis; NaN where no
        α in [0, 1] reaches it. Every speedup model rises with α at fixed step times (a tree's
        E rises with α at every position)."""
        if self.tree.is_chain:
            return alpha_for_speedup(
                self.model, np.ones(self.speed.speedup.shape), self.ks, self.speed.times
            )
        cost = np.broadcast_to(self.speed.step_cost, self.speed.speedup.shape)
        columns = []
        for i, k in enumerate(self.ks):

            def tree_e(a: FloatArray, k: int = int(k)) -> FloatArray:
                return tree_expected_tokens(conditional_rates(iid_profile(a, k)), self.tree, [k])[
                    ..., 0
                ]

            columns.append(bisect_increasing(tree_e, cost[..., i]))
        return floats(np.stack(columns, axis=-1))

    def break_even_expected_tokens(self) -> FloatArray:
        """E at which speculation breaks even at each K, for models that read α only through
        E: S = E / step cost there (Leviathan and roofline), so it is the step cost."""
        return self.speed.step_cost


def _map_arrays(record: D, fn: Any) -> D:
    """Apply `fn` to every array field of a Memory/Speed/StepTimes record and of the records
    inside it (None stays None)."""
    values = {}
    for f in fields(record):  # type: ignore[arg-type]
        value = getattr(record, f.name)
        if isinstance(value, np.ndarray):
            value = fn(value)
        elif is_dataclass(value) and not isinstance(value, type):
            value = _map_arrays(value, fn)
        values[f.name] = value
    return replace(record, **values)  # type: ignore[type-var]


def _derive(
    dep: DeploymentNumbers, batch: FloatArray, k: IntArray, memory: Memory, speed: Speed
) -> Point:
    """Throughput, latency and cost at one K: the one place they are computed."""
    t_target = speed.times.target
    baseline = floats(batch / t_target)
    speculative = floats(baseline * speed.speedup)
    tp = floats(dep.tp)
    usd = floats(floats(dep.price_usd_per_hour) * tp / 3600.0 / speculative * 1e6)
    return Point(
        k=k,
        memory=memory,
        speed=speed,
        baseline_tokens_per_s=baseline,
        speculative_tokens_per_s=speculative,
        speculative_tokens_per_s_per_gpu=floats(speculative / tp),
        baseline_ms_per_token=floats(t_target * 1e3),
        speculative_ms_per_token=floats(t_target * 1e3 / speed.speedup),
        usd_per_mtok=usd,
    )


def evaluate(dep: DeploymentNumbers, engine: Engine, model: SpeedupModel, grid: Grid) -> Evaluation:
    """Memory and speed of `dep` over the workload, and the best K that fits."""
    ks = np.atleast_1d(np.asarray(grid.ks, dtype=np.int64)) if dep.draft else np.zeros(1, np.int64)
    k_axis = ks.astype(np.float64)
    ctx, bat = floats(grid.context)[..., None], floats(grid.batch)[..., None]
    alpha = floats(grid.alpha)[..., None]
    gamma = None if grid.latency_ratio is None else floats(grid.latency_ratio)[..., None]
    on_k = with_trailing_axis(dep)
    memory = deployment_memory(on_k, engine, ctx, bat, k_axis, grid.headroom, grid.tree)
    if on_k.draft is None:
        speed = plain_speed(on_k.target, engine, ctx, bat)
    else:
        speed = deployment_speed(
            on_k.target,
            on_k.draft,
            engine,
            model,
            ctx,
            bat,
            alpha,
            k_axis,
            gamma,
            expected_over_k(grid, ks),
            grid.tree,
        )
    shape = np.broadcast_shapes(memory.combined.shape, speed.speedup.shape)
    fits_k = np.broadcast_to(memory.fits, shape)
    if on_k.draft is not None:  # Medusa heads and MLP stages propose at most their count
        fits_k = fits_k & (k_axis <= floats(on_k.draft.max_k))
    masked = np.where(fits_k, np.broadcast_to(speed.speedup, shape), -np.inf)
    best = np.argmax(masked, axis=-1).astype(np.int64)
    fits_any = np.asarray(fits_k.any(axis=-1), dtype=np.bool_)
    return Evaluation(
        numbers=dep,
        model=model,
        ks=ks,
        batch=bat,
        memory=memory,
        speed=speed,
        best_index=best,
        fits_k=fits_k,
        fits_any=fits_any,
        tree=grid.tree,
    )


def expected_over_k(grid: Grid, ks: np.ndarray) -> FloatArray | None:
    """E over the K axis from the profile (None: i.i.d. α, the speedup model's own E); a tree
    takes the conditional acceptance of the profile, or α at every position."""
    if grid.tree.is_chain:
        return None if grid.rates is None else expected_tokens_profile(grid.rates, ks)
    positions = int(np.max(ks))
    rates = iid_profile(grid.alpha, positions) if grid.rates is None else floats(grid.rates)
    return tree_expected_tokens(conditional_rates(rates), grid.tree, ks)
