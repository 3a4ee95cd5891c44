"""A step-by-step simulation of one replica serving a stream of requests, as vLLM V1 schedules
them (vllm/v1/core/sched/scheduler.py, `Scheduler.schedule`):

- every step spends one token budget (max_num_batched_tokens): running decodes first, 1 + K
  tokens each, then the running prefills' next chunks, then waiting requests in arrival order,
  each admitted while fewer than max_num_seqs run and the KV pool has room for its first chunk
  (chunked prefill; a prompt's first token comes out with its last chunk);
- a decode that finds no room for its next tokens preempts the most recently admitted request,
  which gives back its KV and waits at the head of the queue to recompute it (recompute
  preemption, `_preempt_request`); no request is admitted in a step that preempted;
- other engines' rules (Replica): SGLang prefills in steps of its own while the decodes wait;
  TensorRT-LLM admits a request only when its whole answer's KV fits, never preempting; an idle
  engine steps as soon as one request is in, so a closed loop's clients do not stay in lockstep;
- a client's next request reaches a busy engine after it has chosen its next step (core/serving/
  kernel.py), and an engine that schedules ahead (vLLM's async scheduling) chose the one after that
  too, so a request arriving during step n joins step n + 1, or n + 2.

The step's time is the step model's (core/serving/step.py). Between events (an arrival, a
completion, a prefill, a preemption) every running request decodes, so the loop moves many steps
at once: the step time is affine in the step index there (contexts grow by each request's mean
emission per step), so an interval's time is a sum in closed form. Contexts grow at each
request's own mean rate (its tokens over its drawn steps); which steps a request needs is drawn
up front (core/serving/traffic.py), so the spread of TPOT comes from acceptance, not from the
interpolation.

The loop is compiled (core/serving/kernel.py, numba): a fraction of a microsecond an event,
where plain Python took several (measured: benchmarks/capacity_bench.py); every float is
computed in the order the rules above define it, so a run's numbers do not depend on it.

With a K switch (replica.KSwitch: vLLM's num_speculative_tokens_per_batch_size, TensorRT-LLM's
draft_len_schedule) the K of every step is the one its table gives the requests running when
the step is scheduled, prefills included, as vLLM reads it (vllm/v1/spec_decode/dynamic/utils.py at
vllm-project/vllm@48ebd6f2f164057043edb8301771a17dcaebd61d). Each request's steps are drawn at
every K of the table (as an arm at that K draws them); when K changes, each decoding request
keeps the tokens it has emitted and needs its remaining ones at the new K's rate, so its
remaining steps are its share of the work left times its steps at that K.
"""

from __future__ import annotations

import numpy as np

from infersize.core.arrays import floats
from infersize.core.serving import kernel_layout as state
from infersize.core.serving.replica import (
    GiveUp,
    Load,
    Replica,
    Run,
    check_fits,
    layout_floats,
)
from infersize.core.serving.step import StepTable


def _give_up(rule: GiveUp | None) -> np.ndarray:
    if rule is None:
        return floats([])
    return floats(
        [
            rule.ttft_s,
            rule.tpot_s,
            rule.e2e_s,
            rule.ttft_allowed,
            rule.tpot_allowed,
            rule.e2e_allowed,
        ]
    )


def _tables(replica: Replica, load: Load) -> tuple[list[StepTable], dict[str, np.ndarray]]:
    """The step tables the run reads (one; a switch's, one per K) and how a batch picks one."""
    switch = replica.switch
    n = len(load.input_tokens)
    if switch is None:
        empty = np.zeros(0, dtype=np.int64)
        return [replica.table], {
            "last_batch": empty,
            "table_at": empty,
            "step_scale": floats([1.0]),
            "steps_at": np.zeros((1, 0), dtype=np.int64),
        }
    ks = sorted(switch.tables)
    steps_by_k = load.steps_by_k or {}
    return [switch.tables[k] for k in ks], {
        "last_batch": np.asarray(switch.last_batch, dtype=np.int64),
        "table_at": np.asarray([ks.index(k) for k in switch.draft_k], dtype=np.int64),
        "step_scale": floats(switch.scale),
        "steps_at": np.stack([np.asarray(steps_by_k[k], dtype=np.int64) for k in ks])
        if n
        else np.zeros((len(ks), 0), dtype=np.int64),
    }


def _requests(
    load: Load, inputs: np.ndarray, outputs: np.ndarray
) -> tuple[np.ndarray, np.ndarray, int]:
    """The requests' rows as the compiled loop reads them, and the closed loop's clients (0:
    an open loop, its arrivals in the rows)."""
    n = len(inputs)
    ri = np.zeros((state.INT_ROWS, n), dtype=np.int64)
    ri[state.INPUT], ri[state.OUTPUT] = inputs, outputs
    ri[state.STEPS_LEFT] = np.asarray(load.steps, dtype=np.int64)
    ri[state.ARRIVE_ID] = np.arange(n)
    ri[state.END] = -1
    rf = np.full((state.FLOAT_ROWS, n), np.nan)
    rf[state.START_CONTEXT] = 0.0
    if load.arrivals is None:
        return ri, rf, max(int(load.concurrency or 1), 1)
    rf[state.SEEN_AT] = rf[state.SENT_AT] = np.asarray(load.arrivals, dtype=np.float64)
    return ri, rf, 0


def _limits(replica: Replica, capacity: float) -> np.ndarray:
    """The replica's scheduler limits and rules, in the order the compiled loop reads them."""
    return floats(
        [
            replica.max_num_seqs,
            replica.max_num_batched_tokens,
            replica.lookahead,
            capacity,
            float(replica.mixed_prefill),
            float(replica.reserve_whole),
            float(replica.schedules_ahead),
        ]
    )


def simulate(replica: Replica, load: Load) -> Run:
    """Serve `load` on `replica`, step by step, until every request has finished."""
    inputs = np.asarray(load.input_tokens, dtype=np.int64)
    outputs = np.asarray(load.output_tokens, dtype=np.int64)
    pool = layout_floats(replica.pool_kv)
    capacity = float(replica.kv_capacity_bytes)
    check_fits(pool, capacity, inputs, outputs, replica.lookahead)
    ri, rf, clients = _requests(load, inputs, outputs)
    tables, switch = _tables(replica, load)
    layouts = floats([pool, layout_floats(replica.target_kv), layout_floats(replica.draft_kv)])
    # the compiled loop loads numba (half a second) on first use: a decode-only sweep never does
    from infersize.core.serving import kernel

    running_seconds, preemptions, gave_up, times, counts = kernel.serve(
        ri,
        rf,
        clients,
        layouts,
        _limits(replica, capacity),
        np.stack([t.arrays[0] for t in tables]),
        np.stack([t.arrays[1] for t in tables]),
        np.stack([t.arrays[2] for t in tables]),
        switch["last_batch"],
        switch["table_at"],
        switch["step_scale"],
        switch["steps_at"],
        _give_up(load.give_up),
    )
    finish, arrival = rf[state.FINISH], rf[state.ARRIVAL]
    finished = finish[~np.isnan(finish)]
    span = float(finished.max() - np.nanmin(arrival)) if finished.size else 0.0
    return Run(
        arrival=arrival.copy(),
        admitted=rf[state.ADMITTED].copy(),
        first_token=rf[state.FIRST_TOKEN].copy(),
        finish=finish.copy(),
        output_tokens=outputs.copy(),
        running_seconds=float(running_seconds),
        gave_up=state.GAVE_UP[int(gave_up)],
        span=span,
        open_loop=load.arrivals is not None,
        preemptions=int(preemptions),
        itl_first=times[:, 0].copy(),
        itl_slope=times[:, 1].copy(),
        itl_steps=counts[:, 0].copy(),
        itl_weight=counts[:, 1].copy(),
    )
