"""`infersize spec`: one deployment, resolved from catalog names, as a JSON-ready report."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from infersize.catalog import Catalog, GpuSpec, KvDtype
from infersize.deployment import (
    CROSSOVER_BATCHES,
    Side,
    crossover_batch,
    deployment_memory,
    deployment_speed,
)
from infersize.engines import Engine
from infersize.errors import InfersizeError, ValueRangeError
from infersize.latency import step_time_s
from infersize.optimize import best_k
from infersize.sources import resolve_side
from infersize.speculative import (
    SPEEDUP_MODELS,
    alpha_for_speedup,
    expected_tokens,
)

MAX_K = 256  # far past any useful draft length; bounds the K axis searched


@dataclass(frozen=True)
class SpecRequest:
    target: str
    target_quant: str
    draft: str | None  # None: the target alone
    draft_quant: str
    gpu: str
    context_length: int
    acceptance_rate: float
    draft_k: int
    batch_size: int = 1
    kv_dtype: str = "fp16"
    tp: int = 1
    speedup_model: str = "leviathan"
    latency_ratio: float | None = None
    k_max: int = 16
    price_usd_per_hour: float | None = None
    allow_cross_tokenizer: bool = False


def _finite(name: str, value: float) -> None:
    if not math.isfinite(value):
        raise ValueRangeError(f"{name} must be a finite number, got {value}")


def validate_request(req: SpecRequest) -> None:
    """Range checks of DESIGN §8: one clear message per mistake."""
    _finite("--acceptance-rate", req.acceptance_rate)
    if not 0.0 <= req.acceptance_rate <= 1.0:
        raise ValueRangeError(f"--acceptance-rate must be in [0, 1], got {req.acceptance_rate}")
    if req.draft_k < 1:
        raise ValueRangeError(f"--draft-k must be at least 1, got {req.draft_k}")
    if req.k_max > MAX_K:
        raise ValueRangeError(f"--max-k must be at most {MAX_K}, got {req.k_max}")
    if req.k_max < req.draft_k:
        raise ValueRangeError(f"--max-k ({req.k_max}) must be at least --draft-k ({req.draft_k})")
    if req.context_length < 1:
        raise ValueRangeError(f"--context-length must be at least 1, got {req.context_length}")
    if req.batch_size < 1:
        raise ValueRangeError(f"--batch-size must be at least 1, got {req.batch_size}")
    if req.latency_ratio is not None:
        _finite("--latency-ratio", req.latency_ratio)
        if req.latency_ratio <= 0:
            raise ValueRangeError(f"--latency-ratio must be > 0, got {req.latency_ratio}")
    if req.price_usd_per_hour is not None:
        _finite("--price-usd-per-hour", req.price_usd_per_hour)
        if req.price_usd_per_hour < 0:
            raise ValueRangeError(
                f"--price-usd-per-hour must be >= 0, got {req.price_usd_per_hour}"
            )
    if req.speedup_model not in SPEEDUP_MODELS:
        raise ValueRangeError(
            f"--speedup-model must be one of {', '.join(SPEEDUP_MODELS)}, got '{req.speedup_model}'"
        )


@dataclass
class SpecReport:
    """Everything `spec` prints: `data` holds the stable JSON keys of DESIGN §7."""

    data: dict[str, Any]


def _side_json(side: Side, kv: float, workspace: float) -> dict[str, Any]:
    weights = side.weights.total
    return {
        "model": side.model.id,
        "quant": side.fmt.id,
        "params": side.counts.total,
        "active_params": side.counts.active,
        "weights_bytes": weights,
        "weights_from_files": side.weights_from_files,
        "kv_cache_bytes": int(kv),
        "workspace_bytes": int(workspace),
        "total_bytes": int(weights + kv + workspace),
        "tp": side.tp,
    }


def _optimal_k(
    target: Side, draft: Side, gpu: GpuSpec, engine: Engine, req: SpecRequest
) -> tuple[int | None, float | None]:
    """Best K in 1..k_max that still fits (optimize.best_k, the sweep's code path)."""
    choice = best_k(
        target.numbers,
        draft.numbers,
        gpu.memory_bytes,
        engine,
        req.context_length,
        req.batch_size,
        req.acceptance_rate,
        np.arange(1, req.k_max + 1),
        req.speedup_model,
        req.latency_ratio,
    )
    if not choice.fits:
        return None, None
    return int(choice.k), float(choice.speedup)


def _max_fitting_batch(
    target: Side, draft: Side, gpu: GpuSpec, engine: Engine, req: SpecRequest
) -> int | None:
    """Largest batch of the crossover ladder (1, 2, 4 ... 2048) that still fits at this K: the
    crossover ignores memory, so a planner needs both."""
    fits = deployment_memory(
        target.numbers,
        draft.numbers,
        gpu.memory_bytes,
        engine,
        req.context_length,
        CROSSOVER_BATCHES,
        req.draft_k,
    ).fits
    return int(CROSSOVER_BATCHES[fits].max()) if fits.any() else None


def _crossover_batch(target: Side, draft: Side, engine: Engine, req: SpecRequest) -> int | None:
    """Smallest batch at which the roofline speedup at the given α and K drops below 1."""
    batch = float(
        crossover_batch(
            target.numbers,
            draft.numbers,
            engine,
            req.context_length,
            req.acceptance_rate,
            req.draft_k,
        )
    )
    return None if math.isnan(batch) else int(batch)


def _resolve(req: SpecRequest, catalog: Catalog) -> tuple[GpuSpec, KvDtype, Side, Side | None]:
    gpu = catalog.gpu(req.gpu)
    kv_dtype = catalog.kv_dtype(req.kv_dtype)
    target, _ = resolve_side(req.target, req.target_quant, catalog, kv_dtype, gpu, req.tp)
    draft = None
    if req.draft is not None:  # the draft runs unsplit on rank 0 (vLLM draft_tensor_parallel 1)
        draft, _ = resolve_side(req.draft, req.draft_quant, catalog, kv_dtype, gpu, 1)
        t_tok, d_tok = target.model.tokenizer_family, draft.model.tokenizer_family
        if t_tok != d_tok and not req.allow_cross_tokenizer:
            raise InfersizeError(
                f"draft {draft.model.id} ({d_tok} tokenizer) does not share {target.model.id}'s "
                f"tokenizer ({t_tok}); add --allow-cross-tokenizer to size it anyway"
            )
    return gpu, kv_dtype, target, draft


def _memory_json(
    req: SpecRequest, gpu: GpuSpec, engine: Engine, target: Side, draft: Side | None
) -> dict[str, Any]:
    memory = deployment_memory(
        target.numbers,
        draft.numbers if draft else None,
        gpu.memory_bytes,
        engine,
        req.context_length,
        req.batch_size,
        req.draft_k,
    )
    data: dict[str, Any] = {
        "target": _side_json(target, memory.target_kv, memory.target_workspace),
        "draft": _side_json(draft, memory.draft_kv, memory.draft_workspace) if draft else None,
        "overhead_bytes": int(memory.overhead),
        "combined_bytes": int(memory.combined),
        "gpu": {"id": gpu.id, "name": gpu.name, "memory_bytes": gpu.memory_bytes, "count": req.tp},
        "engine": engine.name,
        "budget_bytes": int(memory.budget),
        "utilization": float(memory.combined / gpu.memory_bytes),
        "fits": bool(memory.fits),
        "verdict": str(memory.verdict),
    }
    if engine.pools_kv:
        concurrency = float(memory.max_concurrent_sequences)
        data.update(
            gpu_memory_utilization=engine.gpu_memory_utilization,
            kv_pool_bytes=int(memory.kv_pool),
            kv_pool_tokens=int(concurrency * req.context_length),
            max_concurrent_sequences=concurrency,
        )
    return data


def _speed_json(
    req: SpecRequest, gpu: GpuSpec, engine: Engine, target: Side, draft: Side
) -> dict[str, Any]:
    speed = deployment_speed(
        target.numbers,
        draft.numbers,
        engine,
        req.context_length,
        req.batch_size,
        req.acceptance_rate,
        req.draft_k,
        req.speedup_model,
        req.latency_ratio,
    )
    gamma = float(speed.latency_ratio)
    best, at_best = _optimal_k(target, draft, gpu, engine, req)
    break_even = float(
        alpha_for_speedup(1.0, req.draft_k, speed.step_cost, req.speedup_model, gamma)
    )
    return {
        "latency_ratio": gamma,
        "latency_ratio_source": "given" if req.latency_ratio is not None else "roofline",
        "expected_tokens_per_step": float(expected_tokens(req.acceptance_rate, req.draft_k)),
        "speedup": float(speed.speedup),
        "optimal_k": best,
        "speedup_at_optimal_k": at_best,
        "break_even_acceptance_rate": None if math.isnan(break_even) else break_even,
        "crossover_batch_size": _crossover_batch(target, draft, engine, req),
        "max_fitting_batch_size": _max_fitting_batch(target, draft, gpu, engine, req),
    }


def run_spec(req: SpecRequest, catalog: Catalog, engine: Engine) -> SpecReport:
    validate_request(req)
    gpu, kv_dtype, target, draft = _resolve(req, catalog)
    data = _memory_json(req, gpu, engine, target, draft)
    data.update(
        context_length=req.context_length,
        batch_size=req.batch_size,
        kv_dtype=kv_dtype.id,
        acceptance_rate=req.acceptance_rate,
        draft_k=req.draft_k if draft else None,
        speedup_model=req.speedup_model,
    )
    if draft is None:
        data.update(
            latency_ratio=None,
            expected_tokens_per_step=1.0,
            speedup=1.0,
            optimal_k=None,
            speedup_at_optimal_k=None,
            break_even_acceptance_rate=None,
            crossover_batch_size=None,
        )
    else:
        data.update(_speed_json(req, gpu, engine, target, draft))
    # decode throughput of the whole deployment at this batch, and per-sequence latency
    baseline_s = float(
        step_time_s(target.numbers.cost, engine, req.batch_size, 1, req.context_length)
    )
    baseline_tps = req.batch_size / baseline_s
    price = req.price_usd_per_hour if req.price_usd_per_hour is not None else gpu.price_usd_per_hour
    spec_tps = baseline_tps * data["speedup"]
    notes = _notes(req, catalog, target, draft, gpu)
    if data["verdict"] == "OOM" and data.get("kv_pool_bytes", 0) > 0:
        notes.append(
            f"the batch needs more KV cache than vLLM's pool holds (it fits "
            f"{data['max_concurrent_sequences']:.1f} sequences of this length): vLLM would queue "
            "or preempt sequences rather than fail"
        )
    data.update(
        baseline_tokens_per_s=baseline_tps,
        speculative_tokens_per_s=spec_tps,
        baseline_ms_per_token=baseline_s * 1e3,
        speculative_ms_per_token=baseline_s * 1e3 / data["speedup"],
        price_usd_per_hour=price,
        usd_per_mtok=None if price is None else price * req.tp / 3600.0 / spec_tps * 1e6,
        notes=notes,
    )
    return SpecReport(data=data)


def _notes(
    req: SpecRequest, catalog: Catalog, target: Side, draft: Side | None, gpu: GpuSpec
) -> list[str]:
    notes = []
    if catalog.is_alias(catalog.gpus, req.gpu):
        others = sorted(
            g for g in catalog.gpus.records if g != gpu.id and req.gpu.strip().lower() in g
        )
        also = f"; other variants: {', '.join(others)}" if others else ""
        notes.append(f"'{req.gpu}' means the {gpu.name}{also}")
    for side in (target, draft):
        if side and req.context_length > side.model.max_position_embeddings:
            notes.append(
                f"context {req.context_length} exceeds {side.model.id}'s "
                f"max_position_embeddings ({side.model.max_position_embeddings})"
            )
    if draft and draft.model.tokenizer_family != target.model.tokenizer_family:
        notes.append(
            f"{draft.model.id} ({draft.model.tokenizer_family} tokenizer) does not share "
            f"{target.model.id}'s tokenizer ({target.model.tokenizer_family}): the speedup "
            "assumes an engine that drafts across tokenizers"
        )
    if req.speedup_model == "linear":
        notes.append(
            "speedup model 'linear' is the seed's printed equation, not Leviathan's "
            "Theorem 3.8; it overstates the speedup"
        )
    return notes
