"""What a capacity answer rests on, said beside it: where α came from, the K chosen, the
scheduler's limits, what TPOT and ITL mean, requests longer than the model holds, latency
floors, the interval and the request count; and how far the answer can be trusted
(`confidence`)."""

from __future__ import annotations

from collections.abc import Sequence

from infersize.core.confidence import HIGH, LOW, moe_decode_unvalidated
from infersize.core.engine_constants import VLLM_ENTRYPOINTS
from infersize.core.serving.metrics import breaches_allowed
from infersize.service.capacity.answer import ArmResult
from infersize.service.capacity.request import CapacityRequest
from infersize.service.context import max_context_tokens
from infersize.service.request import Prepared
from infersize.service.spec_notes import fusion_note, moe_cost_note

MEDIUM = "medium"
# tail requests beyond a percentile that make it a measurement rather than a guess: p99 of
# 2,000 requests has 20 beyond it
TAIL_REQUESTS = 20


def _acceptance_note(prepared: Prepared) -> str | None:
    if prepared.request.acceptance_rates is not None:
        return "acceptance per position as given; each step's accepted drafts are drawn from it"
    if prepared.acceptance is None:
        return None
    note = f"α {prepared.alpha:.3f} is {prepared.acceptance.detail}"
    if prepared.positions is not None:
        note += (
            f"; measured at K = {prepared.positions}, so no draft past position "
            f"{prepared.positions} is credited"
        )
    return note + "; each step's accepted drafts are drawn from it, position by position"


def _draft_k_note(prepared: Prepared, arms: Sequence[ArmResult]) -> str:
    k = arms[1].draft_k
    choice = "no speculation" if k == 0 else f"K = {k}"
    return (
        f"--draft-k auto: {choice} serves this load best (the mean-field model screened "
        f"K = 1..{prepared.request.max_k}; the simulator chose among its two best and K = 0, "
        "plain decoding)"
    )


def _scheduling_note(prepared: Prepared, arms: Sequence[ArmResult]) -> str:
    """How the arms were scheduled: the engine's rules (core/serving/simulate.py) within its
    limits, under the names its flags give them."""
    base, last = arms[0], arms[-1]
    seqs = f"{base.max_num_seqs:,}"
    if last.max_num_seqs != base.max_num_seqs:
        seqs += f" ({last.max_num_seqs:,} when speculating)"
    engine = prepared.engine
    tokens = f"{base.max_num_batched_tokens:,}"
    if engine.memory_rule == "sglang":
        limits = (
            f"SGLang's rules: chunked_prefill_size {tokens} tokens a step, at most {seqs} "
            f"running requests (SGLang's defaults unless set), schedule policy "
            f"{engine.schedule_policy} (arrival order)"
        )
    elif engine.memory_rule == "trtllm":
        limits = (
            f"TensorRT-LLM's rules: max_num_tokens {tokens} tokens a step, at most {seqs} "
            "sequences (max_batch_size), waiting requests in arrival order"
        )
    else:
        limits = (
            f"vLLM V1's rules: chunked prefill within max_num_batched_tokens {tokens}, at most "
            f"{seqs} sequences (the defaults of {VLLM_ENTRYPOINTS[engine.entrypoint]} for this "
            "GPU unless set)"
        )
    if not engine.mixed_prefill:
        prefill = "prompts run in prefill steps of their own while the decodes wait"
    elif engine.memory_rule == "trtllm":
        prefill = "prompts run beside the decodes in one step (in-flight batching)"
    else:
        prefill = "prompts' chunks run beside the decodes"
    admission = (
        "a request is admitted only when its whole answer's KV fits beside the running "
        "requests', never preempting"
        if engine.admission == "whole-request"
        else "a request is admitted when its first chunk fits, and a full KV pool preempts the "
        "latest admitted, which recomputes"
    )
    return f"scheduled by {limits}; {prefill}; {admission}"


def _floor_notes(arms: Sequence[ArmResult], names: Sequence[str]) -> list[str]:
    """An arm whose lone request uses NEAR_FLOOR_SHARE of a term is near (or at) its latency
    floor: say so, and what lifts it; a fleet of four digits always says where its floor is."""
    notes = []
    for name, arm in zip(names, arms, strict=False):
        floor = arm.latency_floor
        if floor is None:
            continue
        if arm.at_floor:
            where = "at" if floor.at_floor else "near"
            remedy = arm.floor_remedy or "no larger TP or faster GPU in the catalog clears it"
            notes.append(
                f"{name} is {where} its latency floor: one request alone uses {floor.share:.0%} "
                f"of {floor.term}, so small changes move its capacity a lot; {remedy}"
            )
        elif arm.huge_fleet and arm.fleet is not None:
            notes.append(
                f"{name} needs {arm.fleet.gpus:,} GPUs: one request alone uses {floor.share:.0%} "
                f"of {floor.term}, far from its floor, so the load itself is what is large"
            )
    return notes


def _requests_note(req: CapacityRequest) -> str | None:
    """Too few requests for the percentile asked: its tail holds a handful of requests."""
    if req.sla is None:
        return None
    n = req.traffic.requests
    for term in req.sla.terms:
        allowed = breaches_allowed(n, term.statistic)
        if allowed is not None and allowed + 1 < TAIL_REQUESTS:
            share = 1.0 - float(term.statistic[1:]) / 100.0
            needed = round(TAIL_REQUESTS / share)
            return (
                f"{n:,} requests leave {allowed + 1} beyond {term.metric}:{term.statistic}: the "
                f"answer moves with the draws; use --requests {needed:,} or more"
            )
    return None


def capacity_notes(
    prepared: Prepared, req: CapacityRequest, arms: Sequence[ArmResult]
) -> tuple[str, ...]:
    dep, notes = prepared.deployment, []
    names = ("plain decoding", "speculation")
    if dep.draft is not None:
        notes.append(_acceptance_note(prepared))
        if req.draft_k_auto and len(arms) > 1:
            notes.append(_draft_k_note(prepared, arms))
    notes.append(_scheduling_note(prepared, arms))
    if req.engine_by_default:
        notes.append(
            f"engine {prepared.engine.name}: capacity's default (--engine sglang, trtllm or "
            "plain to change it)"
        )
    if req.sla is not None and req.replications > 1:
        notes.append(
            f"capacity is the mean of {req.replications} searches under independent draws; "
            "the range beside it holds one such search 95 times in 100"
        )
    notes.append(_requests_note(req))
    notes.append(fusion_note(dep))
    notes.append(moe_cost_note(dep))
    notes.extend(_floor_notes(arms, names))
    notes.append(
        "TPOT is per request, (e2e - TTFT) / (output tokens - 1); ITL the gaps between streamed "
        "chunks: with speculation a chunk carries every token a step accepts, so ITL > TPOT"
    )
    traffic = req.traffic
    longest = max(a + b for a, b in zip(traffic.input_tokens, traffic.output_tokens, strict=True))
    for side in (dep.target, dep.draft):  # the draft holds every request's tokens too
        limit = None if side is None else max_context_tokens(side.model)
        if side is not None and limit is not None and longest > limit:
            notes.append(
                f"requests of up to {longest:,} tokens are longer than {side.model.id}'s "
                f"max_position_embeddings ({limit:,})"
            )
    return tuple(note for note in notes if note)


def capacity_confidence(prepared: Prepared, arms: Sequence[ArmResult]) -> tuple[str, str]:
    """high, medium (an engine whose scheduler the simulator approximates) or low (a MoE
    target decoding batches whose tokens select fewer experts than a layer holds: the
    roofline's weakest case, core/confidence.py), with the reason."""
    model = prepared.deployment.target.model
    experts, per_token = model.num_experts or 0, model.num_experts_per_tok or 0
    batch = max(round(arm.mean_running_sequences) for arm in arms)
    if bool(moe_decode_unvalidated(experts, per_token, max(batch, 1))):
        return LOW, (
            f"a MoE decode step at about {max(batch, 1)} running sequences selects at most "
            f"{min(max(batch, 1) * per_token, experts)} of {experts} experts a layer, which "
            "the step model prices by bandwidth and one fixed cost per MoE layer, which measured "
            "models do not share (docs/calibration.md): treat the speeds and the GPUs as "
            "estimates either way"
        )
    rule = prepared.engine.memory_rule
    if rule in ("sglang", "trtllm"):
        engine = "SGLang" if rule == "sglang" else "TensorRT-LLM"
        return MEDIUM, (
            f"{engine}'s pool, limits and scheduling rules are its own, and few public "
            "serving measurements of it check the simulator"
        )
    return HIGH, "a dense or saturated MoE step under vLLM's scheduler, as checked in calibration"
