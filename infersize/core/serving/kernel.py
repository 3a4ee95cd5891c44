"""The simulator's loop compiled (numba): one replica's state and its steps, as
core/serving/simulate.py describes them. One function serves at one K or with K switched by the
running batch. Every float is computed as the step model and the scheduler state it mirrors
define it, operation by operation and in the same order, so a run is the same to the last bit
at any speed (tests/test_simulate.py holds runs to hand-computed and engine-rule answers).

The step model is core/serving/step_math.step_seconds, compiled, over a StepTable's numbers as
arrays (StepTable.arrays). Lengths are tokens, KV bytes, times seconds.

The state a step reads is laid out in core/serving/kernel_layout.py and kept by
kernel_requests.py; the steps are kernel_steps.py's.

serve's arguments: requests arrive at SENT_AT, seen by the engine from SEEN_AT (an open loop,
`clients` 0), else `clients` send at once and each sends its next when its last ends.
`limits`: max_num_seqs, max_num_batched_tokens, lookahead, the pool's bytes, then 1 or 0: mixed
prefill, whole-request admission, a scheduler one step ahead. `layouts`: the pool's, the
target's and the drafter's KV layouts. Tables: row j of `by_tokens_*` and `parameters` is a
StepTable's arrays; without a switch (`last_batch` empty) table 0 serves every step, else the
step's batch b picks range bisect_left(last_batch, max(b, 1)) (the last past the end), served
by table `table_at[range]` at scale `step_scale[b]` (its last entry past the end), each
request at `steps_at[table]` steps. `give_up`: per-request bounds (ttft, tpot, e2e seconds)
then how many requests may break each; empty: none.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from infersize.core.serving.kernel_cache import refresh_once
from infersize.core.serving.kernel_layout import (
    ARR_HEAD,
    ARR_TAIL,
    ARRIVE_ID,
    DEC_COUNT,
    DEC_HEAD,
    DEC_TAIL,
    DONE,
    END,
    FINAL_KV,
    FLOAT_SCALARS,
    INPUT,
    INT_SCALARS,
    LAUNCHED,
    NOT_DECODING,
    NXT,
    OUTPUT,
    OVER,
    PF_COUNT,
    PREEMPTIONS,
    PROMPT,
    PRV,
    RATE,
    RESERVE_WHOLE,
    RUNNING_SECONDS,
    SCALE,
    SEEN_AT,
    SENT,
    SENT_AT,
    STEPS_LEFT,
    WQ_COUNT,
    T,
)
from infersize.core.serving.kernel_requests import (
    preempt,
    sequence_kv,
    take,
)
from infersize.core.serving.kernel_steps import (
    decode_run,
    prefill_step,
    step_seconds,
    switch_k,
)
from infersize.core.serving.step_math import DRAFT_K

refresh_once()  # numba keeps callees inside cached callers (kernel_cache.py)


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
    finished or the give-up rule stops the run; the arguments as the module says. Returns the
    running seconds, the preemptions, what the run gave up on (GAVE_UP's index), and the
    streamed chunks' runs: (first seconds, slope) and (steps, sequences) per run."""
    n = ri.shape[1]
    switching = last_batch.shape[0] > 0
    f, s = _start(ri, rf, clients, layouts, limits)
    rate_at = _rates_at(ri, steps_at, switching)
    per_context_at, intercepts = _per_context(
        by_tokens_target, by_tokens_draft, parameters, layouts, limits
    )
    windowed = layouts[0, 1] != 0.0 or layouts[1, 1] != 0.0 or layouts[2, 1] != 0.0
    table, running_table, step_tokens = 0, -1, 1 + int(limits[2])
    queues = (np.zeros(n, dtype=np.int64), np.zeros(n + 1, dtype=np.int64))  # prefills, queue
    run = (f, s, ri, rf, queues[0], queues[1])
    ends = [(np.int64(0), np.int64(0))]
    ends.pop()
    itl = [(0.0, 0.0, np.int64(0), np.int64(0))]
    itl.pop()
    switched_rates = rate_at[0]
    while s[DONE] < n and s[OVER] == 0 and _arrive(run, limits[6] != 0.0):
        if switching:  # the K of the requests the step schedules, prefills included
            batch = s[DEC_COUNT] + s[PF_COUNT]
            at = np.searchsorted(last_batch, max(batch, 1))
            table = table_at[min(at, last_batch.shape[0] - 1)]
            f[SCALE] = step_scale[min(batch, step_scale.shape[0] - 1)]
            if table != running_table:
                running_table = table
                step_tokens = 1 + int(parameters[table, DRAFT_K])
                switched_rates = rate_at[table]
                switch_k(f, s, ri, rf, switched_rates, ends, give_up)
        step = (by_tokens_target[table], by_tokens_draft[table], parameters[table])
        bookkeeping = (switched_rates, give_up)
        if (s[PF_COUNT] or s[WQ_COUNT]) and prefill_step(
            run, layouts, limits, step_tokens, step, bookkeeping, ends, itl
        ):
            continue
        if s[DEC_COUNT]:
            moment = (windowed, intercepts[table], per_context_at[table])
            decode_run(run, layouts, limits, step, moment, give_up, ends, itl)
        else:  # prefills alone fill the pool: the last admitted goes back to the queue
            preempt(s, ri, rf, f, queues[0], queues[1])
    times, counts = _itl_arrays(itl)
    return f[RUNNING_SECONDS], s[PREEMPTIONS], s[OVER], times, counts


@njit(cache=True)
def _start(
    ri: np.ndarray, rf: np.ndarray, clients: int, layouts: np.ndarray, limits: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The run's scalars at its start, and each request's rate, final KV and first arrivals."""
    n = ri.shape[1]
    lookahead = int(limits[2])
    f = np.zeros(FLOAT_SCALARS)
    f[SCALE] = 1.0
    s = np.zeros(INT_SCALARS, dtype=np.int64)
    s[DEC_HEAD] = -1
    s[DEC_TAIL] = -1
    s[RESERVE_WHOLE] = limits[5] != 0.0
    for i in range(n):
        out = ri[OUTPUT, i]
        rf[RATE, i] = _tokens_a_step(out, ri[STEPS_LEFT, i])
        final = float(ri[INPUT, i] + out + lookahead)
        rf[FINAL_KV, i] = sequence_kv(layouts[0], final)
    ri[PROMPT] = ri[INPUT]
    ri[NXT] = NOT_DECODING
    ri[PRV] = NOT_DECODING
    ri[END] = -1
    s[ARR_TAIL] = n if clients == 0 else min(clients, n)
    s[SENT] = s[ARR_TAIL]
    if clients:  # a closed loop: each client's first request, sent at once
        for i in range(s[ARR_TAIL]):
            rf[SEEN_AT, i], rf[SENT_AT, i], ri[ARRIVE_ID, i] = 0.0, 0.0, i
    return f, s


@njit(cache=True)
def _rates_at(ri: np.ndarray, steps_at: np.ndarray, switching: bool) -> np.ndarray:
    """Under a K switch, each request's tokens a step at each table's K."""
    n = ri.shape[1]
    tables = steps_at.shape[0]
    rate_at = np.zeros((tables, n if switching else 0))
    for j in range(tables if switching else 0):
        for i in range(n):
            rate_at[j, i] = _tokens_a_step(ri[OUTPUT, i], steps_at[j, i])
    return rate_at


@njit(cache=True)
def _tokens_a_step(output: int, steps: int) -> float:
    """A request's mean tokens a step after its first: (output − 1) over its drawn steps."""
    return (output - 1) / steps if steps > 0 else 0.0


@njit(cache=True)
def _per_context(
    by_tokens_target: np.ndarray,
    by_tokens_draft: np.ndarray,
    parameters: np.ndarray,
    layouts: np.ndarray,
    limits: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Without windows an all-decode step is an intercept by count plus a cost per token of
    context (the step model is affine in it): each table's cost per token, read off once, and
    room for its intercepts (NaN until read)."""
    tables = parameters.shape[0]
    per_context_at = np.zeros(tables)
    big = 1e6  # tokens of context for the slope's difference (exact: affine)
    t_full, d_full = layouts[1, 0] * big, layouts[2, 0] * big
    for j in range(tables):
        bt, bd, p = by_tokens_target[j], by_tokens_draft[j], parameters[j]
        at_big = step_seconds(bt, bd, p, 1, 0, big, 0.0, t_full, d_full)
        per_context_at[j] = (at_big - step_seconds(bt, bd, p, 1, 0, 0.0, 0.0, 0.0, 0.0)) / big
    return per_context_at, np.full((tables, int(limits[0]) + 2), np.nan)


@njit(cache=True)
def _arrive(
    run: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    ahead: bool,
) -> bool:
    """The requests the scheduler sees as it chooses the step starting now: those in by now,
    or (a scheduler one step ahead) by the start of the step that just ended. An idle engine
    steps as soon as one request is in (vLLM's EngineCore and SGLang's scheduler wake on their
    input queue): requests sent at once reach it one after another, so the first runs its step
    alone and the rest join the next. False: nothing runs and nothing is to come."""
    f, s, ri, rf, _, waiting = run
    if s[DEC_COUNT] == 0 and s[PF_COUNT] == 0 and s[WQ_COUNT] == 0:
        if s[ARR_HEAD] >= s[ARR_TAIL]:
            return False  # not reached: every request ends
        f[T] = max(f[T], rf[SENT_AT, s[ARR_HEAD]])
        f[LAUNCHED] = f[T]
        take(s, ri, rf, waiting)  # it takes the first as it is sent
        return True
    horizon = f[LAUNCHED] if ahead else f[T]
    while s[ARR_HEAD] < s[ARR_TAIL] and rf[SEEN_AT, s[ARR_HEAD]] <= horizon:
        take(s, ri, rf, waiting)
    return True


@njit(cache=True)
def _itl_arrays(itl: list[tuple[float, float, int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """The streamed chunks' runs as arrays: (first seconds, slope), (steps, sequences)."""
    runs = len(itl)
    times = np.empty((runs, 2))
    counts = np.empty((runs, 2), dtype=np.int64)
    for j in range(runs):
        first, slope, steps, sequences = itl[j]
        times[j, 0], times[j, 1], counts[j, 0], counts[j, 1] = first, slope, steps, sequences
    return times, counts
