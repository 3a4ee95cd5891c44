"""A deployment as a serving replica: its step model at K, its scheduler limits and the KV pool
its sequences share, from the same memory model `spec` uses (core/fit.py)."""

from __future__ import annotations

import dataclasses

from infersize.core.deployment import DeploymentNumbers
from infersize.core.engines import Engine
from infersize.core.fit import deployment_memory, pool_layout
from infersize.core.simulate import Replica
from infersize.core.step import step_table


def arm_numbers(dep: DeploymentNumbers, draft_k: int) -> DeploymentNumbers:
    """The deployment an arm runs: with its drafter at K ≥ 1, else the target alone (K = 0 is
    plain decoding: the drafter is not loaded, so its memory goes to the pool)."""
    if dep.draft is None or draft_k > 0:
        return dep
    return dataclasses.replace(dep, draft=None)


def kv_capacity_bytes(dep: DeploymentNumbers, engine: Engine, draft_k: int, seqs: int) -> float:
    """Per GPU, what the sequences' KV caches may fill: the pool an engine pre-allocates
    (vLLM), else the budget less weights, overhead and the workspace of `seqs` sequences
    (with the KV of their one-token contexts given back)."""
    memory = deployment_memory(dep, engine, 1, seqs, draft_k)
    if memory.pool is not None:
        return float(memory.pool.kv_pool)
    fixed = memory.combined - memory.target_kv - memory.draft_kv
    return float(memory.budget - fixed)


def replica(dep: DeploymentNumbers, engine: Engine, draft_k: int) -> Replica:
    """`dep` serving at K drafts a step (0: without speculation). Every decoding sequence
    schedules 1 + K tokens of the step's budget, so at most budget // (1 + K) decode at once."""
    numbers = arm_numbers(dep, draft_k)
    k = draft_k if numbers.draft is not None else 0
    budget = int(numbers.profile_tokens)
    seqs = min(int(numbers.profile_seqs), budget // (1 + k))
    draft = numbers.draft
    return Replica(
        table=step_table(numbers.target, draft, engine, k, seqs * (1 + k) + budget),
        max_num_seqs=seqs,
        max_num_batched_tokens=budget,
        kv_capacity_bytes=kv_capacity_bytes(numbers, engine, k, seqs),
        pool_kv=pool_layout(numbers.target.kv, None if draft is None else draft.kv),
        target_kv=numbers.target.kv,
        draft_kv=None if draft is None else draft.kv,
        lookahead=k,
    )
