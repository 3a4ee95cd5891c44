"""A capacity answer as data: per arm its metrics at the load, its capacity with its range, its
latency floor and its fleet for a target rate; and the answer around both arms. `infersize
capacity`'s panel and JSON, `--tp auto` and the capacity sweep read these."""

from __future__ import annotations

from typing import Any

from infersize.core.serving.metrics import LatencyFloor, Stats
from infersize.core.serving.sla import Sla
from infersize.record import record
from infersize.service.capacity.fleet import Fleet
from infersize.service.capacity.search import Capacity


@record
class ArmKind:
    """One of a capacity answer's two arms, declared here only: the key its JSON object, its
    table columns (a suffix) and its figure series go by, and how prose names it."""

    key: str
    label: str
    speculates: bool


BASELINE = ArmKind(key="baseline", label="plain decoding", speculates=False)
SPECULATIVE = ArmKind(key="speculative", label="speculation", speculates=True)
ARMS = (BASELINE, SPECULATIVE)


@record
class ArmResult:
    """One arm: its metrics at the load, its capacity at the SLA, and its fleet for a target
    rate."""

    draft_k: int
    tp: int
    load: str  # what the metrics were measured at
    load_request_rate: float | None  # its open-loop rate (None: a closed loop)
    ttft_ms: Stats
    tpot_ms: Stats
    itl_ms: Stats
    e2e_latency_s: Stats
    output_tokens_per_s: float
    requests_per_s: float
    mean_running_sequences: float
    preemptions: int
    meets_sla: bool | None  # None without an SLA
    sla_breaches: tuple[str, ...]
    latency_floor: LatencyFloor | None
    capacity: Capacity | None
    fleet: Fleet | None
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_pool_tokens: int  # what the pool holds, in tokens of both models' KV
    floor_remedy: str | None = None  # at its latency floor: what lifts it ("TP 4 ... clears it")

    @property
    def at_floor(self) -> bool:
        """One request alone near an SLA term: capacity swings with small changes."""
        return self.latency_floor is not None and self.latency_floor.near_floor

    @property
    def huge_fleet(self) -> bool:
        """Four digits of GPUs: the answer says what the floor is, whether or not it binds."""
        return self.fleet is not None and self.fleet.gpus is not None and self.fleet.gpus >= 1000


@record
class KScheduleAnswer:
    """`capacity --k-schedule`: the table served (K by the running batch) beside the best
    static K for the load and plain decoding."""

    source: str  # auto, or the file it was read from
    table: tuple[tuple[int, int, int], ...]  # inclusive (first, last, K); last 2^30: no end
    engine_cost: bool  # the step time carries the engine's measured cost of a schedule
    scheduled: ArmResult  # the table served
    static: ArmResult  # the best static K for the load (K = 0 where none pays)
    serves: str  # "schedule" or "static": which the speculative arm is (auto: the better)


@record
class CapacityResult:
    target: str
    draft: str | None
    method: str | None
    gpu: str
    gpu_name: str
    engine: str
    workload: dict[str, Any]
    sla: Sla | None  # parsed once, from the command line or the sweep file
    acceptance_rate: float | None
    acceptance_source: str | None
    baseline: ArmResult
    speculative: ArmResult | None
    draft_fits: bool | None  # the draft and a KV cache fit beside the target (None: no draft)
    target_request_rate: float | None
    headroom: float
    price_usd_per_hour: float | None
    confidence: str
    confidence_reason: str
    notes: tuple[str, ...]
    k_schedule: KScheduleAnswer | None = None  # with --k-schedule

    def arm(self, kind: ArmKind) -> ArmResult | None:
        return self.speculative if kind.speculates else self.baseline

    @property
    def arms(self) -> dict[ArmKind, ArmResult]:
        """The arms answered (speculation only with a drafter), by kind."""
        both = {kind: self.arm(kind) for kind in ARMS}
        return {kind: arm for kind, arm in both.items() if arm is not None}

    @property
    def tp(self) -> int:
        return self.baseline.tp

    @property
    def speculation_saves_gpus(self) -> int | None:
        base, spec = self.baseline.fleet, self.speculative and self.speculative.fleet
        if not base or not spec or base.gpus is None or spec.gpus is None:
            return None
        return base.gpus - spec.gpus


def k_schedule_json(answer: KScheduleAnswer | None) -> dict[str, Any] | None:
    """The `k_schedule` object of `capacity --json`: the table, and each arm's capacity and
    fleet (the schedule's, the best static K's, plain decoding's is `baseline`'s)."""
    if answer is None:
        return None
    arms = {"schedule": answer.scheduled, "static": answer.static}
    return {
        "source": answer.source,
        "table": [[a, None if b >= 1 << 30 else b, k] for a, b, k in answer.table],
        "engine_cost": answer.engine_cost,
        "static_draft_k": answer.static.draft_k,
        "max_request_rate": {
            key: None if arm.capacity is None else arm.capacity.max_request_rate
            for key, arm in arms.items()
        },
        "gpus": {key: None if arm.fleet is None else arm.fleet.gpus for key, arm in arms.items()},
        "usd_per_hour": {
            key: None if arm.fleet is None else arm.fleet.usd_per_hour for key, arm in arms.items()
        },
        "serves": answer.serves,
    }
