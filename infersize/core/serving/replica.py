"""A deployment as a serving replica, and what the simulator (core/serving/simulate.py) reads and
returns: the replica's step model at K, its scheduler limits and the KV pool its sequences
share (from the same memory model `spec` uses, core/fit.py); the requests; what a run measured.
"""

from __future__ import annotations

import dataclasses
import math
from bisect import bisect_left

import numpy as np
from numpy.typing import ArrayLike

from infersize.core.arrays import FloatArray, IntArray
from infersize.core.deployment import DeploymentNumbers
from infersize.core.engines import Engine
from infersize.core.fit import deployment_memory
from infersize.core.memory import KvLayout, kv_pool_layout, step_traffic
from infersize.core.serving.step import StepTable, step_table
from infersize.core.serving.step_math import sequence_kv
from infersize.core.tree import CHAIN, Tree
from infersize.errors import InfersizeError
from infersize.record import record


@record
class KSwitch:
    """K chosen each step by the requests it schedules (prefills included), as vLLM's
    num_speculative_tokens_per_batch_size and TensorRT-LLM's draft_len_schedule read their
    tables: `last_batch[j]` the last batch of range j (inclusive), run at `draft_k[j]`; past
    the last range its K. `tables` holds the step model at each K; `scale[b]` the step time's
    factor at b requests (what running with a schedule costs the engine; 1 where none is
    measured), its last entry for every larger batch."""

    last_batch: tuple[int, ...]
    draft_k: tuple[int, ...]
    tables: dict[int, StepTable]
    scale: tuple[float, ...] = (1.0,)

    def k_at(self, batch: int) -> int:
        """The K of the range holding `batch`."""
        return self.draft_k[min(bisect_left(self.last_batch, batch), len(self.draft_k) - 1)]

    def scale_at(self, batch: int) -> float:
        return self.scale[min(batch, len(self.scale) - 1)]


@record
class Replica:
    """One replica as the scheduler sees it."""

    table: StepTable  # the step model at this K
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_capacity_bytes: float  # the pool both models' KV caches draw from (per GPU)
    pool_kv: KvLayout  # bytes per token of every layer drawing from the pool (per GPU)
    target_kv: KvLayout  # what the target's step moves per token and sequence (step_traffic)
    draft_kv: KvLayout | None  # the drafter's (None: no drafter, or one with no KV)
    lookahead: int  # KV slots reserved per decoding sequence for its drafts (K; a tree's n − 1)
    # how the engine's scheduler runs prompts (core/engines.py): beside the decodes in one
    # step (vLLM, TensorRT-LLM; SGLang with --enable-mixed-chunk), or in steps of their own
    # that hold the decodes back (SGLang's default)
    mixed_prefill: bool = True
    # admit a request only when its whole answer's KV fits beside every running request's
    # (TensorRT-LLM's GUARANTEED_NO_EVICT), never preempting; else when its first chunk fits
    reserve_whole: bool = False
    # the scheduler chooses step n + 1 while step n runs (SGLang's overlap scheduler, vLLM's
    # async scheduling, TensorRT-LLM's overlap scheduler): a request that arrives during step
    # n joins step n + 2 (core/engines.Engine.schedules_ahead)
    schedules_ahead: bool = False
    switch: KSwitch | None = None  # K by the running batch (None: `table`'s K every step)

    @property
    def step_tokens(self) -> int:
        """Tokens of the step's budget each decoding sequence takes: 1 + its drafts."""
        return 1 + self.lookahead


@record
class Load:
    """The requests: their lengths, verification steps, and how they arrive."""

    input_tokens: IntArray
    output_tokens: IntArray
    steps: IntArray  # steps after the first token (core/traffic.verify_steps)
    arrivals: FloatArray | None  # open loop: arrival times, non-decreasing
    concurrency: int | None = None  # closed loop: clients, each sending when its last ends
    give_up: GiveUp | None = None  # stop as soon as the run can no longer meet a target
    # with a K switch: each request's steps at each K of it, drawn as an arm at that K draws
    steps_by_k: dict[int, IntArray] | None = None


@record
class GiveUp:
    """Per-request latency bounds (seconds; inf: none) and how many requests may break each
    before its statistic is broken whatever the rest do (core/metrics.breaches_allowed)."""

    ttft_s: float = math.inf
    tpot_s: float = math.inf
    e2e_s: float = math.inf
    ttft_allowed: int = 0
    tpot_allowed: int = 0
    e2e_allowed: int = 0


@record
class Run:
    """What the simulation measured, per request and over the run."""

    arrival: FloatArray
    admitted: FloatArray  # first admission (the start of the step that began its prefill)
    first_token: FloatArray
    finish: FloatArray
    output_tokens: IntArray
    running_seconds: float  # ∫ running sequences dt
    span: float  # first arrival to last finish
    preemptions: int
    # the streamed chunks' gaps: per run of steps, its first step's seconds, the change per
    # step, the steps and the sequences decoding in each (every one gets a chunk a step)
    itl_first: FloatArray
    itl_slope: FloatArray
    itl_steps: IntArray
    itl_weight: IntArray
    gave_up: str = ""  # stopped early: the metric whose GiveUp bound too many requests broke
    open_loop: bool = True  # arrivals fixed in advance (False: a closed loop of clients)


Layout = tuple[float, float, float, float]  # per token: full, windowed; window; per sequence


def layout_floats(layout: KvLayout | None) -> Layout:
    """A KV layout as plain floats (no drafter: nothing)."""
    if layout is None:
        return (0.0, 0.0, 0.0, 0.0)
    return (
        float(layout.full_bytes_per_token),
        float(layout.window_bytes_per_token),
        float(layout.window_tokens),
        float(layout.state_bytes_per_sequence),
    )


def arm_numbers(dep: DeploymentNumbers, draft_k: int) -> DeploymentNumbers:
    """The deployment an arm runs: with its drafter at K ≥ 1, else the target alone (K = 0 is
    plain decoding: the drafter is not loaded, so its memory goes to the pool)."""
    if dep.draft is None or draft_k > 0:
        return dep
    return dataclasses.replace(dep, draft=None)


def kv_capacity_bytes(
    dep: DeploymentNumbers, engine: Engine, draft_k: int, seqs: int, tree: Tree = CHAIN
) -> float:
    """Per GPU, what the sequences' KV caches may fill: the pool an engine pre-allocates
    (vLLM, SGLang, TensorRT-LLM), else the budget less weights, overhead and the workspace of
    `seqs` sequences (with the KV of their one-token contexts given back)."""
    memory = deployment_memory(dep, engine, 1, seqs, draft_k, tree=tree)
    if memory.pool is not None:
        return float(memory.pool.kv_pool)
    fixed = memory.combined - memory.target_kv - memory.draft_kv
    return float(memory.budget - fixed)


def running_limit(dep: DeploymentNumbers, engine: Engine, draft_k: int, tree: Tree) -> int:
    """The most sequences the engine runs at once: SGLang's max_running_requests as it derives
    it with its pools (its setting too is at most a third of a hybrid model's state slots),
    else the engine's setting."""
    if engine.memory_rule == "sglang":
        pool = deployment_memory(dep, engine, 1, 1, draft_k, tree=tree).pool
        if pool is not None and pool.max_running is not None:
            return int(pool.max_running)
    return max(int(dep.profile_seqs), 1)


def replica(dep: DeploymentNumbers, engine: Engine, draft_k: int, tree: Tree = CHAIN) -> Replica:
    """`dep` serving at K drafts a step (0: without speculation). Every decoding sequence
    schedules 1 + K tokens of the step's budget (a tree's n), so at most budget // (1 + K)
    decode at once."""
    numbers = arm_numbers(dep, draft_k)
    k = draft_k if numbers.draft is not None else 0
    shape = tree if k > 0 else CHAIN
    per_seq = int(shape.verify_tokens(k)) if k > 0 else 1
    budget = int(numbers.profile_tokens)
    seqs = min(running_limit(numbers, engine, k, shape), budget // per_seq)
    draft = numbers.draft
    widest = max(per_seq, int(shape.draft_width()))
    return Replica(
        table=step_table(numbers.target, draft, engine, k, seqs * widest + budget, shape),
        max_num_seqs=seqs,
        max_num_batched_tokens=budget,
        kv_capacity_bytes=kv_capacity_bytes(numbers, engine, k, seqs, shape),
        pool_kv=kv_pool_layout(numbers.target.kv, None if draft is None else draft.kv, engine),
        target_kv=step_traffic(numbers.target.kv),
        draft_kv=None if draft is None else step_traffic(draft.kv),
        lookahead=per_seq - 1,
        mixed_prefill=engine.mixed_prefill,
        reserve_whole=engine.admission == "whole-request",
        schedules_ahead=engine.schedules_ahead,
    )


def check_fits(
    pool: Layout, capacity: float, inputs: ArrayLike, outputs: ArrayLike, lookahead: int
) -> None:
    """The longest request (prompt, answer and draft slots) must fit the pool alone."""
    totals = np.asarray(inputs, dtype=np.int64) + np.asarray(outputs, dtype=np.int64)
    longest = int(totals.max()) + lookahead
    if sequence_kv(pool, float(longest)) > capacity:
        per_token = max(pool[0] + pool[1], 1e-9)
        raise InfersizeError(
            f"a request of {longest:,} tokens (prompt, answer and {lookahead} draft slots) does "
            f"not fit the KV pool ({capacity / per_token:,.0f} tokens)"
        )


def switched_replica(
    dep: DeploymentNumbers,
    engine: Engine,
    ranges: tuple[tuple[int, int], ...],
    scale: tuple[float, ...] = (1.0,),
) -> Replica:
    """`dep` serving with K switched by the running batch: `ranges` (last batch, K), batches
    ascending. Memory and lookahead slots at the largest K (vLLM's num_speculative_tokens
    sizes them at start), the running limit at the smallest K's share of the budget, and the
    step model at each K (a chain of drafts; K = 0 runs the target alone)."""
    ks = tuple(k for _, k in ranges)
    base = replica(dep, engine, max(ks))
    budget = base.max_num_batched_tokens
    seqs = min(running_limit(dep, engine, max(ks), CHAIN), budget // (1 + min(ks)))
    most = seqs * (1 + max(ks)) + budget
    tables = {k: step_table(dep.target, dep.draft, engine, k, most) for k in set(ks)}
    return dataclasses.replace(
        base,
        table=tables[ks[0]],
        max_num_seqs=seqs,
        switch=KSwitch(
            last_batch=tuple(last for last, _ in ranges), draft_k=ks, tables=tables, scale=scale
        ),
    )
