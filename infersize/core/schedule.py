"""A draft length per batch size: the table engines switch K by at run time (vLLM's
num_speculative_tokens_per_batch_size, TensorRT-LLM's draft_len_schedule), chosen from one
evaluation of the deployment over every batch 1..B and K = 0..max_k.

Arrays here are (batch, K) with K = 0 as the first column (plain decoding, speedup 1), over the
batches at which every K of the axis fits in memory (the caller cuts both axes to them).

The choice, batch by batch, then over ranges:
  static K   the one K of the highest mean log speedup over the batches, each doubling of
             the batch weighted alike (weight ln((b + 1) / b)): what one K for the whole range
             gives, the schedule's yardstick
  acceptable a K within `margin` of the best K's speedup at that batch and at least as fast as
             the static K there (so no batch loses to the static choice); a K above 0 only
             where it does not slow decoding (so K = 0 is written out where drafts stop paying)
  per batch  the smallest acceptable K (the smaller K wastes less when α falls short)
  ranges     runs of equal K; a range whose neighbour's K is acceptable at each of its batches
             takes that K (the smaller K first, then the narrowest range on the log batch
             axis), until none can: the table does not switch at a threshold where switching
             gains less than the margin
  TensorRT-LLM no later range above the first range's K (highest_first)
"""

from __future__ import annotations

import numpy as np

from infersize.core.arrays import BoolArray, FloatArray, IntArray, floats
from infersize.record import record

# Speedups within 2 % are not told apart: the step model's error on measured speculative
# speedups is -3.2 % and +1.3 % (the two released vLLM runs of docs/calibration.md), so a K
# that is 2 % faster on paper is not known to be faster at all.
MARGIN = 0.02


@record(kw_only=False)
class Range:
    """Batches `start` .. `stop` - 1 as row indices of the (batch, K) arrays, run at K `k`."""

    start: int
    stop: int
    k: int


def with_plain(speedup: FloatArray) -> FloatArray:
    """(batch, K = 1..) speedups with K = 0 put first: plain decoding, speedup 1."""
    return floats(np.concatenate([np.ones((speedup.shape[0], 1)), speedup], axis=1))


def batch_weights(batches: FloatArray) -> FloatArray:
    """ln((b + 1) / b): the share of the log batch axis each integer batch b stands for, so
    every doubling of the batch weighs the same (batch 1 as much as 512..1023)."""
    return floats(np.log1p(1.0 / floats(batches)))


def static_k(speedup: FloatArray, weights: FloatArray) -> int:
    """The K (column) of the highest weighted mean log speedup over the batches."""
    return int(np.argmax(np.sum(weights[:, None] * np.log(speedup), axis=0)))


def acceptable(speedup: FloatArray, static: int, margin: float = MARGIN) -> BoolArray:
    """Where a K may run: within `margin` of the best K's speedup at that batch, at least as
    fast as the static K there, and, for K above 0, no slower than plain decoding (where every
    draft slows decoding, K = 0 runs, whatever the margin)."""
    floor = np.maximum(np.max(speedup, axis=1) / (1.0 + margin), speedup[:, static])
    pays = (speedup >= 1.0) | (np.arange(speedup.shape[1]) == 0)
    return np.asarray((speedup >= floor[:, None]) & pays, dtype=np.bool_)


def ranges_of(ks: IntArray) -> list[Range]:
    """The runs of equal K along the batch axis."""
    edges = np.flatnonzero(np.diff(ks)) + 1
    starts = np.concatenate([[0], edges])
    stops = np.concatenate([edges, [len(ks)]])
    return [Range(int(a), int(b), int(ks[a])) for a, b in zip(starts, stops, strict=True)]


def merged(ranges: list[Range], ok: BoolArray, batches: FloatArray) -> list[Range]:
    """Each range that its neighbour's K serves (acceptable at every one of its batches) takes
    that K, the smaller K first (then the narrowest range on the log batch axis), until no
    range can: fewer switches, none of them worth less than the margin."""
    ranges = list(ranges)
    while True:
        moves = []
        for i, r in enumerate(ranges):
            for j in (i - 1, i + 1):
                if 0 <= j < len(ranges) and ok[r.start : r.stop, ranges[j].k].all():
                    width = np.log(batches[r.stop - 1] + 1.0) - np.log(batches[r.start])
                    moves.append((ranges[j].k, float(width), i))
        if not moves:
            return ranges
        k, _, i = min(moves)
        ranges[i] = Range(ranges[i].start, ranges[i].stop, k)
        ranges = _joined(ranges)


def _joined(ranges: list[Range]) -> list[Range]:
    """Neighbouring ranges of the same K as one."""
    out = [ranges[0]]
    for r in ranges[1:]:
        if r.k == out[-1].k:
            out[-1] = Range(out[-1].start, r.stop, r.k)
        else:
            out.append(r)
    return out


def highest_first(ranges: list[Range], speedup: FloatArray, weights: FloatArray) -> list[Range]:
    """The schedule with no K above the first range's (TensorRT-LLM's smallest batch key must
    map to its max_draft_len): of the schedules whose first range runs some K c of the
    schedule's, c at least its own, and every later range min(its K, c), the one of the
    highest weighted mean log speedup. A schedule whose K never rises is its own answer."""
    first, rest = ranges[0], ranges[1:]
    best: tuple[float, list[Range]] | None = None
    for c in sorted({r.k for r in ranges if r.k >= first.k}):
        candidate = _joined(
            [
                Range(first.start, first.stop, c),
                *(Range(r.start, r.stop, min(r.k, c)) for r in rest),
            ]
        )
        score = float(np.sum(weights * np.log(speedup_of(speedup, candidate))))
        if best is None or score > best[0]:
            best = (score, candidate)
    assert best is not None  # c = the first range's own K is always a candidate
    return best[1]


def schedule(
    speedup: FloatArray, batches: FloatArray, margin: float = MARGIN
) -> tuple[int, list[Range]]:
    """The static K and the ranges of the schedule for (batch, K = 0..) speedups at every
    batch of `batches`, each K fitting at each."""
    static = static_k(speedup, batch_weights(batches))
    ok = acceptable(speedup, static, margin)
    per_batch = np.asarray(np.argmax(ok, axis=1), dtype=np.int64)  # the smallest acceptable K
    return static, merged(ranges_of(per_batch), ok, batches)


def speedup_of(speedup: FloatArray, ranges: list[Range]) -> FloatArray:
    """The speedup along the batch axis of a schedule's ranges."""
    ks = np.concatenate([np.full(r.stop - r.start, r.k) for r in ranges])
    return floats(np.take_along_axis(speedup, ks[:, None], axis=1)[:, 0])
