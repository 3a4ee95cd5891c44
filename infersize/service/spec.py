"""`infersize spec`: one deployment, resolved from names and evaluated at one cell, as a typed
result that the JSON output and the terminal panel both render from."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from infersize.catalog.records import Model
from infersize.catalog.store import Catalog
from infersize.core.arrays import FloatArray
from infersize.core.confidence import decode_confidence
from infersize.core.engines import Engine
from infersize.core.evaluate import Evaluation, Point
from infersize.core.fit import PoolMemory
from infersize.core.methods import method_of
from infersize.service.fit_limits import Ask, fit_limits
from infersize.service.request import Prepared, SpecRequest, prepare
from infersize.service.resolve import Deployment, ssm_dtype_name
from infersize.service.spec_notes import spec_notes
from infersize.service.spec_result import GpuResult, SpecResult, side_result


def _speed_fields(prepared: Prepared, ev: Evaluation, at_k: Point, fits: bool) -> dict[str, Any]:
    """What only a deployment with a draft has: γ, E, the best K, break-even, crossover."""
    req = prepared.request
    index = req.draft_k - 1
    best = ev.optimal if bool(ev.fits_any) else None
    break_even = ev.break_even_alpha()
    least = int(np.nanargmin(break_even)) if not np.isnan(break_even).all() else None
    break_even_e = ev.break_even_expected_tokens() if ev.model.reads_expected_tokens else None
    return {
        "latency_ratio": _number(at_k.speed.latency_ratio),  # None: drafting is free (n-gram)
        "latency_ratio_source": "given" if req.latency_ratio is not None else "roofline",
        "expected_tokens_per_step": float(at_k.speed.expected_tokens),
        "speedup": float(at_k.speed.speedup) if fits else None,
        "optimal_k": None if best is None else int(best.k),
        "speedup_at_optimal_k": None if best is None else float(best.speed.speedup),
        "break_even_acceptance_rate": _number(break_even[..., index]),
        "break_even_expected_tokens_per_step": None
        if break_even_e is None
        else _number(np.broadcast_to(break_even_e, ev.speed.speedup.shape)[..., index]),
        "min_break_even_acceptance_rate": None if least is None else _number(break_even[least]),
        "min_break_even_draft_k": None if least is None else int(ev.ks[least]),
        "crossover_batch_size": prepared.crossover_batch(),
    }


def _number(value: FloatArray | float) -> float | None:
    number = float(value)
    return number if math.isfinite(number) else None


def _pool_fields(dep: Deployment, at_k: Point) -> dict[str, Any]:
    """The pool as the engine logs it, and the settings that sized it."""
    pool, engine = at_k.memory.pool, dep.engine
    if pool is None:
        return {}
    common = {
        "engine_release": engine.release,
        "kv_pool_bytes": int(pool.kv_pool),
        "kv_pool_tokens": int(pool.kv_pool_tokens),
        "max_concurrent_sequences": float(pool.max_concurrent_sequences),
        "activation_peak_bytes": int(pool.activation_peak),
        "non_torch_bytes": int(pool.non_torch),
    }
    tokens, seqs = int(dep.numbers.profile_tokens), int(dep.numbers.profile_seqs)
    if engine.memory_rule == "sglang":
        return common | _sglang_fields(pool, engine, tokens, _hybrid(dep))
    if engine.memory_rule == "trtllm":
        return common | {
            "max_tokens_in_paged_kv_cache": int(pool.kv_pool_tokens),
            "kv_cache_free_gpu_memory_fraction": engine.free_gpu_memory_fraction,
            "max_num_tokens": tokens,
            "max_batch_size": seqs,
        }
    return common | {
        "gpu_memory_utilization": engine.gpu_memory_utilization,
        "vllm_release": engine.release,
        "cuda_graph_bytes": int(pool.cuda_graphs),
        "speculative_peak_bytes": int(pool.speculative_peak),
        "vllm_entrypoint": engine.entrypoint,
        "max_num_batched_tokens": tokens,
        "max_num_seqs": seqs,
        "vllm_sampler": engine.sampler,
    }


def _hybrid(dep: Deployment) -> Model:
    """The side whose linear-attention states fill a state pool: the target, unless only the
    drafter has them."""
    target = dep.target.model
    if target.linear_attention is None and dep.draft is not None:
        return dep.draft.model
    return target


def _sglang_fields(
    pool: PoolMemory, engine: Engine, chunked_prefill: int, hybrid: Model
) -> dict[str, Any]:
    """SGLang's pool as it logs it; the state pool where a hybrid model keeps one, and the
    dtype of its states."""
    slots = math.inf if pool.state_slots is None else float(pool.state_slots)
    states = math.isfinite(slots)
    return {
        "max_total_num_tokens": int(pool.kv_pool_tokens),
        "mem_fraction_static": None if pool.mem_fraction is None else float(pool.mem_fraction),
        "chunked_prefill_size": chunked_prefill,
        "max_running_requests": None if pool.max_running is None else int(pool.max_running),
        "max_mamba_cache_size": int(slots) if states else None,
        "mamba_pool_bytes": int(pool.state_pool or 0) if states else None,
        "mamba_ssm_dtype": ssm_dtype_name(engine, hybrid) if states else None,
    }


def _throughput_fields(at_k: Point, fits: bool) -> dict[str, Any]:
    """Decode throughput, latency and cost: only for a deployment that can run."""
    names = (
        "baseline_tokens_per_s",
        "speculative_tokens_per_s",
        "baseline_ms_per_token",
        "speculative_ms_per_token",
        "usd_per_mtok",
    )
    return {name: _number(getattr(at_k, name)) if fits else None for name in names}


def _memory_fields(dep: Deployment, at_k: Point) -> dict[str, Any]:
    memory = at_k.memory
    return {
        "target": side_result(dep.target, memory.target_kv, memory.target_workspace),
        "draft": None
        if dep.draft is None
        else side_result(dep.draft, memory.draft_kv, memory.draft_workspace),
        "overhead_bytes": int(memory.overhead),
        "combined_bytes": int(memory.combined),
        "gpu": GpuResult(dep.gpu.id, dep.gpu.name, dep.gpu.memory_bytes, dep.target.tp),
        "engine": dep.engine.name,
        "budget_bytes": int(memory.budget),
        "utilization": float(memory.utilization),
        # a precision the GPU cannot run never fits, whatever the memory says
        "fits": bool(memory.fits) and dep.support.level != "unsupported",
        "verdict": "unsupported" if dep.support.level == "unsupported" else str(memory.verdict),
        "support": dep.support.level,
        "support_reason": None
        if dep.support.level == "native" and not dep.support.unconfirmed
        else dep.support.reason,
    }


def run_spec(req: SpecRequest, catalog: Catalog) -> SpecResult:
    prepared = prepare(req, catalog)
    dep, model, alpha = prepared.deployment, prepared.model, prepared.alpha
    acceptance = prepared.acceptance
    ev = prepared.evaluate()
    at_k = ev.at(req.draft_k - 1 if dep.draft else 0)
    memory = _memory_fields(dep, at_k)
    speed: dict[str, Any] = {
        "expected_tokens_per_step": 1.0,
        "speedup": 1.0 if memory["fits"] else None,
    }
    if dep.draft is not None:
        speed = _speed_fields(prepared, ev, at_k, memory["fits"])
    ask = Ask(req.context_length, req.batch_size, req.draft_k if dep.draft else 0, prepared.tree)
    price = float(dep.numbers.price_usd_per_hour)
    result = SpecResult(
        **memory,
        **_pool_fields(dep, at_k),
        context_length=req.context_length,
        batch_size=req.batch_size,
        input_tokens=req.decode_lengths[0] if req.decode_lengths else None,
        output_tokens=req.decode_lengths[1] if req.decode_lengths else None,
        kv_dtype=dep.kv_dtype.id,
        acceptance_rate=alpha if dep.draft else req.acceptance_rate,
        acceptance_source=acceptance.source if acceptance else "given",
        acceptance_rates=prepared.profile if dep.draft else None,
        acceptance_positions=prepared.positions if dep.draft else None,
        draft_k=req.draft_k if dep.draft else None,
        eagle_topk=prepared.tree.topk if dep.draft else None,
        num_draft_tokens=int(prepared.tree.verify_tokens(req.draft_k)) if dep.draft else None,
        speedup_model=model.name,
        method=None if dep.draft is None else method_of(dep.draft.model).name,
        **speed,
        **dataclasses.asdict(fit_limits(req.deployment, dep, catalog, ask)),
        **_throughput_fields(at_k, memory["fits"]),
        price_usd_per_hour=None if math.isnan(price) else price,
        confidence=str(decode_confidence(*_experts(dep.target.model), req.batch_size)),
    )
    notes = spec_notes(req.deployment, req.context_length, catalog, dep, model, result)
    notes = (*_lead_notes(req, dep, result, acceptance, alpha), *notes)
    notes = tuple(sorted(notes, key=lambda note: not note.startswith("warning: ")))  # first
    return dataclasses.replace(result, notes=notes)


def _experts(model: Model) -> tuple[int, int]:
    """A target's routed experts per layer and experts per token (0, 0: dense)."""
    return model.num_experts or 0, model.num_experts_per_tok or 0


def _lead_notes(
    req: SpecRequest, dep: Deployment, result: SpecResult, acceptance: Any, alpha: float
) -> tuple[str, ...]:
    """The notes that explain this answer's inputs: the drafter --method picked, the profile,
    where α came from."""
    notes: tuple[str, ...] = ()
    if dep.draft is None:
        return notes
    if req.deployment.method is not None and req.deployment.draft is None:
        head = dep.draft.model
        picked = (
            "n-gram prompt lookup (no weights, on the CPU)"
            if head.speculator == "ngram"
            else f"{head.id} ({head.hf_repo}), the catalog's published drafter for "
            f"{dep.target.model.id}"
        )
        notes = (f"--method {req.deployment.method}: drafting with {picked}",)
    if req.acceptance_rates is not None:
        return (*_profile_notes(req.acceptance_rates, req.draft_k, result), *notes)
    if req.acceptance_length is not None:
        shape = "chain" if (result.eagle_topk or 1) == 1 else "tree"
        why = (
            f"α {alpha:.3f} is the i.i.d. rate at which this {shape} accepts "
            f"{req.acceptance_length:g} tokens a step at K={req.draft_k} (--acceptance-length)"
        )
        return (why, *notes)
    if acceptance is not None:
        why = f"α {alpha:.3f} is {acceptance.detail}; give --acceptance-rate to use your own"
        return (why, *_positions_notes(result), *notes)
    return (*_positions_notes(result), *notes)


def _positions_notes(result: SpecResult) -> tuple[str, ...]:
    """Say that a figure measured at one K was not extrapolated past it."""
    m = result.acceptance_positions
    if m is None:
        return ()
    if result.acceptance_rates is not None and result.acceptance_source != "given":
        return (
            f"acceptance published per position up to K={m}: positions past {m} are not "
            f"credited, so the K search stops at {m}",
        )
    why = (
        "--acceptance-positions"
        if result.acceptance_source == "given"
        else f"no per-position acceptance of {result.method} heads is published to build on"
    )
    return (
        f"α {result.acceptance_rate:.3f} was measured at K={m}: positions past {m} are not "
        f"credited ({why}), so the K search stops at {m}; give --acceptance-rates to price more",
    )


def _profile_notes(rates: tuple[float, ...], draft_k: int, result: SpecResult) -> tuple[str, ...]:
    """What a per-position profile means for this answer, and where it was extrapolated."""
    notes = [
        f"per-position acceptance {', '.join(f'{r:g}' for r in rates)}: mean acceptance length "
        f"{result.expected_tokens_per_step:.2f} at K={draft_k}; α {result.acceptance_rate:.3f} "
        "is the i.i.d. rate with the same length"
    ]
    furthest = max(draft_k, result.optimal_k or 0)
    if furthest > len(rates):
        notes.append(
            f"positions {len(rates) + 1}..{furthest} are past the profile: extrapolated with "
            "its last conditional acceptance (r_i / r_(i-1))"
        )
    return tuple(notes)


def spec_json(result: SpecResult) -> dict[str, Any]:
    """The stable JSON object of `spec --json` (sizes in bytes)."""
    data = dataclasses.asdict(result)
    data["notes"] = list(result.notes)
    return data
