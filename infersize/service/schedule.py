"""`infersize schedule`: the draft length K for each batch size, as engines switch it at run
time, from the same evaluation as `spec` (`Prepared.evaluate` over every batch 1..B), with the
engine's configuration that runs it and what it gains over one static K."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from infersize.catalog.store import Catalog
from infersize.core.arrays import FloatArray, IntArray, floats
from infersize.core.engines import get_engine
from infersize.core.evaluate import Evaluation
from infersize.core.methods import method_of
from infersize.core.schedule import (
    Range,
    batch_weights,
    highest_first,
    schedule,
    speedup_of,
    with_plain,
)
from infersize.core.serving.replica import running_limit
from infersize.errors import ValueRangeError
from infersize.record import record
from infersize.service.request import Prepared, SpecRequest, prepare
from infersize.service.schedule_engines import (
    RUNNING_SETTING,
    Table,
    check_method,
    engine_config,
    schedule_family,
)
from infersize.service.schedule_notes import Choice, schedule_notes, worth_emitting

MAX_BATCH = 1 << 16  # past the sequences any engine runs at once


@record
class ScheduleRequest:
    """A deployment as `spec` takes it (its batch size unused) and the largest batch to cover."""

    spec: SpecRequest
    max_batch: int | None = None  # None: the most sequences the engine runs at once


@record
class Bucket:
    """Batches min_batch..max_batch (inclusive) run at draft_k; the numbers are at the largest
    of them that fits in memory at the context asked."""

    min_batch: int
    max_batch: int
    draft_k: int
    tpot_ms: float  # per sequence
    output_tokens_per_s: float  # the whole deployment's
    speedup: float  # over K = 0, plain decoding
    static_best_k: int  # the one K for every batch (core/schedule.py)
    static_best_speedup: float


@record
class ScheduleCurve:
    """The schedule along the batch axis, over the batches every K fits at: for the figure."""

    batches: FloatArray
    draft_k: IntArray
    speedup: FloatArray
    best_speedup: FloatArray  # the best K's at each batch, no margin
    static_speedup: FloatArray
    static_k: int


@record
class ScheduleResult:
    engine: str  # vllm, trtllm or sglang: whose configuration `config` is
    buckets: tuple[Bucket, ...]
    config: Any  # the engine's own object; None: no K pays, serve without speculation
    notes: tuple[str, ...]
    scheduled: bool  # config switches K by batch size (else one K for every batch)
    deployment: str  # the deployment in words, for the panel and the figure
    max_batch: int
    curve: ScheduleCurve | None  # None: nothing fits


def schedule_json(result: ScheduleResult) -> dict[str, Any]:
    """The stable JSON object of `schedule --json`."""
    return {
        "engine": result.engine,
        "buckets": [dataclasses.asdict(b) for b in result.buckets],
        "config": result.config,
        "notes": list(result.notes),
    }


def _most(req: ScheduleRequest, prepared: Prepared, family: str) -> int:
    """The largest batch the table covers: the engine's limit, or less if asked."""
    engine = prepared.engine
    limit = running_limit(prepared.deployment.numbers, engine, 1, prepared.tree)
    if req.max_batch is None:
        return min(limit, MAX_BATCH)
    if not 1 <= req.max_batch <= MAX_BATCH:
        raise ValueRangeError("max_batch", f"must be in 1..{MAX_BATCH}, got {req.max_batch}")
    if req.max_batch > limit:
        raise ValueRangeError(
            "max_batch",
            f"({req.max_batch}) is more than engine {engine.name} runs at once ({limit} "
            f"sequences, its {{{RUNNING_SETTING[family]}}}): raise that instead",
        )
    return req.max_batch


def _priced(ev: Evaluation, runs: bool) -> tuple[int, int]:
    """(batches, Ks) at which every K fits: the Ks that fit at batch 1 (a prefix of K) and the
    batches at which all of them fit (a prefix of the batch axis); (0, 0) where nothing does."""
    fits = np.asarray(ev.fits_k)
    if not runs or not fits[0].any():
        return 0, 0
    ks = int(np.argmin(fits[0])) if not fits[0].all() else fits.shape[1]
    return int(np.sum(fits[:, :ks].all(axis=1))), ks


def _at_k(ev: Evaluation, k: int) -> tuple[FloatArray, FloatArray, FloatArray]:
    """TPOT (ms), output tokens/s and speedup along the batch axis at K (0: plain decoding)."""
    point = ev.at(max(k, 1) - 1)
    if k == 0:
        return (
            point.baseline_ms_per_token,
            point.baseline_tokens_per_s,
            np.ones_like(point.baseline_tokens_per_s),
        )
    return point.speculative_ms_per_token, point.speculative_tokens_per_s, point.speed.speedup


def _buckets(ev: Evaluation, ranges: list[Range], static: int, most: int) -> tuple[Bucket, ...]:
    """Each range as a bucket, the last running on to `most`; its numbers at its largest
    batch of the priced ones."""
    static_speedup = _at_k(ev, static)[2]
    buckets = []
    for i, r in enumerate(ranges):
        tpot, tokens, speedup = _at_k(ev, r.k)
        row = r.stop - 1
        buckets.append(
            Bucket(
                min_batch=r.start + 1,
                max_batch=most if i == len(ranges) - 1 else r.stop,
                draft_k=r.k,
                tpot_ms=float(tpot[row]),
                output_tokens_per_s=float(tokens[row]),
                speedup=float(speedup[row]),
                static_best_k=static,
                static_best_speedup=float(static_speedup[row]),
            )
        )
    return tuple(buckets)


def run_schedule(req: ScheduleRequest, catalog: Catalog) -> ScheduleResult:
    family = schedule_family(get_engine(req.spec.engine.engine))
    if req.spec.max_k < 1:
        raise ValueRangeError("max_k", f"must be at least 1, got {req.spec.max_k}")
    prepared = prepare(req.spec, catalog)
    dep = prepared.deployment
    if dep.draft is None:
        raise ValueRangeError("draft", "none runs the target alone: a schedule needs a drafter")
    method = method_of(dep.draft.model)
    check_method(family, method)
    most = _most(req, prepared, family)
    batches = floats(np.arange(1, most + 1))
    ev = prepared.evaluate(batch=batches)
    top, ks = _priced(ev, dep.support.level != "unsupported")
    choice = Choice(
        prepared=prepared, family=family, most=most, top=top, ranges=[], static=0, ev=ev
    )
    if top == 0:
        notes = schedule_notes(choice, None, False)
        return ScheduleResult(
            engine=family,
            buckets=(),
            config=None,
            notes=notes,
            scheduled=False,
            deployment=_words(prepared),
            max_batch=most,
            curve=None,
        )
    full = np.broadcast_to(np.asarray(ev.speed.speedup), np.asarray(ev.fits_k).shape)
    speedup = with_plain(floats(full[:top, :ks]))
    static, ranges = schedule(speedup, batches[:top])
    first = ranges
    if family == "trtllm":  # its smallest batch key must map to the largest K
        ranges = highest_first(ranges, speedup, batch_weights(batches[:top]))
    choice = dataclasses.replace(choice, ranges=ranges, static=static, before=first)
    curve = _curve(speedup, batches[:top], ranges, static)
    gain = floats(curve.speedup / curve.static_speedup - 1.0)
    worth = worth_emitting(choice, gain)
    scheduled = len(ranges) > 1 and worth and family != "sglang"
    table: Table = [(r.start + 1, r.stop, r.k) for r in ranges]
    table[-1] = (table[-1][0], most, table[-1][2])  # the last range runs on to the engine's limit
    if not scheduled and len(table) > 1:
        table = [(1, most, static)]
    return ScheduleResult(
        engine=family,
        buckets=_buckets(ev, ranges, static, most),
        config=engine_config(family, dep, method, table),
        scheduled=scheduled,
        notes=schedule_notes(choice, gain, scheduled),
        deployment=_words(prepared),
        max_batch=most,
        curve=curve,
    )


def _curve(
    speedup: FloatArray, batches: FloatArray, ranges: list[Range], static: int
) -> ScheduleCurve:
    ks = np.concatenate([np.full(r.stop - r.start, r.k) for r in ranges]).astype(np.int64)
    return ScheduleCurve(
        batches=batches,
        draft_k=ks,
        speedup=speedup_of(speedup, ranges),
        best_speedup=floats(np.max(speedup, axis=1)),
        static_speedup=floats(speedup[:, static]),
        static_k=static,
    )


def _words(prepared: Prepared) -> str:
    """The deployment in one line: models, GPUs, engine, context and α."""
    dep, req = prepared.deployment, prepared.request
    draft = "" if dep.draft is None else f" + {dep.draft.model.id} ({dep.draft.fmt.id})"
    gpus = f"{dep.target.tp}× " if dep.target.tp > 1 else ""
    return (
        f"{dep.target.model.id} ({dep.target.fmt.id}){draft} on {gpus}{dep.gpu.name}, "
        f"{dep.engine.name} {dep.engine.release}, context {req.context_length:,}, "
        f"α {prepared.alpha:.3f}"
    )
