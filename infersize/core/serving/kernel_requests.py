"""The compiled loop's state (core/serving/kernel.py): its scalars and the requests' numbers by
index, and what happens to a request: it arrives, is preempted, starts or stops decoding, and
finishes (a closed loop's client then sends its next; a give-up rule counts its latencies).

The decoding requests are a linked list in the order they started decoding (NXT, PRV; their
Σ contexts are two running sums, context_base + context_rate · step), the waiting queue a ring
(preempted requests go back to its head), the arrivals a queue filled in advance (open loop) or
as clients send, and the ends a heap of (last step, request) from which stale entries are
skipped.
"""

from __future__ import annotations

import heapq
import math

import numpy as np
from numba import njit

from infersize.core.serving import step_math
from infersize.core.serving.kernel_cache import refresh_once
from infersize.core.serving.kernel_layout import (
    ARR_HEAD,
    ARR_TAIL,
    ARRIVAL,
    ARRIVE_ID,
    BROKEN,
    COMPUTED,
    CONTEXT_BASE,
    CONTEXT_RATE,
    DEC_COUNT,
    DEC_HEAD,
    DEC_TAIL,
    DONE,
    END,
    FINAL_KV,
    FINISH,
    FIRST_TOKEN,
    INPUT,
    LAUNCHED,
    NOT_DECODING,
    NXT,
    ORDER,
    OUTPUT,
    OVER,
    PF_COUNT,
    PREEMPTIONS,
    PROMPT,
    PRV,
    RATE,
    RESERVE_WHOLE,
    RESERVED,
    RUNNING_SECONDS,
    SEEN_AT,
    SENT,
    SENT_AT,
    START,
    START_CONTEXT,
    STEPS_LEFT,
    WQ_COUNT,
    WQ_HEAD,
    G,
    T,
)

refresh_once()  # numba keeps callees inside cached callers (kernel_cache.py)

# a sequence's KV bytes, compiled for the loop (the same function, in Python, for the rest)
sequence_kv = njit(cache=True)(step_math.sequence_kv)


@njit(cache=True)
def round_half_even(x: float) -> int:
    """Python's round(x): the nearest integer, ties to even."""
    whole = math.floor(x)
    part = x - whole
    if part > 0.5 or (part == 0.5 and whole % 2 == 1):
        whole += 1
    return int(whole)


@njit(cache=True)
def check_over(s: np.ndarray, give_up: np.ndarray) -> None:
    """The last of ttft, tpot, e2e whose broken requests passed their allowance (it stays)."""
    for metric in range(3):
        if s[BROKEN + metric] > give_up[3 + metric]:
            s[OVER] = metric + 1


@njit(cache=True)
def finish(
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
        check_over(s, give_up)


@njit(cache=True)
def stop_decoding(f: np.ndarray, s: np.ndarray, ri: np.ndarray, rf: np.ndarray, i: int) -> None:
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
def decode_from(
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
        finish(f, s, ri, rf, i, give_up)
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
def advance(
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
            stop_decoding(f, s, ri, rf, i)
            finish(f, s, ri, rf, i, give_up)


@njit(cache=True)
def preempt(
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
        stop_decoding(f, s, ri, rf, victim)
        ri[STEPS_LEFT, victim] = ri[END, victim] - s[G]
        ri[PROMPT, victim] = round_half_even(rf[START_CONTEXT, victim] + emitted)
    else:
        remove_prefilling(s, prefilling, victim)
    ri[COMPUTED, victim] = 0
    ring = waiting.shape[0]
    s[WQ_HEAD] = (s[WQ_HEAD] - 1) % ring
    waiting[s[WQ_HEAD]] = victim
    s[WQ_COUNT] += 1


@njit(cache=True)
def remove_prefilling(s: np.ndarray, prefilling: np.ndarray, i: int) -> None:
    count = s[PF_COUNT]
    j = 0
    while prefilling[j] != i:
        j += 1
    for m in range(j, count - 1):
        prefilling[m] = prefilling[m + 1]
    s[PF_COUNT] = count - 1


@njit(cache=True)
def take(s: np.ndarray, ri: np.ndarray, rf: np.ndarray, waiting: np.ndarray) -> None:
    """The next request in the arrivals queue joins the waiting queue (arrived when sent)."""
    head = s[ARR_HEAD]
    i = ri[ARRIVE_ID, head]
    rf[ARRIVAL, i] = rf[SENT_AT, head]
    s[ARR_HEAD] = head + 1
    ring = waiting.shape[0]
    waiting[(s[WQ_HEAD] + s[WQ_COUNT]) % ring] = i
    s[WQ_COUNT] += 1


@njit(cache=True)
def decode_kv(
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
def prefilled_kv(
    layout: np.ndarray, s: np.ndarray, ri: np.ndarray, prefilling: np.ndarray
) -> float:
    """Σ KV bytes of the prompts' computed chunks."""
    total = 0.0
    for j in range(s[PF_COUNT]):
        total += sequence_kv(layout, float(ri[COMPUTED, prefilling[j]]))
    return total
