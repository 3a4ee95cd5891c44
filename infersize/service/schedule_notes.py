"""The notes `infersize schedule` prints under its table: how K was chosen, where the table
stops being priced, why K rises where it does, whether the schedule is worth what the engine
charges for one, and how the engine reads what config holds."""

from __future__ import annotations

import itertools
from dataclasses import field

import numpy as np

from infersize.core.arrays import FloatArray, floats
from infersize.core.confidence import low_confidence_reason, moe_decode_unvalidated
from infersize.core.evaluate import Evaluation
from infersize.core.latency import experts_read
from infersize.core.schedule import MARGIN, Range, ranges_of
from infersize.record import record
from infersize.service.request import Prepared
from infersize.service.schedule_engines import (
    RUNNING_SETTING,
    VLLM_COST_BATCHES,
    VLLM_COST_SOURCE,
    VLLM_COST_TPOT,
    reading_notes,
    vllm_cost,
)


@record
class Choice:
    """What the schedule was chosen from and what it is."""

    prepared: Prepared
    family: str
    most: int  # the largest batch the table covers
    top: int  # batches 1..top are priced (every K fits); 0: not even batch 1
    ranges: list[Range]  # the schedule, row indices of batches 1..top
    static: int
    before: list[Range] = field(default_factory=list)  # before the engine's own rules
    ev: Evaluation | None = None  # the evaluation over batches 1..most


def describe(ranges: list[Range], most: int) -> str:
    """'K=3 at 1-7, 5 at 8-99' (the last range running on to `most`)."""
    parts = []
    for i, r in enumerate(ranges):
        last = most if i == len(ranges) - 1 else r.stop
        parts.append(f"{'K=' if i == 0 else ''}{r.k} at {r.start + 1}-{last:,}")
    return ", ".join(parts)


def worth_emitting(choice: Choice, gain: FloatArray) -> bool:
    """Whether a schedule of several ranges beats the static K by more than running with a
    schedule costs the engine (vLLM: the measured cost at each batch; TensorRT-LLM, with none
    measured: the margin); SGLang cannot run one."""
    if len(choice.ranges) < 2 or choice.family == "sglang":
        return False
    if choice.family == "vllm":
        return bool(np.any(gain > vllm_cost(floats(np.arange(1, choice.top + 1)))))
    return bool(np.max(gain) > MARGIN)


def schedule_notes(choice: Choice, gain: FloatArray | None, scheduled: bool) -> tuple[str, ...]:
    notes = _acceptance(choice.prepared)
    if gain is None:
        return (*notes, _nothing(choice))
    notes += [_how(choice), *_beyond(choice), *_rises(choice), *_engine_rules(choice)]
    notes += [_decision(choice, gain, scheduled), *reading_notes(choice.family, scheduled)]
    return (*notes, *_confidence(choice))


def _acceptance(prepared: Prepared) -> list[str]:
    source = prepared.acceptance
    if source is None:
        return []
    return [f"α {prepared.alpha:.3f} is {source.detail}; give --acceptance-rate to use your own"]


def _nothing(choice: Choice) -> str:
    dep = choice.prepared.deployment
    if dep.support.level == "unsupported":
        return f"{dep.support.reason}: nothing to schedule"
    return (
        f"batch 1 does not fit in memory at context {choice.prepared.request.context_length:,}"
        " at any K: nothing to schedule"
    )


def _how(choice: Choice) -> str:
    return (
        f"K per batch: the smallest K within {MARGIN:.0%} of the best K's speedup there and no "
        f"slower than the static K={choice.static}, the one K of the highest mean log speedup "
        f"over batches 1-{choice.top:,} (each doubling of the batch weighted alike); a range "
        "whose neighbour's K is within the margin at each of its batches takes that K, so the "
        f"table does not switch where switching gains less than {MARGIN:.0%}, which is inside "
        "the step model's error on measured speedups (-3.2 % and +1.3 % on vLLM's released runs)"
    )


def _beyond(choice: Choice) -> list[str]:
    if choice.top >= choice.most:
        return []
    context = choice.prepared.request.context_length
    return [
        f"from batch {choice.top + 1:,} not every K's KV cache fits at context {context:,}: the "
        f"table is priced over batches 1-{choice.top:,}, and its last range runs on to "
        f"{choice.most:,} (the engine's {RUNNING_SETTING[choice.family]}), batches it reaches "
        "only at shorter contexts"
    ]


def _rises(choice: Choice) -> list[str]:
    """Why K rises with the batch where it does (the step model's reason)."""
    notes = []
    target = choice.prepared.deployment.target.model
    ranges = choice.before or choice.ranges  # the model's schedule, before an engine's rules
    for a, b in itertools.pairwise(ranges):
        if b.k <= a.k:
            continue
        first, at = a.start + 1, b.start + 1
        lead = f"K rises from {a.k} to {b.k} at batch {at:,}: "
        if target.num_experts and target.num_experts_per_tok:
            k, e = target.num_experts_per_tok, target.num_experts
            read = experts_read(k, e, floats([first, first * (b.k + 1), at, at * (b.k + 1)]))
            notes.append(
                f"{lead}{target.id} routes each token to {k} of {e} experts a layer, and a "
                f"step reads more of them the more tokens it holds: verifying {b.k + 1} tokens "
                f"a sequence reads {read[1]:.0%} of a layer's experts at batch {first:,} "
                f"against {read[0]:.0%} for one token, {read[3]:.0%} against {read[2]:.0%} at "
                f"batch {at:,}; the more a plain step already reads, the less a longer draft adds"
            )
        elif choice.ev is not None:
            cost = np.broadcast_to(choice.ev.speed.step_cost, choice.ev.fits_k.shape)
            notes.append(
                f"{lead}the step model prices a step verifying {b.k + 1} tokens a sequence at "
                f"{cost[b.start, b.k - 1]:.2f} plain steps there, {cost[a.start, b.k - 1]:.2f} "
                f"at batch {first:,}"
            )
    return notes


def _engine_rules(choice: Choice) -> list[str]:
    if not choice.before or choice.before == choice.ranges:
        return []
    return [
        "TensorRT-LLM's smallest batch key must map to max_draft_len, so no later range runs "
        f"a larger K than the first: {describe(choice.before, choice.most)} became "
        f"{describe(choice.ranges, choice.most)}"
    ]


def _decision(choice: Choice, gain: FloatArray, scheduled: bool) -> str:
    """Whether config switches K, and why."""
    k = choice.ranges[0].k
    if len(choice.ranges) == 1:
        if k == 0:
            return (
                f"no K beats plain decoding by {MARGIN:.0%} at any batch: serve without "
                "speculation (config is null)"
            )
        return f"one K serves every batch: K={k} at 1-{choice.most:,}, no schedule needed"
    row = int(np.argmax(gain))
    most = f"{gain[row]:.1%} (batch {row + 1:,})"
    switch = f"the schedule ({describe(choice.ranges, choice.most)}) beats the static K"
    if choice.family == "sglang":
        return f"a switch by batch size would run {switch}={choice.static} by up to {most}"
    if choice.family == "trtllm":
        return (
            "no public measurement says what running with draft_len_schedule costs TensorRT-LLM"
            f" (it captures CUDA graphs at the schedule's keys too): {switch}={choice.static} "
            + (
                f"by up to {most}, more than the {MARGIN:.0%} margin"
                if scheduled
                else f"by at most {most}, within the {MARGIN:.0%} margin: not worth emitting, "
                f"config runs K={choice.static} at every batch"
            )
        )
    return _vllm_decision(choice, gain, switch, scheduled)


def _vllm_decision(choice: Choice, gain: FloatArray, switch: str, scheduled: bool) -> str:
    batches = floats(np.arange(1, choice.top + 1))
    cost = vllm_cost(batches)
    low, high = VLLM_COST_TPOT
    measured = (
        f"vLLM with a schedule costs {low:.1%}-{high:.1%} TPOT even at K = 0 "
        f"({VLLM_COST_BATCHES[0]:.0f} to {VLLM_COST_BATCHES[1]:.0f} concurrent requests; V1 "
        f"runner, whose full CUDA graphs a schedule forces down to piecewise ones: "
        f"{VLLM_COST_SOURCE}), interpolated on the log batch axis here"
    )
    if not scheduled:
        row = int(np.argmax(gain))
        return (
            f"{measured}; {switch}={choice.static} by at most {gain[row]:.1%} (batch "
            f"{row + 1:,}, where a schedule costs {cost[row]:.1%}), never by what it costs: not "
            f"worth emitting, config runs K={choice.static} at every batch"
        )
    runs = [r for r in ranges_of(np.asarray(gain > cost, dtype=np.int64)) if r.k]
    where = ", ".join(f"{r.start + 1:,}-{r.stop:,}" for r in runs)
    return (
        f"{measured}; {switch}={choice.static} by more than that at batches {where} (up to "
        f"{gain.max():.1%}), and costs it where it gains less: it pays where your traffic runs "
        "at those batches"
    )


def _confidence(choice: Choice) -> list[str]:
    target = choice.prepared.deployment.target.model
    e, k = target.num_experts or 0, target.num_experts_per_tok or 0
    low = moe_decode_unvalidated(e, k, floats(np.arange(1, choice.top + 1)))
    if not low.any():
        return []
    last = int(np.flatnonzero(low)[-1]) + 1
    return [f"batches 1-{last:,}: {low_confidence_reason(e, k, last)}"]
