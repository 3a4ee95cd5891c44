"""The compiled loop's steps (core/serving/kernel.py): a step with prefill chunks, a run of
decode-only steps up to the next event, a change of K under a switch, and the KV sums they read.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from infersize.core.serving import step_math
from infersize.core.serving.kernel_cache import refresh_once
from infersize.core.serving.kernel_layout import (
    ADMISSIONS,
    ADMITTED,
    ARR_HEAD,
    ARR_TAIL,
    ARRIVAL,
    BROKEN,
    COMPUTED,
    CONTEXT_BASE,
    CONTEXT_RATE,
    DEC_COUNT,
    DEC_HEAD,
    FINAL_KV,
    FIRST_TOKEN,
    LAUNCHED,
    NXT,
    ORDER,
    PF_COUNT,
    PROMPT,
    RATE,
    RESERVE_WHOLE,
    RESERVED,
    RUNNING_SECONDS,
    SCALE,
    SEEN_AT,
    START,
    START_CONTEXT,
    WQ_COUNT,
    WQ_HEAD,
    G,
    T,
)
from infersize.core.serving.kernel_requests import (
    advance,
    check_over,
    decode_from,
    decode_kv,
    preempt,
    prefilled_kv,
    remove_prefilling,
    sequence_kv,
    stop_decoding,
)

refresh_once()  # numba keeps callees inside cached callers (kernel_cache.py)

# the step model, compiled for the loop and the mean-field fixed point (the same function, in
# Python, is StepTable.seconds)
step_seconds = njit(cache=True)(step_math.step_seconds)


@njit(cache=True)
def steps_until(wait: float, first: float, slope: float, most: int) -> int:
    """The fewest steps whose time reaches `wait` (n · first + slope · n(n−1)/2 ≥ wait), and
    never more than `most`."""
    if wait <= 0:
        return 1
    if abs(slope) < 1e-15 * first:
        n = wait / first
        return max(1, math.ceil(n)) if n < most else most
    a, b = slope / 2.0, first - slope / 2.0
    disc = b * b + 4.0 * a * wait
    if disc < 0:
        return min(1 << 30, most)
    n = (-b + math.sqrt(max(disc, 0.0))) / (2.0 * a)
    if not math.isfinite(n):
        return min(1 << 30, most)
    n -= 1e-9
    return max(1, math.ceil(n)) if n < most else most


@njit(cache=True)
def held_kv(
    layout: np.ndarray,
    step: int,
    lookahead: int,
    f: np.ndarray,
    s: np.ndarray,
    ri: np.ndarray,
    rf: np.ndarray,
    prefilling: np.ndarray,
) -> float:
    """KV bytes the running requests hold at `step` (decodes with their draft slots)."""
    held = decode_kv(layout, step, float(lookahead), f, s, ri, rf)
    if not s[PF_COUNT]:
        return held
    return held + prefilled_kv(layout, s, ri, prefilling)


Run = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
# a step table: the target's and one drafter pass's seconds by tokens, its parameters
Step = tuple[np.ndarray, np.ndarray, np.ndarray]
Ends = list[tuple[int, int]]
Itl = list[tuple[float, float, int, int]]


@njit(cache=True)
def prefill_step(
    run: Run,
    layouts: np.ndarray,
    limits: np.ndarray,
    step_tokens: int,
    step: Step,
    bookkeeping: tuple[np.ndarray, np.ndarray],
    ends: Ends,
    itl: Itl,
) -> bool:
    """One step with prefill chunks (running prefills first, then waiting requests within the
    budget, max_num_seqs and the pool); False when no chunk could be scheduled.
    `bookkeeping`: a K switch's rates at the running K (empty: none) and the give-up rule."""
    f, s = run[0], run[1]
    mixed = limits[4] != 0.0
    chunk_ids = np.empty(s[PF_COUNT] + s[WQ_COUNT], dtype=np.int64)
    chunk_takes = np.empty_like(chunk_ids)
    budget = int(limits[1]) - (s[DEC_COUNT] * step_tokens if mixed else 0)
    chunks = _admit(run, layouts[0], limits, budget, chunk_ids, chunk_takes)
    if not chunks:
        return False
    seconds = _chunks_seconds(run, layouts, step, chunk_ids[:chunks], chunk_takes[:chunks], mixed)
    if mixed:
        advance(f, s, run[2], run[3], 1, seconds, 0.0, ends, itl, bookkeeping[1])
    else:  # a step of prompts alone: the decodes wait (time moves, their steps do not)
        f[RUNNING_SECONDS] += (s[DEC_COUNT] + s[PF_COUNT]) * seconds
        f[LAUNCHED] = f[T]
        f[T] += seconds
    _chunks_in(run, chunk_ids[:chunks], chunk_takes[:chunks], bookkeeping, ends)
    return True


@njit(cache=True)
def _admit(
    run: Run,
    pool: np.ndarray,
    limits: np.ndarray,
    budget: int,
    chunk_ids: np.ndarray,
    chunk_takes: np.ndarray,
) -> int:
    """The step's chunks (into chunk_ids, chunk_takes; how many): the running prefills' next
    chunks, then waiting requests admitted in order while the budget, max_num_seqs and the
    pool (whole-request admission: every admitted request's final KV) allow."""
    f, s, ri, rf, prefilling, waiting = run
    capacity = limits[3]
    held = held_kv(pool, s[G], int(limits[2]), f, s, ri, rf, prefilling)
    chunks = 0
    for j in range(s[PF_COUNT]):
        i = prefilling[j]
        take = min(ri[PROMPT, i] - ri[COMPUTED, i], budget)
        if take <= 0 or held + sequence_kv(pool, float(take)) > capacity:
            continue
        chunk_ids[chunks], chunk_takes[chunks] = i, take
        chunks += 1
        budget -= take
        held += sequence_kv(pool, float(take)) - pool[3]
    running = s[DEC_COUNT] + s[PF_COUNT]
    while s[WQ_COUNT] and budget > 0 and running < int(limits[0]):
        i = waiting[s[WQ_HEAD]]
        take = min(ri[PROMPT, i], budget)
        chunk_kv = sequence_kv(pool, float(take))
        if held + chunk_kv > capacity:
            break  # the queue waits for KV to free up (first come, first served)
        if s[RESERVE_WHOLE]:  # whole-request admission: its final KV beside every running one
            if f[RESERVED] + rf[FINAL_KV, i] > capacity and (s[DEC_COUNT] or s[PF_COUNT]):
                break
            f[RESERVED] += rf[FINAL_KV, i]
        s[WQ_HEAD] = (s[WQ_HEAD] + 1) % waiting.shape[0]
        s[WQ_COUNT] -= 1
        prefilling[s[PF_COUNT]] = i
        s[PF_COUNT] += 1
        ri[ORDER, i] = s[ADMISSIONS]
        s[ADMISSIONS] += 1
        if rf[ADMITTED, i] != rf[ADMITTED, i]:  # NaN: its first admission
            rf[ADMITTED, i] = f[T]
        chunk_ids[chunks], chunk_takes[chunks] = i, take
        chunks += 1
        budget -= take
        held += chunk_kv
        running += 1
    return chunks


@njit(cache=True)
def _chunks_seconds(
    run: Run,
    layouts: np.ndarray,
    step: Step,
    chunk_ids: np.ndarray,
    chunk_takes: np.ndarray,
    mixed: bool,
) -> float:
    """The step's seconds: its chunks, each [a, b) attending to a+1 .. b tokens and reading b
    of KV, beside the decodes (mixed) or alone."""
    f, s, ri, rf = run[0], run[1], run[2], run[3]
    bt, bd, p = step
    target, draft = layouts[1], layouts[2]
    tokens = attended = kv_target = kv_draft = 0.0
    for c in range(chunk_ids.shape[0]):
        a = ri[COMPUTED, chunk_ids[c]]
        b = a + chunk_takes[c]
        tokens += chunk_takes[c]
        attended += (b * (b + 1) - a * (a + 1)) / 2.0
        kv_target += sequence_kv(target, float(b))
        kv_draft += sequence_kv(draft, float(b))
    if not mixed:
        return float(
            f[SCALE] * step_seconds(bt, bd, p, 0, int(tokens), 0.0, attended, kv_target, kv_draft)
        )
    prefill = (tokens, attended, kv_target, kv_draft)
    return step_with_decodes(f, s, ri, rf, s[G], layouts, step, prefill)


@njit(cache=True)
def _chunks_in(
    run: Run,
    chunk_ids: np.ndarray,
    chunk_takes: np.ndarray,
    bookkeeping: tuple[np.ndarray, np.ndarray],
    ends: Ends,
) -> None:
    """The chunks are in the KV cache: a prompt done gives its first token and decodes."""
    f, s, ri, rf, prefilling, _ = run
    switched_rates, give_up = bookkeeping
    for c in range(chunk_ids.shape[0]):
        i = chunk_ids[c]
        ri[COMPUTED, i] += chunk_takes[c]
        if ri[COMPUTED, i] >= ri[PROMPT, i]:
            remove_prefilling(s, prefilling, i)
            if rf[FIRST_TOKEN, i] != rf[FIRST_TOKEN, i]:  # NaN: its first token now
                rf[FIRST_TOKEN, i] = f[T]
                if give_up.shape[0]:
                    if f[T] - rf[ARRIVAL, i] > give_up[0]:
                        s[BROKEN] += 1
                    check_over(s, give_up)
            decode_from(f, s, ri, rf, i, float(ri[PROMPT, i]), switched_rates, ends, give_up)


@njit(cache=True)
def step_with_decodes(
    f: np.ndarray,
    s: np.ndarray,
    ri: np.ndarray,
    rf: np.ndarray,
    step: int,
    layouts: np.ndarray,
    table: Step,
    prefill: tuple[float, float, float, float],
) -> float:
    """The seconds of step `step` with every decoding request in it, their KV summed request by
    request (windows), beside `prefill`: its tokens, attended tokens and KV bytes (target,
    drafter); zeros for an all-decode step."""
    bt, bd, p = table
    tokens, attended, kv_target, kv_draft = prefill
    contexts = f[CONTEXT_BASE] + f[CONTEXT_RATE] * step if s[DEC_COUNT] else 0.0
    seconds: float = f[SCALE] * step_seconds(
        bt,
        bd,
        p,
        s[DEC_COUNT],
        int(tokens),
        contexts,
        attended,
        decode_kv(layouts[1], step, 0.0, f, s, ri, rf) + kv_target,
        decode_kv(layouts[2], step, 0.0, f, s, ri, rf) + kv_draft,
    )
    return seconds


@njit(cache=True)
def switch_k(
    f: np.ndarray,
    s: np.ndarray,
    ri: np.ndarray,
    rf: np.ndarray,
    switched_rates: np.ndarray,
    ends: list[tuple[int, int]],
    give_up: np.ndarray,
) -> None:
    """K changed: each decoding request keeps the tokens it has emitted and needs its
    remaining ones at the new K's rate."""
    g = s[G]
    snapshot = np.empty(s[DEC_COUNT], dtype=np.int64)
    i, m = s[DEC_HEAD], 0
    while i >= 0:
        snapshot[m] = i
        i, m = ri[NXT, i], m + 1
    for i in snapshot:
        context = rf[START_CONTEXT, i] + rf[RATE, i] * (g - ri[START, i])
        stop_decoding(f, s, ri, rf, i)
        decode_from(f, s, ri, rf, i, context, switched_rates, ends, give_up)


@njit(cache=True)
def decode_run(
    run: Run,
    layouts: np.ndarray,
    limits: np.ndarray,
    step: Step,
    moment: tuple[bool, np.ndarray, float],
    give_up: np.ndarray,
    ends: Ends,
    itl: Itl,
) -> None:
    """Decode only, up to the next event: a completion, an arrival the scheduler could
    admit, or the step at which the pool runs out (then preempt). `moment`: whether any KV
    layout has a window (then KV is summed request by request), the table's intercepts by
    count (NaN: not read yet) and its cost per token of context."""
    f, s, ri, rf, prefilling, waiting = run
    bt, bd, p = step
    windowed, intercepts, per_context = moment
    pool, capacity, lookahead = layouts[0], limits[3], int(limits[2])
    g = s[G]
    steps = ends[0][0] - g if len(ends) > 0 else 1
    if windowed:
        held = held_kv(pool, g, lookahead, f, s, ri, rf, prefilling)
        growth = held_kv(pool, g + 1, lookahead, f, s, ri, rf, prefilling) - held
        no_prefill = (0.0, 0.0, 0.0, 0.0)
        first = step_with_decodes(f, s, ri, rf, g, layouts, step, no_prefill)
        slope = step_with_decodes(f, s, ri, rf, g + 1, layouts, step, no_prefill) - first
    else:  # every term is linear in Σ contexts: the same numbers, without the sums
        n = s[DEC_COUNT]
        context_rate = f[CONTEXT_RATE]
        context = f[CONTEXT_BASE] + context_rate * g
        held = pool[0] * (context + lookahead * n) + pool[3] * n
        if s[PF_COUNT]:
            held += prefilled_kv(pool, s, ri, prefilling)
        growth = pool[0] * context_rate
        intercept = intercepts[n] if n < intercepts.shape[0] else math.nan
        if intercept != intercept:  # NaN: not read off the table yet
            t_state, d_state = layouts[1, 3] * n, layouts[2, 3] * n
            intercept = step_seconds(bt, bd, p, n, 0, 0.0, 0.0, t_state, d_state)
            if n < intercepts.shape[0]:
                intercepts[n] = intercept
        first = f[SCALE] * (intercept + per_context * context)
        slope = f[SCALE] * per_context * context_rate
    if growth > 0:
        room = (capacity - held) // growth
        if room < steps:
            steps = int(room)
    if steps < 1:
        preempt(s, ri, rf, f, prefilling, waiting)
        return
    if s[ARR_HEAD] < s[ARR_TAIL] and not s[WQ_COUNT] and s[DEC_COUNT] < int(limits[0]):
        # until the scheduler chooses a step with the next request in it: the step after the
        # one it arrives in, or (a scheduler one step ahead) the one after that
        wait = rf[SEEN_AT, s[ARR_HEAD]] - f[T]
        if limits[6] == 0.0:
            steps = steps_until(wait, first, slope, steps)
        else:
            steps = min(steps, 1 + (steps_until(wait, first, slope, steps) if wait > 0 else 0))
    advance(f, s, ri, rf, max(steps, 1), first, slope, ends, itl, give_up)
