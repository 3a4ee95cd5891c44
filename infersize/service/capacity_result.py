"""The answer of `infersize capacity`: both arms at the load asked, their capacity at the SLA and
the fleet a target rate needs. Its JSON keys are a stable contract (docs/capacity.md)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from infersize.catalog.store import Catalog
from infersize.core.engines import VLLM_ENTRYPOINTS
from infersize.core.methods import method_of
from infersize.core.metrics import ServingMetrics, Stats, sla_breaches
from infersize.service.capacity import (
    Arm,
    Capacity,
    CapacityRequest,
    NoKvRoomError,
    capacity,
    choose_draft_k,
    make_arm,
    prepare_capacity,
    replicas_for,
    serve,
    simulated_score,
)
from infersize.service.request import Prepared


@dataclass(frozen=True, kw_only=True)
class ArmResult:
    """One arm: its metrics at the load asked, and its capacity when an SLA is given."""

    draft_k: int
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
    max_request_rate: float | None
    max_request_rate_why: str | None
    saturation_request_rate: float | None
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_pool_tokens: int  # what the pool holds, in tokens of both models' KV


@dataclass(frozen=True, kw_only=True)
class CapacityResult:
    target: str
    draft: str | None
    method: str | None
    gpu: str
    gpu_name: str
    tp: int
    engine: str
    workload: dict[str, Any]
    sla: str | None
    acceptance_rate: float | None
    acceptance_source: str | None
    baseline: ArmResult
    speculative: ArmResult | None
    draft_fits: bool | None  # the draft and a KV cache fit beside the target (None: no draft)
    max_request_rate: dict[str, float | None] | None
    target_request_rate: float | None
    headroom: float
    replicas: dict[str, int | None] | None
    gpus: dict[str, int | None] | None
    usd_per_hour: dict[str, float | None] | None
    speculation_saves_gpus: int | None
    price_usd_per_hour: float | None
    notes: tuple[str, ...]


def _arm_result(
    arm: Arm, limit: Capacity | None, measured: ServingMetrics, req: CapacityRequest
) -> ArmResult:
    broken = tuple(sla_breaches(measured, req.sla)) if req.sla else ()
    pool = arm.replica.pool_kv
    per_token = float(pool.full_bytes_per_token) + float(pool.window_bytes_per_token)
    return ArmResult(
        draft_k=arm.draft_k,
        ttft_ms=measured.ttft_s.scaled(1e3),
        tpot_ms=measured.tpot_s.scaled(1e3),
        itl_ms=measured.itl_s.scaled(1e3),
        e2e_latency_s=measured.e2e_s,
        output_tokens_per_s=measured.output_tokens_per_s,
        requests_per_s=measured.requests_per_s,
        mean_running_sequences=measured.mean_running_sequences,
        preemptions=measured.preemptions,
        meets_sla=None if req.sla is None else not broken,
        sla_breaches=broken,
        max_request_rate=None if limit is None else limit.max_request_rate,
        max_request_rate_why=None if limit is None else limit.why,
        saturation_request_rate=None if limit is None else limit.saturation_request_rate,
        max_num_seqs=arm.replica.max_num_seqs,
        max_num_batched_tokens=arm.replica.max_num_batched_tokens,
        kv_pool_tokens=int(arm.replica.kv_capacity_bytes / max(per_token, 1e-9)),
    )


def _fleet(
    rate: float | None, limit: float | None, headroom: float, tp: int, price: float
) -> tuple[int | None, int | None, float | None]:
    if rate is None or limit is None:
        return None, None, None
    replicas = replicas_for(rate, limit, headroom)
    gpus = None if replicas is None else replicas * tp
    usd = None if gpus is None or math.isnan(price) else gpus * price
    return replicas, gpus, usd


BaselineKey = tuple[object, ...]
Evaluated = tuple[Arm, Capacity | None, ServingMetrics]
BaselineCache = dict[BaselineKey, Evaluated]


def baseline_key(prepared: Prepared, req: CapacityRequest) -> BaselineKey:
    """What plain decoding's answer depends on: the target as deployed, the engine, the
    traffic and the SLA (not the drafter, nor its acceptance)."""
    dep = prepared.deployment
    return (
        dep.gpu.id, dep.target.tp, dep.target.model.id, dep.target.fmt.id, dep.kv_dtype.id,
        float(dep.numbers.price_usd_per_hour), prepared.engine, req.traffic, req.sla,
    )  # fmt: skip


def _evaluate(prepared: Prepared, req: CapacityRequest, k: int) -> Evaluated:
    """An arm (K = 0: plain decoding), its capacity at the SLA and its metrics at the load."""
    arm = make_arm(prepared, req.traffic, k)
    limit = None if req.sla is None else capacity(arm, req.traffic, req.sla)
    return arm, limit, serve(arm, req.traffic)


def plain_decoding(prepared: Prepared, req: CapacityRequest, cache: BaselineCache) -> Evaluated:
    """Plain decoding's arm as run_capacity answers it, computed once per key of the cache."""
    key = baseline_key(prepared, req)
    if key not in cache:
        cache[key] = _evaluate(prepared, req, 0)
    return cache[key]


def run_capacity(
    req: CapacityRequest, catalog: Catalog, baseline_cache: BaselineCache | None = None
) -> CapacityResult:
    """Both arms at the load, their capacity at the SLA, the fleet for the target rate.
    `baseline_cache` shares plain decoding's answer between requests that differ only in their
    drafter (a capacity sweep's rows); the answer is the same with or without it."""
    prepared = prepare_capacity(req, catalog)
    evaluated = {0: plain_decoding(prepared, req, {} if baseline_cache is None else baseline_cache)}

    def evaluate(k: int) -> Evaluated:
        if k not in evaluated:
            evaluated[k] = _evaluate(prepared, req, k)
        return evaluated[k]

    ks = [0]
    if prepared.deployment.draft is not None:
        ks.append(
            choose_draft_k(prepared, req, lambda k: simulated_score(*evaluate(k)[1:]))
            if req.draft_k_auto
            else req.spec.draft_k
        )
    results = [_arm_result(*evaluate(k), req) for k in ks]
    return _assemble(prepared, req, results)


def _assemble(prepared: Prepared, req: CapacityRequest, arms: list[ArmResult]) -> CapacityResult:
    dep = prepared.deployment
    baseline = arms[0]
    speculative = arms[1] if len(arms) > 1 else None
    names = ["baseline"] + (["speculative"] if speculative else [])
    price = float(dep.numbers.price_usd_per_hour)
    fleets = {
        name: _fleet(
            req.target_request_rate, arm.max_request_rate, req.headroom, dep.target.tp, price
        )
        for name, arm in zip(names, arms, strict=True)
    }

    def by_arm(value: Callable[[ArmResult], float | None]) -> dict[str, float | None]:
        return {name: value(arm) for name, arm in zip(names, arms, strict=True)}

    with_target = req.target_request_rate is not None and req.sla is not None
    saves = None
    if with_target and speculative is not None:
        base_gpus, spec_gpus = fleets["baseline"][1], fleets["speculative"][1]
        if base_gpus is not None and spec_gpus is not None:
            saves = base_gpus - spec_gpus
    traffic = req.traffic
    workload = {
        "input_tokens": sum(traffic.input_tokens) / len(traffic.input_tokens),
        "output_tokens": sum(traffic.output_tokens) / len(traffic.output_tokens),
        "lengths_file": traffic.lengths_file,
        "request_rate": traffic.request_rate,
        "concurrency": traffic.concurrency,
        "arrival": traffic.arrival.label,
        "requests": traffic.requests,
        "seed": traffic.seed,
    }
    return CapacityResult(
        target=dep.target.model.id,
        draft=None if dep.draft is None else dep.draft.model.id,
        method=None if dep.draft is None else method_of(dep.draft.model).name,
        gpu=dep.gpu.id, gpu_name=dep.gpu.name, tp=dep.target.tp, engine=dep.engine.name,
        workload=workload,
        sla=None if req.sla is None else str(req.sla),
        acceptance_rate=prepared.alpha if dep.draft else None,
        acceptance_source=None if dep.draft is None else (
            prepared.acceptance.source if prepared.acceptance else "given"
        ),
        baseline=baseline, speculative=speculative,
        draft_fits=None if dep.draft is None else draft_fits(prepared, req),
        max_request_rate=None if req.sla is None else by_arm(lambda a: a.max_request_rate),
        target_request_rate=req.target_request_rate, headroom=req.headroom,
        replicas={n: f[0] for n, f in fleets.items()} if with_target else None,
        gpus={n: f[1] for n, f in fleets.items()} if with_target else None,
        usd_per_hour={n: f[2] for n, f in fleets.items()} if with_target else None,
        speculation_saves_gpus=saves,
        price_usd_per_hour=None if math.isnan(price) else price,
        notes=_notes(prepared, req, arms),
    )  # fmt: skip


def draft_fits(prepared: Prepared, req: CapacityRequest) -> bool:
    """Whether the draft and a KV cache fit beside the target at K = 1."""
    try:
        make_arm(prepared, req.traffic, 1)
    except NoKvRoomError:
        return False
    return True


def _notes(prepared: Prepared, req: CapacityRequest, arms: list[ArmResult]) -> tuple[str, ...]:
    """What the answer rests on: where α came from, the K chosen, the scheduler's limits, what
    TPOT and ITL mean, requests longer than the model holds."""
    dep, notes = prepared.deployment, []
    if dep.draft is not None:
        if prepared.rates is not None:
            notes.append(
                "acceptance per position as given; each step's accepted drafts are drawn from it"
            )
        elif prepared.acceptance is not None:
            notes.append(
                f"α {prepared.alpha:.3f} is {prepared.acceptance.detail}; each step's accepted "
                "drafts are drawn from it, position by position"
            )
        if req.draft_k_auto:
            k = arms[1].draft_k
            choice = "no speculation" if k == 0 else f"K = {k}"
            notes.append(
                f"--draft-k auto: {choice} serves this load best (the mean-field model screened "
                f"K = 1..{prepared.request.max_k}; the simulator chose among its two best and "
                "K = 0, plain decoding)"
            )
    notes.append(_scheduling_note(prepared, arms))
    notes.append(
        "TPOT is per request, (e2e - TTFT) / (output tokens - 1); ITL the gaps between streamed "
        "chunks: with speculation a chunk carries every token a step accepts, so ITL > TPOT"
    )
    longest = max(
        a + b for a, b in zip(req.traffic.input_tokens, req.traffic.output_tokens, strict=True)
    )
    limit = dep.target.model.max_position_embeddings
    if longest > limit:
        notes.append(
            f"requests of up to {longest:,} tokens are longer than {dep.target.model.id}'s "
            f"max_position_embeddings ({limit:,})"
        )
    return tuple(notes)


def _scheduling_note(prepared: Prepared, arms: list[ArmResult]) -> str:
    """How the arms were scheduled: vLLM V1's rules, within the engine's own limits."""
    base, last = arms[0], arms[-1]
    seqs = f"{base.max_num_seqs:,}"
    if last.max_num_seqs != base.max_num_seqs:
        seqs += f" ({last.max_num_seqs:,} when speculating)"
    rule = prepared.engine.memory_rule
    if rule == "sglang":
        return (
            f"scheduled as vLLM V1 schedules, within SGLang's limits: chunked_prefill_size "
            f"{base.max_num_batched_tokens:,} tokens a step, at most {seqs} running requests "
            f"(SGLang's defaults unless set), schedule policy {prepared.engine.schedule_policy} "
            "(arrival order), recompute preemption when the KV pool is full"
        )
    if rule == "trtllm":
        return (
            f"scheduled as vLLM V1 schedules, within TensorRT-LLM's limits: max_num_tokens "
            f"{base.max_num_batched_tokens:,} tokens a step, at most {seqs} sequences "
            "(max_batch_size); its own scheduler admits a request only when its whole answer "
            "fits and never preempts, where this one preempts when the pool is full"
        )
    return (
        f"scheduled as vLLM V1 schedules: chunked prefill within max_num_batched_tokens "
        f"{base.max_num_batched_tokens:,}, at most {seqs} sequences (the defaults of "
        f"{VLLM_ENTRYPOINTS[prepared.engine.entrypoint]} for this GPU unless set), recompute "
        "preemption when the KV pool is full"
    )


def capacity_json(result: CapacityResult) -> dict[str, Any]:
    data = dataclasses.asdict(result)
    data["notes"] = list(result.notes)
    for name in ("baseline", "speculative"):
        if data[name] is not None:
            data[name]["sla_breaches"] = list(data[name]["sla_breaches"])
    return data
