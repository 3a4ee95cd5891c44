"""`capacity --k-schedule auto|FILE`: the load served with K chosen each step by the running
batch (core/serving/simulate.py), beside the best static K for the load (`--draft-k auto`) and
plain decoding.

`auto` is the schedule that serves the load best: the table `infersize schedule` prices for
the deployment (K per batch from the step model) served by the simulator, against the best
static K, itself a table of one range; the answer's speculative arm is the one of the higher
capacity, and both figures are reported. A FILE (service/capacity/ktable.py) is served as
written. Where the engine has a measured cost of running with a table that switches K (vLLM:
TPOT +6.6 % to +21.6 % from 2 to 189 requests, service/schedule_engines.py), every step of
the switching table carries it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from infersize.catalog.store import Catalog
from infersize.core.arrays import floats
from infersize.core.engines import get_engine
from infersize.core.serving.replica import switched_replica
from infersize.errors import InfersizeError, ValueRangeError
from infersize.service.capacity.answer import ArmResult, CapacityResult, KScheduleAnswer
from infersize.service.capacity.arm import Arm, ReplicaCache, make_arm, replica_key
from infersize.service.capacity.ktable import BEYOND, Ranges, read_k_schedule, table_text
from infersize.service.capacity.request import CapacityRequest, prepare_capacity
from infersize.service.capacity.result import arm_result, run_capacity
from infersize.service.capacity.search import first_replication, rate_text
from infersize.service.request import Prepared
from infersize.service.schedule import ScheduleRequest, run_schedule
from infersize.service.schedule_engines import schedule_family, vllm_cost

AUTO = "auto"


def schedule_ranges(req: CapacityRequest, catalog: Catalog, source: str) -> Ranges:
    """The table to serve: `infersize schedule`'s for the deployment (auto), or a file's."""
    if source.strip().lower() != AUTO:
        return read_k_schedule(Path(source))
    result = run_schedule(ScheduleRequest(spec=req.spec), catalog)
    if not result.buckets:
        raise InfersizeError("no K fits beside the target at this context: nothing to schedule")
    rows = [(b.min_batch, b.max_batch, b.draft_k) for b in result.buckets]
    return (*rows[:-1], (rows[-1][0], BEYOND, rows[-1][2]))


def _switches(ranges: Ranges) -> bool:
    return len({k for _, _, k in ranges}) > 1


def switching_arm(
    prepared: Prepared, req: CapacityRequest, ranges: Ranges, replicas: ReplicaCache | None = None
) -> tuple[Arm, bool]:
    """The arm serving `ranges`, and whether its steps carry the engine's cost of a schedule
    (`replicas`: replicas shared by requests of the same deployment, as make_arm's)."""
    if prepared.deployment.draft is None:
        raise ValueRangeError("k_schedule", "needs a drafter: {draft} none runs no K")
    if not prepared.tree.is_chain:
        raise ValueRangeError("k_schedule", "switches the length of a chain of drafts, not a tree")
    largest = max(k for _, _, k in ranges)
    if largest == 0:
        raise ValueRangeError(
            "k_schedule", "never drafts (K = 0 at every batch): it is plain decoding"
        )
    static = make_arm(prepared, req.traffic, largest, replicas)  # memory, lengths, draws at K
    costly = _switches(ranges) and prepared.engine.memory_rule == "vllm"
    scale = (1.0,)
    if costly:
        batches = floats(np.arange(1, static.replica.max_num_seqs + 2))
        scale = (1.0, *(1.0 + vllm_cost(batches)).tolist())
    switched = tuple((last, k) for _, last, k in ranges)
    key = ("switched", *replica_key(prepared, largest), switched, scale)
    replica = None if replicas is None else replicas.get(key)
    if replica is None:
        replica = switched_replica(prepared.deployment.numbers, prepared.engine, switched, scale)
        if replicas is not None:
            replicas[key] = replica
    return dataclasses.replace(static, replica=replica), costly


def _static_arm(result: CapacityResult) -> ArmResult:
    return result.speculative if result.speculative is not None else result.baseline


def _rate(arm: ArmResult) -> float:
    return -1.0 if arm.capacity is None else arm.capacity.max_request_rate


def schedule_capacity(
    prepared: Prepared,
    req: CapacityRequest,
    catalog: Catalog,
    replicas: ReplicaCache | None = None,
) -> float | None:
    """One replication's capacity of the auto table (`infersize schedule`'s for the
    deployment), for a capacity sweep's row; None where the engine has no table or the
    deployment none to serve (no drafter, a tree, no K that fits). `replicas`: as make_arm's."""
    if req.sla is None:
        return None
    try:
        schedule_family(get_engine(req.spec.engine.engine))
        arm, _ = switching_arm(prepared, req, schedule_ranges(req, catalog, AUTO), replicas)
    except InfersizeError:
        return None
    return first_replication(arm, req.traffic, req.sla).max_request_rate


def run_capacity_k_schedule(req: CapacityRequest, source: str, catalog: Catalog) -> CapacityResult:
    """The answer with the table served beside the best static K and plain decoding."""
    if req.sla is None:
        raise ValueRangeError("k_schedule", "compares capacities at the SLA: give {sla}")
    static_req = dataclasses.replace(req, draft_k_auto=True)
    answer = run_capacity(static_req, catalog)
    if source.strip().lower() == AUTO:
        schedule_family(get_engine(req.spec.engine.engine))  # one line for an engine without one
    ranges = schedule_ranges(req, catalog, source)
    prepared = prepare_capacity(req, catalog)
    arm, costly = switching_arm(prepared, req, ranges)
    scheduled = arm_result(prepared, req, arm, first_replication(arm, req.traffic, req.sla))
    static = _static_arm(answer)
    auto = source.strip().lower() == AUTO
    serves = "static" if auto and _rate(static) > _rate(scheduled) else "schedule"
    note = _note(ranges, scheduled, static, serves, costly)
    return dataclasses.replace(
        answer,
        speculative=scheduled if serves == "schedule" else static,
        notes=(*answer.notes, note),
        k_schedule=KScheduleAnswer(
            source=AUTO if auto else source,
            table=ranges,
            engine_cost=costly,
            scheduled=scheduled,
            static=static,
            serves=serves,
        ),
    )


def _note(
    ranges: Ranges, scheduled: ArmResult, static: ArmResult, serves: str, costly: bool
) -> str:
    """What the table served and how it compares with the best static K."""
    cost = " (with vLLM's measured cost of a switching table)" if costly else ""
    text = (
        f"--k-schedule: {table_text(ranges)}{cost} serves {rate_text(_rate(scheduled))} "
        f"requests/s per replica; the best static K ({static.draft_k}) "
        f"{rate_text(_rate(static))}"
    )
    if serves == "static":
        return text + ": the static K serves more, so it is the speculative arm"
    return text
