"""The capacity table's rows of one chunk: per (setting, workload, SLA, α scenario, target
rate), the highest request rate per replica with and without speculation, the K that serves it,
and the replicas, GPUs and dollars each way.

Screen, then simulate: the mean-field model (core/meanfield.py) rates every row; per (GPU,
target, workload, SLA) the simulator then answers again for the `simulate_top` rows that need the
fewest GPUs, and for every row near an SLA edge (where an error of EDGE in the ratio of the
arms' mean-field capacities would flip whether speculation saves GPUs). A simulated row is what
`infersize capacity --draft-k auto` answers for the same deployment, workload and SLA (a test
holds the two equal). Chunks hold whole (GPU, target) groups, so which rows are simulated does
not depend on --jobs.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from infersize.catalog.store import Catalog
from infersize.core.meanfield import mean_field, sustained_rate
from infersize.core.sla import parse_sla
from infersize.core.traffic import parse_arrival
from infersize.service.capacity import (
    Arm,
    CapacityRequest,
    ReplicaCache,
    Traffic,
    make_arm,
    prepare_capacity,
    replicas_for,
    screen_score,
    serve,
)
from infersize.service.capacity_result import BaselineCache, run_capacity
from infersize.service.request import Prepared, SpecRequest
from infersize.service.resolve import DeploymentRequest
from infersize.sweep.settings import CapacityPlan, Scoring, Setting, Workload

# The screen's error on the ratio of the two arms' capacities: its absolute capacities run a few
# per cent high, but alike for both arms (benchmarks/meanfield_gap.py); a verdict that an error
# of EDGE in the ratio would flip is left to the simulator
EDGE = 0.05
Latency = tuple[float, float, float, float]  # p50 and p99 TTFT, p50 and p99 TPOT, in ms


@dataclass(frozen=True, kw_only=True)
class Case:
    """A row before its target rates: a setting under a workload, an SLA and an α scenario."""

    setting: Setting
    workload: Workload
    sla_name: str
    sla: str
    scenario: int

    @property
    def group(self) -> tuple[str, str, str, str]:
        return (self.setting.gpu, self.setting.target, self.workload.name, self.sla_name)


@dataclass(frozen=True, kw_only=True)
class Answer:
    """Both arms of a case: capacity per replica, the K, latency at each target rate's load."""

    draft_k: int
    max_request_rate: tuple[float, float]  # (plain decoding, speculation)
    latency_ms: dict[float, tuple[Latency | None, Latency | None]]  # by target rate
    simulated: bool


def iter_cases(settings: tuple[Setting, ...], plan: CapacityPlan, scenarios: int) -> Iterator[Case]:
    for setting in settings:
        for workload in plan.workloads:
            for sla_name, sla in plan.slas:
                for scenario in range(scenarios):
                    yield Case(
                        setting=setting, workload=workload, sla_name=sla_name, sla=sla,
                        scenario=scenario,
                    )  # fmt: skip


def capacity_request(
    case: Case, scoring: Scoring, max_k: int, plan: CapacityPlan
) -> CapacityRequest:
    """The `infersize capacity --draft-k auto` request a row answers (K over the sweep's)."""
    s, w = case.setting, case.workload
    deployment = DeploymentRequest(
        target=s.target, gpu=s.gpu, target_quant=s.target_quant, draft=s.draft,
        draft_quant=s.draft_quant, kv_dtype=s.kv_dtype, tp=s.tp,
        price_usd_per_hour=s.price_usd_per_hour, allow_cross_tokenizer=True,
    )  # fmt: skip
    longest = max(i + o for i, o in zip(w.input_tokens, w.output_tokens, strict=True))
    tree = scoring.eagle_topk > 1
    spec = SpecRequest(
        deployment=deployment, engine=scoring.engine, max_k=max_k, context_length=longest,
        acceptance_rate=None if s.profile else s.alphas[case.scenario],
        acceptance_rates=s.profile, eagle_topk=scoring.eagle_topk,
        num_draft_tokens=scoring.num_draft_tokens if tree else None,
    )  # fmt: skip
    traffic = Traffic(
        input_tokens=w.input_tokens, output_tokens=w.output_tokens, lengths_file=w.lengths_file,
        request_rate=w.target_request_rates[0], arrival=parse_arrival(w.arrival),
        requests=plan.requests, seed=plan.seed,
    )  # fmt: skip
    return CapacityRequest(
        spec=spec, draft_k_auto=True, traffic=traffic, sla=parse_sla(case.sla),
        target_request_rate=w.target_request_rates[0], headroom=plan.headroom,
    )  # fmt: skip


def _screen_rate(arm: Arm, request: CapacityRequest) -> float:
    """The mean-field capacity of an arm (0 when it cannot keep up at any rate)."""
    if sustained_rate(arm.replica, arm.lengths) <= 0:
        return 0.0
    return screen_score(arm, request.traffic, request.sla)


@dataclass
class ScreenCache:
    """What the screens of one chunk share: replicas by deployment and K, and plain
    decoding's mean-field capacity by target deployment, traffic and SLA."""

    replicas: ReplicaCache = field(default_factory=dict)
    baseline: dict[tuple[object, ...], float] = field(default_factory=dict)


def screen(
    prepared: Prepared, request: CapacityRequest, rates: tuple[float, ...], cache: ScreenCache
) -> Answer:
    """The mean-field answer: plain decoding and the K of the highest mean-field capacity."""
    base_arm = make_arm(prepared, request.traffic, 0, cache.replicas)
    dep = prepared.deployment
    base_key = (dep.gpu.id, dep.target.tp, dep.target.model.id, dep.target.fmt.id,
                dep.kv_dtype.id, prepared.engine, request.traffic, request.sla)  # fmt: skip
    if base_key not in cache.baseline:
        cache.baseline[base_key] = _screen_rate(base_arm, request)
    base = cache.baseline[base_key]
    scores = {}
    if dep.draft is not None:
        for k in range(1, prepared.request.max_k + 1):
            arm = make_arm(prepared, request.traffic, k, cache.replicas)
            scores[k] = _screen_rate(arm, request)
    k = max(scores, key=lambda k: (scores[k], -k)) if scores else 0
    spec_arm = make_arm(prepared, request.traffic, k, cache.replicas)
    spec = scores.get(k, base)
    return Answer(
        draft_k=k, max_request_rate=(base, spec), simulated=False,
        latency_ms=_pair(_latency_at(base_arm, request, base, False, rates),
                         _latency_at(spec_arm, request, spec, False, rates)),
    )  # fmt: skip


def simulate(
    request: CapacityRequest, catalog: Catalog, rates: tuple[float, ...], cache: BaselineCache
) -> Answer:
    """The simulator's answer: exactly `infersize capacity --draft-k auto`'s."""
    result = run_capacity(request, catalog, cache)
    prepared = prepare_capacity(request, catalog)
    assert result.max_request_rate is not None
    base, spec = result.max_request_rate["baseline"] or 0.0, result.max_request_rate["speculative"]
    k = 0 if result.speculative is None else result.speculative.draft_k
    spec_rate = base if spec is None else spec
    base_arm, spec_arm = (
        make_arm(prepared, request.traffic, 0),
        make_arm(prepared, request.traffic, k),
    )
    return Answer(
        draft_k=k, max_request_rate=(base, spec_rate), simulated=True,
        latency_ms=_pair(_latency_at(base_arm, request, base, True, rates),
                         _latency_at(spec_arm, request, spec_rate, True, rates)),
    )  # fmt: skip


def _latency_at(
    arm: Arm, request: CapacityRequest, top: float, simulated: bool, rates: tuple[float, ...]
) -> dict[float, Latency | None]:
    out: dict[float, Latency | None] = {}
    for rate in rates:
        replicas = replicas_for(rate, top, request.headroom)
        if replicas is None:
            out[rate] = None
            continue
        load = rate / replicas
        if simulated:
            m = serve(arm, request.traffic, load)
            out[rate] = (
                m.ttft_s.p50 * 1e3,
                m.ttft_s.p99 * 1e3,
                m.tpot_s.p50 * 1e3,
                m.tpot_s.p99 * 1e3,
            )
        else:
            f = mean_field(arm.replica, arm.lengths, load)
            out[rate] = (
                f.ttft_s["p50"] * 1e3, f.ttft_s["p99"] * 1e3, f.tpot_s["p50"] * 1e3,
                f.tpot_s["p99"] * 1e3,
            )  # fmt: skip
    return out


def _pair(
    base: dict[float, Latency | None], spec: dict[float, Latency | None]
) -> dict[float, tuple[Latency | None, Latency | None]]:
    return {rate: (base[rate], spec[rate]) for rate in base}


def near_edge(answer: Answer, case: Case, headroom: float) -> bool:
    """Whether the screen's verdict (does speculation save GPUs at the first target rate?)
    could flip if the ratio of the arms' capacities were off by EDGE."""
    rate = case.workload.target_request_rates[0]
    base, spec = answer.max_request_rate

    def saving(b: float, s: float) -> int:
        gb, gs = replicas_for(rate, b, headroom), replicas_for(rate, s, headroom)
        if gb is None or gs is None:
            return (gb is None) - (gs is None)  # only one arm meets the SLA: it saves
        return (gb > gs) - (gb < gs)

    verdict = saving(base, spec)
    bent = ((base, spec * (1 + EDGE)), (base, spec * (1 - EDGE)))
    return any(saving(b, s) != verdict for b, s in bent)


def gpus_needed(
    answer: Answer, rate: float, headroom: float, tp: int
) -> tuple[int | None, int | None]:
    """(GPUs plain, GPUs speculative) at `rate` (None: no rate meets the SLA)."""
    out = []
    for top in answer.max_request_rate:
        replicas = replicas_for(rate, top, headroom)
        out.append(None if replicas is None else replicas * tp)
    return out[0], out[1]


def fewest_gpus(answer: Answer, case: Case, headroom: float) -> float:
    """What ranks a case in its group: the GPUs its better arm needs at the first target rate."""
    gpus = gpus_needed(answer, case.workload.target_request_rates[0], headroom, case.setting.tp)
    known = [g for g in gpus if g is not None]
    return float(min(known)) if known else math.inf
