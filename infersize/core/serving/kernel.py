"""The simulator's loop compiled (numba): one replica's state and its steps, as
core/serving/simulate.py describes them. One function serves at one K or with K switched by the
running batch. Every float is computed as the step model and the scheduler state it mirrors
define it, operation by operation and in the same order, so a run is the same to the last bit
at any speed (tests/test_simulate.py holds runs to hand-computed and engine-rule answers).

The step model is core/serving/step_math.step_seconds, compiled, over a StepTable's numbers as
arrays (StepTable.by_tokens, StepTable.parameters). Lengths are tokens, KV bytes, times seconds.

State a step reads: the decoding requests in the order they started decoding (a linked list:
their Σ contexts are two running sums, context_base + context_rate · step), the requests
prefilling in admission order, the waiting queue (a ring: preempted requests go back to its
head), arrivals not yet in, and a heap of (last step, request) from which finished requests
leave (stale entries are skipped).
"""

from __future__ import annotations

import heapq
import math

import numpy as np
from numba import njit

from infersize.core.serving import step_math
from infersize.core.serving.step_math import DRAFT_K

# what a run gave up on (0: it did not): the GiveUp bound whose allowance too many requests broke
GAVE_UP = ("", "ttft", "tpot", "e2e")


# the run's scalars, by index into one float and one int array
T, CONTEXT_BASE, CONTEXT_RATE, RESERVED, RUNNING_SECONDS, SCALE, LAUNCHED = range(7)
FLOAT_SCALARS = 7
G, DONE, SENT, PREEMPTIONS, ADMISSIONS, OVER, RESERVE_WHOLE = range(7)
DEC_HEAD, DEC_TAIL, DEC_COUNT, PF_COUNT, WQ_HEAD, WQ_COUNT, ARR_HEAD, ARR_TAIL = range(7, 15)
BROKEN = 15  # ttft, tpot, e2e: requests that broke each GiveUp bound so far
INT_SCALARS = 18
# the requests' numbers, by row: ints, then floats
INPUT, OUTPUT, STEPS_LEFT, PROMPT, COMPUTED, START, END, ORDER, NXT, PRV, ARRIVE_ID = range(11)
INT_ROWS = 11
RATE, START_CONTEXT, ARRIVAL, ADMITTED, FIRST_TOKEN, FINISH, FINAL_KV = range(7)
# the arrivals queue: when the engine can first see a request, when its client sent it
SEEN_AT, SENT_AT = 7, 8
FLOAT_ROWS = 9
NOT_DECODING = -2


# the step model and a sequence's KV, compiled for the loop (the same functions, in Python,
# time steps for the mean-field model)
step_seconds = njit(cache=True)(step_math.step_seconds)
sequence_kv = njit(cache=True)(step_math.sequence_kv)


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
def _round_half_even(x: float) -> int:
    """Python's round(x): the nearest integer, ties to even."""
    whole = math.floor(x)
    part = x - whole
    if part > 0.5 or (part == 0.5 and whole % 2 == 1):
        whole += 1
    return int(whole)


@njit(cache=True)
def _decode_kv(
    layout: np.ndarray,
    step: int,
    extra: float,
    f: np.ndarray,
    s: np.ndarray,
    ri: np.ndarray,
    rf: np.ndarray,
) -> float:
    """Σ KV bytes of the decoding requests at `step`, each `extra` tokens longer."""
    n = s[DEC_COUNT]
    if n == 0:
        return 0.0
    full, window_bytes, window, state = layout[0], layout[1], layout[2], layout[3]
    total = full * (f[CONTEXT_BASE] + f[CONTEXT_RATE] * step + extra * n) + state * n
    if window_bytes:
        windowed = 0.0
        i = s[DEC_HEAD]
        while i >= 0:
            context = rf[START_CONTEXT, i] + rf[RATE, i] * (step - ri[START, i]) + extra
            windowed += min(context, window)
            i = ri[NXT, i]
        total += window_bytes * windowed
    return float(total)


@njit(cache=True)
def _prefilled_kv(
    layout: np.ndarray, s: np.ndarray, ri: np.ndarray, prefilling: np.ndarray
) -> float:
    """Σ KV bytes of the prompts' computed chunks."""
    total = 0.0
    for j in range(s[PF_COUNT]):
        total += sequence_kv(layout, float(ri[COMPUTED, prefilling[j]]))
    return total


@njit(cache=True)
def _check_over(s: np.ndarray, give_up: np.ndarray) -> None:
    """The last of ttft, tpot, e2e whose broken requests passed their allowance (it stays)."""
    for metric in range(3):
        if s[BROKEN + metric] > give_up[3 + metric]:
            s[OVER] = metric + 1


@njit(cache=True)
def _finish(
    f: np.ndarray, s: np.ndarray, ri: np.ndarray, rf: np.ndarray, i: int, give_up: np.ndarray
) -> None:
    t = f[T]
    rf[FINISH, i] = t
    s[DONE] += 1
    if s[RESERVE_WHOLE]:
        f[RESERVED] -= rf[FINAL_KV, i]
    n = ri.shape[1]
    if s[SENT] < n:  # closed loop: this client sends its next request now
        tail = s[ARR_TAIL]
        # it comes back (detokenizer, HTTP, tokenizer) after the next step is chosen
        rf[SEEN_AT, tail], rf[SENT_AT, tail] = np.nextafter(t, np.inf), t
        ri[ARRIVE_ID, tail] = s[SENT]
        s[ARR_TAIL] = tail + 1
        s[SENT] += 1
    if give_up.shape[0]:
        output = ri[OUTPUT, i]
        tpot = (t - rf[FIRST_TOKEN, i]) / (output - 1) if output > 1 else 0.0
        if tpot > give_up[1]:
            s[BROKEN + 1] += 1
        if t - rf[ARRIVAL, i] > give_up[2]:
            s[BROKEN + 2] += 1
        _check_over(s, give_up)


@njit(cache=True)
def _stop_decoding(f: np.ndarray, s: np.ndarray, ri: np.ndarray, rf: np.ndarray, i: int) -> None:
    before, after = ri[PRV, i], ri[NXT, i]
    if before >= 0:
        ri[NXT, before] = after
    else:
        s[DEC_HEAD] = after
    if after >= 0:
        ri[PRV, after] = before
    else:
        s[DEC_TAIL] = before
    ri[NXT, i] = ri[PRV, i] = NOT_DECODING
    s[DEC_COUNT] -= 1
    rate = rf[RATE, i]
    f[CONTEXT_BASE] -= rf[START_CONTEXT, i] - rate * ri[START, i]
    f[CONTEXT_RATE] -= rate
    if s[DEC_COUNT] == 0:  # no drift from sums of many floats
        f[CONTEXT_BASE] = f[CONTEXT_RATE] = 0.0


@njit(cache=True)
def _decode_from(
    f: np.ndarray,
    s: np.ndarray,
    ri: np.ndarray,
    rf: np.ndarray,
    i: int,
    start: float,
    switched_rates: np.ndarray,
    ends: list[tuple[int, int]],
    give_up: np.ndarray,
) -> None:
    """Request i decodes from the next step on, from `start` tokens of context; under a K
    switch its remaining tokens at the running K's rate (the share of its answer left times
    its steps at that K)."""
    if switched_rates.shape[0]:
        rate = switched_rates[i]
        left = ri[OUTPUT, i] - 1 - (start - ri[INPUT, i])
        rf[RATE, i] = rate
        ri[STEPS_LEFT, i] = math.ceil(left / rate - 1e-9) if rate > 0 and left > 0 else 0
    g = s[G]
    end = g + ri[STEPS_LEFT, i]
    ri[START, i], ri[END, i] = g, end
    rf[START_CONTEXT, i] = start
    if ri[STEPS_LEFT, i] <= 0:
        _finish(f, s, ri, rf, i, give_up)
        return
    tail = s[DEC_TAIL]
    ri[PRV, i], ri[NXT, i] = tail, -1
    if tail >= 0:
        ri[NXT, tail] = i
    else:
        s[DEC_HEAD] = i
    s[DEC_TAIL] = i
    s[DEC_COUNT] += 1
    rate = rf[RATE, i]
    f[CONTEXT_BASE] += start - rate * g
    f[CONTEXT_RATE] += rate
    heapq.heappush(ends, (end, np.int64(i)))


@njit(cache=True)
def _advance(
    f: np.ndarray,
    s: np.ndarray,
    ri: np.ndarray,
    rf: np.ndarray,
    steps: int,
    first: float,
    slope: float,
    ends: list[tuple[int, int]],
    itl: list[tuple[float, float, int, int]],
    give_up: np.ndarray,
) -> None:
    """Move `steps` steps of `first` seconds, each `slope` longer than the one before;
    requests whose last step this was finish."""
    seconds = steps * first + slope * steps * (steps - 1) / 2.0
    decoding = s[DEC_COUNT]
    f[RUNNING_SECONDS] += (decoding + s[PF_COUNT]) * seconds
    if decoding:
        itl.append((first, slope, np.int64(steps), np.int64(decoding)))
    f[T] += seconds
    f[LAUNCHED] = f[T] - (first + slope * (steps - 1))  # the last step's start
    g = s[G] + steps
    s[G] = g
    while len(ends) > 0 and ends[0][0] <= g:
        end, i = heapq.heappop(ends)
        if ri[NXT, i] != NOT_DECODING and ri[END, i] == end:
            _stop_decoding(f, s, ri, rf, i)
            _finish(f, s, ri, rf, i, give_up)


@njit(cache=True)
def _preempt(
    s: np.ndarray,
    ri: np.ndarray,
    rf: np.ndarray,
    f: np.ndarray,
    prefilling: np.ndarray,
    waiting: np.ndarray,
) -> None:
    """The most recently admitted running request gives back its KV and waits at the head of
    the queue to recompute its prompt and the tokens it has emitted."""
    victim, latest = -1, -1
    i = s[DEC_HEAD]
    while i >= 0:
        if ri[ORDER, i] > latest:
            victim, latest = i, ri[ORDER, i]
        i = ri[NXT, i]
    for j in range(s[PF_COUNT]):
        if ri[ORDER, prefilling[j]] > latest:
            victim, latest = prefilling[j], ri[ORDER, prefilling[j]]
    s[PREEMPTIONS] += 1
    if ri[NXT, victim] != NOT_DECODING:
        done_steps = s[G] - ri[START, victim]
        emitted = rf[RATE, victim] * done_steps
        _stop_decoding(f, s, ri, rf, victim)
        ri[STEPS_LEFT, victim] = ri[END, victim] - s[G]
        ri[PROMPT, victim] = _round_half_even(rf[START_CONTEXT, victim] + emitted)
    else:
        _remove_prefilling(s, prefilling, victim)
    ri[COMPUTED, victim] = 0
    ring = waiting.shape[0]
    s[WQ_HEAD] = (s[WQ_HEAD] - 1) % ring
    waiting[s[WQ_HEAD]] = victim
    s[WQ_COUNT] += 1


@njit(cache=True)
def _remove_prefilling(s: np.ndarray, prefilling: np.ndarray, i: int) -> None:
    count = s[PF_COUNT]
    j = 0
    while prefilling[j] != i:
        j += 1
    for m in range(j, count - 1):
        prefilling[m] = prefilling[m + 1]
    s[PF_COUNT] = count - 1


@njit(cache=True)
def _take(s: np.ndarray, ri: np.ndarray, rf: np.ndarray, waiting: np.ndarray) -> None:
    """The next request in the arrivals queue joins the waiting queue (arrived when sent)."""
    head = s[ARR_HEAD]
    i = ri[ARRIVE_ID, head]
    rf[ARRIVAL, i] = rf[SENT_AT, head]
    s[ARR_HEAD] = head + 1
    ring = waiting.shape[0]
    waiting[(s[WQ_HEAD] + s[WQ_COUNT]) % ring] = i
    s[WQ_COUNT] += 1


@njit(cache=True)
def _held(
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
    held = _decode_kv(layout, step, float(lookahead), f, s, ri, rf)
    if not s[PF_COUNT]:
        return held
    return held + _prefilled_kv(layout, s, ri, prefilling)


@njit(cache=True)
def _prefill_step(
    f: np.ndarray,
    s: np.ndarray,
    ri: np.ndarray,
    rf: np.ndarray,
    prefilling: np.ndarray,
    waiting: np.ndarray,
    layouts: np.ndarray,
    limits: np.ndarray,
    step_tokens: int,
    bt: np.ndarray,
    bd: np.ndarray,
    p: np.ndarray,
    switched_rates: np.ndarray,
    ends: list[tuple[int, int]],
    itl: list[tuple[float, float, int, int]],
    give_up: np.ndarray,
) -> bool:
    """One step with prefill chunks (running prefills first, then waiting requests within the
    budget, max_num_seqs and the pool); False when no chunk could be scheduled."""
    pool, target, draft = layouts[0], layouts[1], layouts[2]
    max_num_seqs, lookahead, mixed = int(limits[0]), int(limits[2]), limits[4] != 0.0
    capacity = limits[3]
    g = s[G]
    decodes = s[DEC_COUNT] * step_tokens if mixed else 0
    budget = int(limits[1]) - decodes
    held = _held(pool, g, lookahead, f, s, ri, rf, prefilling)
    chunk_ids = np.empty(s[PF_COUNT] + s[WQ_COUNT], dtype=np.int64)
    chunk_takes = np.empty_like(chunk_ids)
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
    ring = waiting.shape[0]
    while s[WQ_COUNT] and budget > 0 and running < max_num_seqs:
        i = waiting[s[WQ_HEAD]]
        take = min(ri[PROMPT, i], budget)
        chunk_kv = sequence_kv(pool, float(take))
        if held + chunk_kv > capacity:
            break  # the queue waits for KV to free up (first come, first served)
        if s[RESERVE_WHOLE]:  # whole-request admission: its final KV beside every running one
            need = rf[FINAL_KV, i]
            if f[RESERVED] + need > capacity and (s[DEC_COUNT] or s[PF_COUNT]):
                break
            f[RESERVED] += need
        s[WQ_HEAD] = (s[WQ_HEAD] + 1) % ring
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
    if not chunks:
        return False
    tokens = attended = kv_target = kv_draft = 0.0
    for c in range(chunks):  # a chunk [a, b) attends to a+1 .. b tokens and reads b of KV
        a = ri[COMPUTED, chunk_ids[c]]
        b = a + chunk_takes[c]
        tokens += chunk_takes[c]
        attended += (b * (b + 1) - a * (a + 1)) / 2.0
        kv_target += sequence_kv(target, float(b))
        kv_draft += sequence_kv(draft, float(b))
    if mixed:
        contexts = f[CONTEXT_BASE] + f[CONTEXT_RATE] * g if s[DEC_COUNT] else 0.0
        seconds = f[SCALE] * step_seconds(
            bt,
            bd,
            p,
            s[DEC_COUNT],
            int(tokens),
            contexts,
            attended,
            _decode_kv(target, g, 0.0, f, s, ri, rf) + kv_target,
            _decode_kv(draft, g, 0.0, f, s, ri, rf) + kv_draft,
        )
        _advance(f, s, ri, rf, 1, seconds, 0.0, ends, itl, give_up)
    else:  # a step of prompts alone: the decodes wait (time moves, their steps do not)
        table_seconds = step_seconds(bt, bd, p, 0, int(tokens), 0.0, attended, kv_target, kv_draft)
        seconds = f[SCALE] * table_seconds
        f[RUNNING_SECONDS] += (s[DEC_COUNT] + s[PF_COUNT]) * seconds
        f[LAUNCHED] = f[T]
        f[T] += seconds
    for c in range(chunks):  # the chunks are in the KV cache: a prompt done gives its token
        i = chunk_ids[c]
        ri[COMPUTED, i] += chunk_takes[c]
        if ri[COMPUTED, i] >= ri[PROMPT, i]:
            _remove_prefilling(s, prefilling, i)
            if rf[FIRST_TOKEN, i] != rf[FIRST_TOKEN, i]:  # NaN: its first token now
                rf[FIRST_TOKEN, i] = f[T]
                if give_up.shape[0]:
                    if f[T] - rf[ARRIVAL, i] > give_up[0]:
                        s[BROKEN] += 1
                    _check_over(s, give_up)
            _decode_from(f, s, ri, rf, i, float(ri[PROMPT, i]), switched_rates, ends, give_up)
    return True


@njit(cache=True)
def _all_decode_seconds(
    f: np.ndarray,
    s: np.ndarray,
    ri: np.ndarray,
    rf: np.ndarray,
    step: int,
    layouts: np.ndarray,
    bt: np.ndarray,
    bd: np.ndarray,
    p: np.ndarray,
) -> float:
    """An all-decode step's seconds at `step`, its KV summed request by request (windows)."""
    contexts = f[CONTEXT_BASE] + f[CONTEXT_RATE] * step if s[DEC_COUNT] else 0.0
    seconds: float = f[SCALE] * step_seconds(
        bt,
        bd,
        p,
        s[DEC_COUNT],
        0,
        contexts,
        0.0,
        _decode_kv(layouts[1], step, 0.0, f, s, ri, rf) + 0.0,
        _decode_kv(layouts[2], step, 0.0, f, s, ri, rf) + 0.0,
    )
    return seconds


@njit(cache=True)
def serve(
    ri: np.ndarray,
    rf: np.ndarray,
    clients: int,
    layouts: np.ndarray,
    limits: np.ndarray,
    by_tokens_target: np.ndarray,
    by_tokens_draft: np.ndarray,
    parameters: np.ndarray,
    last_batch: np.ndarray,
    table_at: np.ndarray,
    step_scale: np.ndarray,
    steps_at: np.ndarray,
    give_up: np.ndarray,
) -> tuple[float, int, int, np.ndarray, np.ndarray]:
    """Serve the requests (`ri`, `rf`: their rows, filled in place) until every one has
    finished or the give-up rule stops the run.

    Requests arrive at SENT_AT, seen by the engine from SEEN_AT (an open loop, `clients` 0),
    else `clients` send at once and each sends its next when its last ends. `limits`:
    max_num_seqs, max_num_batched_tokens, lookahead, the pool's bytes, then 1 or 0: mixed
    prefill, whole-request admission, a scheduler one step ahead.
    `layouts`: the pool's, the target's and the drafter's KV layouts. Tables: row j of
    `by_tokens_*` and `parameters` is a StepTable's arrays; without a switch (`last_batch`
    empty) table 0 serves every step, else the step's batch b picks range
    bisect_left(last_batch, max(b, 1)) (the last past the end), served by table
    `table_at[range]` at scale `step_scale[b]` (its last entry past the end), each request
    at `steps_at[table]` steps. `give_up`: per-request bounds (ttft, tpot, e2e seconds) then
    how many requests may break each; empty: none.

    Returns the running seconds, the preemptions, what the run gave up on (GAVE_UP's index),
    and the streamed chunks' runs: (first seconds, slope) and (steps, sequences) per run."""
    n = ri.shape[1]
    pool = layouts[0]
    lookahead, ahead = int(limits[2]), limits[6] != 0.0
    switching = last_batch.shape[0] > 0
    tables = parameters.shape[0]
    f = np.zeros(FLOAT_SCALARS)
    f[SCALE] = 1.0
    s = np.zeros(INT_SCALARS, dtype=np.int64)
    s[DEC_HEAD] = s[DEC_TAIL] = -1
    s[RESERVE_WHOLE] = limits[5] != 0.0
    for i in range(n):
        out, steps = ri[OUTPUT, i], ri[STEPS_LEFT, i]
        rf[RATE, i] = (out - 1) / steps if steps > 0 else 0.0
        final = float(ri[INPUT, i] + out + lookahead)
        rf[FINAL_KV, i] = sequence_kv(pool, final)
    ri[PROMPT] = ri[INPUT]
    ri[NXT] = NOT_DECODING
    ri[PRV] = NOT_DECODING
    ri[END] = -1
    rate_at = np.zeros((tables, n if switching else 0))
    for j in range(tables if switching else 0):
        for i in range(n):
            d, m = ri[OUTPUT, i] - 1, steps_at[j, i]
            rate_at[j, i] = d / m if m > 0 else 0.0
    windowed = layouts[0, 1] != 0.0 or layouts[1, 1] != 0.0 or layouts[2, 1] != 0.0
    # without windows an all-decode step is an intercept by count plus a cost per token of
    # context (the step model is affine in it): read both off each table once
    per_context_at = np.zeros(tables)
    intercepts = np.full((tables, int(limits[0]) + 2), np.nan)
    big = 1e6  # tokens of context for the slope's difference (exact: affine)
    t_full, d_full = layouts[1, 0] * big, layouts[2, 0] * big
    for j in range(tables):
        bt, bd, p = by_tokens_target[j], by_tokens_draft[j], parameters[j]
        at_big = step_seconds(bt, bd, p, 1, 0, big, 0.0, t_full, d_full)
        per_context_at[j] = (at_big - step_seconds(bt, bd, p, 1, 0, 0.0, 0.0, 0.0, 0.0)) / big
    table, running_table, step_tokens = 0, -1, 1 + lookahead
    prefilling = np.zeros(n, dtype=np.int64)
    waiting = np.zeros(n + 1, dtype=np.int64)
    ends = [(np.int64(0), np.int64(0))]
    ends.pop()
    itl = [(0.0, 0.0, np.int64(0), np.int64(0))]
    itl.pop()
    s[ARR_TAIL] = s[SENT] = n if clients == 0 else min(clients, n)
    if clients:
        for i in range(s[ARR_TAIL]):
            rf[SEEN_AT, i], rf[SENT_AT, i], ri[ARRIVE_ID, i] = 0.0, 0.0, i
    switched_rates = rate_at[0]
    while s[DONE] < n and s[OVER] == 0:
        # an idle engine steps as soon as one request is in (vLLM's EngineCore and SGLang's
        # scheduler wake on their input queue): requests sent at once reach it one after
        # another, so the first runs its step alone and the rest join the next
        if s[DEC_COUNT] == 0 and s[PF_COUNT] == 0 and s[WQ_COUNT] == 0:
            if s[ARR_HEAD] >= s[ARR_TAIL]:
                break  # nothing running and nothing to come (not reached: every request ends)
            f[T] = max(f[T], rf[SENT_AT, s[ARR_HEAD]])
            f[LAUNCHED] = f[T]
            _take(s, ri, rf, waiting)  # it takes the first as it is sent
        else:  # those the scheduler sees as it chooses the step starting now: in by now, or
            # (ahead) by the start of the step that just ended
            horizon = f[LAUNCHED] if ahead else f[T]
            while s[ARR_HEAD] < s[ARR_TAIL] and rf[SEEN_AT, s[ARR_HEAD]] <= horizon:
                _take(s, ri, rf, waiting)
        if switching:  # the K of the requests the step schedules, prefills included
            batch = s[DEC_COUNT] + s[PF_COUNT]
            at = np.searchsorted(last_batch, max(batch, 1))
            table = table_at[min(at, last_batch.shape[0] - 1)]
            f[SCALE] = step_scale[min(batch, step_scale.shape[0] - 1)]
            if table != running_table:
                running_table = table
                step_tokens = 1 + int(parameters[table, DRAFT_K])
                switched_rates = rate_at[table]
                _switch_k(f, s, ri, rf, switched_rates, ends, give_up)
        bt, bd, p = by_tokens_target[table], by_tokens_draft[table], parameters[table]
        if (s[PF_COUNT] or s[WQ_COUNT]) and _prefill_step(
            f,
            s,
            ri,
            rf,
            prefilling,
            waiting,
            layouts,
            limits,
            step_tokens,
            bt,
            bd,
            p,
            switched_rates,
            ends,
            itl,
            give_up,
        ):
            continue
        if s[DEC_COUNT]:
            _decode_run(
                f,
                s,
                ri,
                rf,
                prefilling,
                waiting,
                layouts,
                limits,
                bt,
                bd,
                p,
                windowed,
                intercepts[table],
                per_context_at[table],
                ends,
                itl,
                give_up,
            )
        else:  # prefills alone fill the pool: the last admitted goes back to the queue
            _preempt(s, ri, rf, f, prefilling, waiting)
    runs = len(itl)
    times = np.empty((runs, 2))
    counts = np.empty((runs, 2), dtype=np.int64)
    for j in range(runs):
        first, slope, steps, sequences = itl[j]
        times[j, 0], times[j, 1], counts[j, 0], counts[j, 1] = first, slope, steps, sequences
    return f[RUNNING_SECONDS], s[PREEMPTIONS], s[OVER], times, counts


@njit(cache=True)
def _switch_k(
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
        _stop_decoding(f, s, ri, rf, i)
        _decode_from(f, s, ri, rf, i, context, switched_rates, ends, give_up)


@njit(cache=True)
def _decode_run(
    f: np.ndarray,
    s: np.ndarray,
    ri: np.ndarray,
    rf: np.ndarray,
    prefilling: np.ndarray,
    waiting: np.ndarray,
    layouts: np.ndarray,
    limits: np.ndarray,
    bt: np.ndarray,
    bd: np.ndarray,
    p: np.ndarray,
    windowed: bool,
    intercepts: np.ndarray,
    per_context: float,
    ends: list[tuple[int, int]],
    itl: list[tuple[float, float, int, int]],
    give_up: np.ndarray,
) -> None:
    """Decode only, up to the next event: a completion, an arrival the scheduler could
    admit, or the step at which the pool runs out (then preempt)."""
    pool, capacity, lookahead = layouts[0], limits[3], int(limits[2])
    g = s[G]
    steps = ends[0][0] - g if len(ends) > 0 else 1
    if windowed:
        held = _held(pool, g, lookahead, f, s, ri, rf, prefilling)
        growth = _held(pool, g + 1, lookahead, f, s, ri, rf, prefilling) - held
        first = _all_decode_seconds(f, s, ri, rf, g, layouts, bt, bd, p)
        slope = _all_decode_seconds(f, s, ri, rf, g + 1, layouts, bt, bd, p) - first
    else:  # every term is linear in Σ contexts: the same numbers, without the sums
        n = s[DEC_COUNT]
        context_rate = f[CONTEXT_RATE]
        context = f[CONTEXT_BASE] + context_rate * g
        held = pool[0] * (context + lookahead * n) + pool[3] * n
        if s[PF_COUNT]:
            held += _prefilled_kv(pool, s, ri, prefilling)
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
        _preempt(s, ri, rf, f, prefilling, waiting)
        return
    if s[ARR_HEAD] < s[ARR_TAIL] and not s[WQ_COUNT] and s[DEC_COUNT] < int(limits[0]):
        # until the scheduler chooses a step with the next request in it: the step after the
        # one it arrives in, or (a scheduler one step ahead) the one after that
        wait = rf[SEEN_AT, s[ARR_HEAD]] - f[T]
        if limits[6] == 0.0:
            steps = steps_until(wait, first, slope, steps)
        else:
            steps = min(steps, 1 + (steps_until(wait, first, slope, steps) if wait > 0 else 0))
    _advance(f, s, ri, rf, max(steps, 1), first, slope, ends, itl, give_up)
