"""The notes `infersize spec` prints under its numbers: what the user should know about the
names they gave and the model that produced the numbers."""

from __future__ import annotations

import math

from infersize.catalog.store import Catalog
from infersize.core.confidence import LOW, low_confidence_reason
from infersize.core.deployment import draft_is_smaller
from infersize.core.engine_constants import SGLANG_MOE_LAYER_FITTED_ON, SGLANG_MOE_POOLED_OVER
from infersize.core.memory import GIB
from infersize.core.speedup import SpeedupModel
from infersize.service.context import max_context_tokens
from infersize.service.resolve import Deployment, DeploymentRequest
from infersize.service.spec_result import SpecResult

WARNING = "warning: "  # a note the panel prints as a warning


def _alias_note(req: DeploymentRequest, catalog: Catalog, dep: Deployment) -> list[str]:
    if not catalog.gpus.is_alias(req.gpu):
        return []
    asked = req.gpu.strip().lower()
    others = sorted(g for g in catalog.gpus.records if g != dep.gpu.id and asked in g)
    also = f"; other variants: {', '.join(others)}" if others else ""
    return [f"'{req.gpu}' means the {dep.gpu.name}{also}"]


def _variant_notes(req: DeploymentRequest, catalog: Catalog, dep: Deployment) -> list[str]:
    """Say which entry a pasted Hub id (another variant, or without its organisation) became."""
    notes = []
    for asked, side in ((req.target, dep.target), (req.draft, dep.draft)):
        if side is None or asked is None:
            continue
        model = side.model
        from_catalog = catalog.models.records.get(model.id) == model  # not a checkpoint read
        if from_catalog and asked.strip().lower() not in catalog.models.names:
            notes.append(
                f"'{asked}' is sized as {model.id} ({model.hf_repo}): instruct, chat and base "
                "variants share its architecture"
            )
    return notes


def _big_draft_warning(dep: Deployment) -> str:
    assert dep.draft is not None
    target, draft = dep.target, dep.draft
    return (
        f"{WARNING}draft {draft.model.id} ({draft.counts.total / 1e9:.2f} B parameters) is at "
        f"least as big as its target {target.model.id} ({target.counts.total / 1e9:.2f} B): "
        "a draft pays only when a pass costs much less than the target's"
    )


def _sglang_fraction_note(result: SpecResult) -> str | None:
    """SGLang budgets the weights and its pool in mem_fraction_static of the memory free at
    start; where the target's weights alone exceed it, it refuses to start
    (ModelRunner.init_memory_pool @0.5.6, core/sglang_pool.py)."""
    fraction = result.mem_fraction_static
    if fraction is None or result.max_total_num_tokens != 0:
        return None
    free = result.gpu.memory_bytes - (result.non_torch_bytes or 0)
    weights = result.target.weights_bytes
    return (
        f"SGLang's mem_fraction_static {fraction:g} of the {free / GIB:.2f} GiB free at start "
        f"holds {fraction * free / GIB:.2f} GiB per GPU, less than the target's "
        f'{weights / GIB:.2f} GiB of weights: SGLang refuses to start ("Not enough memory. '
        'Please try to increase --mem-fraction-static"); from --mem-fraction-static '
        f"{math.ceil(weights / free * 1000) / 1000:g} it keeps a pool"
    )


def fusion_note(dep: Deployment) -> str | None:
    """Where the engine fuses the target's tensor-parallel all-reduces (core/allreduce.py);
    `spec` and `capacity` print it."""
    fusion = dep.engine.allreduce_fusion
    if fusion is None or not float(dep.target.numbers.cost.fused_allreduce):
        return None
    return (
        f"{dep.engine.name} fuses {dep.target.model.id}'s tensor-parallel all-reduces with the "
        f"residual add and RMSNorm on {dep.gpu.name}: {fusion.latency_s * 1e6:g} us each in "
        f"passes of up to {fusion.max_tokens:,} tokens, where an unfused one is priced at "
        f"{dep.engine.allreduce_latency_s * 1e6:g} us"
    )


def moe_cost_note(dep: Deployment) -> str | None:
    """How the engine prices the fixed cost of the target's MoE layers: its architecture's own
    (fitted to public runs of it) or the pooled one; `spec` and `capacity` print it."""
    model, engine = dep.target.model, dep.engine
    if model.moe is None:
        return None
    own = dict(engine.moe_layer_overhead_by_architecture)
    fitted = ", ".join(SGLANG_MOE_POOLED_OVER)
    pooled = f"the cost pooled over SGLang's public runs of {fitted} on 8 x B200"
    if model.architecture in own:
        runs = SGLANG_MOE_LAYER_FITTED_ON.get(model.architecture, "public runs of it")
        source = f"{model.architecture}'s own, fitted to {runs}"
    elif own:
        source = f"{pooled} (no run of {model.architecture} set its own)"
    else:
        source = f"{pooled} ({engine.name} takes it for every architecture)"
    layers = int(float(dep.target.numbers.cost.moe_layers))
    cost_us = engine.moe_layer_cost_s(model.architecture) * 1e6
    return (
        f"{engine.name} prices each of {model.id}'s {layers} MoE layers at a fixed {cost_us:g} us "
        f"a pass beside the expert weights it reads: {source}"
    )


def spec_notes(
    req: DeploymentRequest,
    context_length: int,
    catalog: Catalog,
    dep: Deployment,
    model: SpeedupModel,
    result: SpecResult,
) -> tuple[str, ...]:
    notes = _alias_note(req, catalog, dep) + _variant_notes(req, catalog, dep)
    for side in (dep.target, dep.draft):
        limit = None if side is None else max_context_tokens(side.model)
        if side and limit is not None and context_length > limit:
            notes.append(
                f"context {context_length} exceeds {side.model.id}'s "
                f"max_position_embeddings ({limit})"
            )
    target, draft = dep.target.model, dep.draft.model if dep.draft else None
    if draft and draft.tokenizer_family != target.tokenizer_family and not draft.is_speculator_head:
        notes.append(
            f"{draft.id} ({draft.tokenizer_family} tokenizer) does not share "
            f"{target.id}'s tokenizer ({target.tokenizer_family}): the speedup "
            "assumes an engine that drafts across tokenizers"
        )
    if draft and not draft.is_speculator_head and not draft_is_smaller(target, draft):
        notes.insert(0, _big_draft_warning(dep))
    if result.confidence == LOW and result.speedup is not None:
        notes.append(
            low_confidence_reason(
                target.num_experts or 0, target.num_experts_per_tok or 0, result.batch_size
            )
        )
    if draft and model.note:
        notes.append(model.note)
    if (fraction_note := _sglang_fraction_note(result)) is not None:
        notes.append(fraction_note)
    if (fused := fusion_note(dep)) is not None:
        notes.append(fused)
    if (moe := moe_cost_note(dep)) is not None:
        notes.append(moe)
    if result.verdict == "OOM" and (result.kv_pool_bytes or 0) > 0:
        notes.append(
            f"the batch needs more KV cache than vLLM's pool holds (it fits "
            f"{result.max_concurrent_sequences or 0:.1f} sequences of this length): vLLM would "
            "queue or preempt sequences rather than fail"
        )
    return tuple(notes)
