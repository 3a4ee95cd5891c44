"""`infersize spec`: one deployment, resolved from names and evaluated at one cell, as a typed
result that the JSON output and the terminal panel both render from."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from infersize.catalog.store import Catalog
from infersize.core.engines import get_engine
from infersize.core.evaluate import MAX_K, Evaluation, Point, Workload, evaluate
from infersize.core.limits import crossover_batch, max_fitting_batch_on_ladder
from infersize.core.speedup import get_speedup_model
from infersize.errors import ValueRangeError
from infersize.service.resolve import Deployment, DeploymentRequest, resolve_deployment
from infersize.service.spec_notes import spec_notes
from infersize.service.spec_result import GpuResult, SpecResult, side_result


@dataclass(frozen=True)
class SpecRequest:
    """Everything `infersize spec` is asked, by name. Field names are the flags' names."""

    deployment: DeploymentRequest
    context_length: int = 4096
    acceptance_rate: float = 0.7
    draft_k: int = 4
    batch_size: int = 1
    speedup_model: str = "leviathan"
    latency_ratio: float | None = None
    max_k: int = 16
    engine: str = "plain"
    gpu_memory_utilization: float | None = None
    overhead_gib: float | None = None


def _finite(name: str, value: float) -> None:
    if not math.isfinite(value):
        raise ValueRangeError(name, f"must be a finite number, got {value}")


def _at_least(name: str, value: int, low: int) -> None:
    if value < low:
        raise ValueRangeError(name, f"must be at least {low}, got {value}")


def validate_request(req: SpecRequest) -> None:
    """One clear message per mistake, naming the setting."""
    _finite("acceptance_rate", req.acceptance_rate)
    if not 0.0 <= req.acceptance_rate <= 1.0:
        raise ValueRangeError("acceptance_rate", f"must be in [0, 1], got {req.acceptance_rate}")
    _at_least("draft_k", req.draft_k, 1)
    if req.max_k > MAX_K:
        raise ValueRangeError("max_k", f"must be at most {MAX_K}, got {req.max_k}")
    if req.max_k < req.draft_k:
        raise ValueRangeError(
            "max_k", f"({req.max_k}) must be at least {{draft_k}} ({req.draft_k})"
        )
    _at_least("context_length", req.context_length, 1)
    _at_least("batch_size", req.batch_size, 1)
    if req.latency_ratio is not None:
        _finite("latency_ratio", req.latency_ratio)
        if req.latency_ratio <= 0:
            raise ValueRangeError("latency_ratio", f"must be > 0, got {req.latency_ratio}")
    price = req.deployment.price_usd_per_hour
    if price is not None:
        _finite("price_usd_per_hour", price)
        if price < 0:
            raise ValueRangeError("price_usd_per_hour", f"must be >= 0, got {price}")


def _speed_fields(req: SpecRequest, dep: Deployment, ev: Evaluation, at_k: Point) -> dict[str, Any]:
    """What only a deployment with a draft has: γ, E, the best K, break-even, crossover."""
    index = req.draft_k - 1
    best = ev.optimal if bool(ev.fits_any) else None
    break_even = float(ev.break_even_alpha()[..., index])
    crossover = float(
        crossover_batch(
            dep.numbers, dep.engine, req.context_length, req.acceptance_rate, req.draft_k
        )
    )
    return {
        "latency_ratio": float(at_k.speed.latency_ratio),
        "latency_ratio_source": "given" if req.latency_ratio is not None else "roofline",
        "expected_tokens_per_step": float(at_k.speed.expected_tokens),
        "optimal_k": None if best is None else int(best.k),
        "speedup_at_optimal_k": None if best is None else float(best.speed.speedup),
        "break_even_acceptance_rate": None if math.isnan(break_even) else break_even,
        "crossover_batch_size": None if math.isnan(crossover) else int(crossover),
        "max_fitting_batch_size": max_fitting_batch_on_ladder(
            dep.numbers, dep.engine, req.context_length, req.draft_k
        ),
    }


def _pool_fields(req: SpecRequest, dep: Deployment, at_k: Point) -> dict[str, Any]:
    memory = at_k.memory
    if memory.kv_pool is None or memory.max_concurrent_sequences is None:
        return {}
    concurrency = float(memory.max_concurrent_sequences)
    return {
        "gpu_memory_utilization": dep.engine.gpu_memory_utilization,
        "kv_pool_bytes": int(memory.kv_pool),
        "kv_pool_tokens": int(concurrency * req.context_length),
        "max_concurrent_sequences": concurrency,
    }


def run_spec(req: SpecRequest, catalog: Catalog) -> SpecResult:
    validate_request(req)
    engine = get_engine(req.engine, req.gpu_memory_utilization, req.overhead_gib)
    model = get_speedup_model(req.speedup_model)
    dep = resolve_deployment(req.deployment, catalog, engine)
    work = Workload(
        req.context_length,
        req.batch_size,
        req.acceptance_rate,
        np.arange(1, req.max_k + 1),
        req.latency_ratio,
    )
    ev = evaluate(dep.numbers, engine, model, work)
    at_k = ev.at(req.draft_k - 1 if dep.draft else 0)
    memory = at_k.memory
    speed: dict[str, Any] = {"expected_tokens_per_step": 1.0}
    if dep.draft is not None:
        speed = _speed_fields(req, dep, ev, at_k)
    price = float(dep.numbers.price_usd_per_hour)
    usd = float(at_k.usd_per_mtok)
    result = SpecResult(
        target=side_result(dep.target, memory.target_kv, memory.target_workspace),
        draft=None
        if dep.draft is None
        else side_result(dep.draft, memory.draft_kv, memory.draft_workspace),
        overhead_bytes=int(memory.overhead),
        combined_bytes=int(memory.combined),
        gpu=GpuResult(dep.gpu.id, dep.gpu.name, dep.gpu.memory_bytes, dep.target.tp),
        engine=engine.name,
        budget_bytes=int(memory.budget),
        utilization=float(memory.utilization),
        fits=bool(memory.fits),
        verdict=str(memory.verdict),
        **_pool_fields(req, dep, at_k),
        context_length=req.context_length,
        batch_size=req.batch_size,
        kv_dtype=dep.kv_dtype.id,
        acceptance_rate=req.acceptance_rate,
        draft_k=req.draft_k if dep.draft else None,
        speedup_model=model.name,
        **speed,
        speedup=float(at_k.speed.speedup),
        baseline_tokens_per_s=float(at_k.baseline_tokens_per_s),
        speculative_tokens_per_s=float(at_k.speculative_tokens_per_s),
        baseline_ms_per_token=float(at_k.baseline_ms_per_token),
        speculative_ms_per_token=float(at_k.speculative_ms_per_token),
        price_usd_per_hour=None if math.isnan(price) else price,
        usd_per_mtok=None if math.isnan(usd) else usd,
    )
    notes = spec_notes(req.deployment, req.context_length, catalog, dep, model, result)
    return dataclasses.replace(result, notes=notes)


def spec_json(result: SpecResult) -> dict[str, Any]:
    """The stable JSON object of `spec --json` (sizes in bytes)."""
    data = dataclasses.asdict(result)
    data["notes"] = list(result.notes)
    return data
