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
  loop.py), and an engine that schedules ahead (vLLM's async scheduling) chose the one after that
  too, so a request arriving during step n joins step n + 1, or n + 2.

The step's time is the step model's (core/serving/step.py). Between events (an arrival, a
completion, a prefill, a preemption) every running request decodes, so the loop moves many steps
at once: the step time is affine in the step index there (contexts grow by each request's mean
emission per step), so an interval's time is a sum in closed form. Contexts grow at each
request's own mean rate (its tokens over its drawn steps); which steps a request needs is drawn
up front (core/serving/traffic.py), so the spread of TPOT comes from acceptance, not from the
interpolation.

The loop itself is plain Python over scalars: a few microseconds an event, where numpy's per-call
cost on arrays of a few hundred would dominate (measured: benchmarks/capacity_bench.py).

With a K switch (replica.KSwitch: vLLM's num_speculative_tokens_per_batch_size, TensorRT-LLM's
draft_len_schedule) the K of every step is the one its table gives the requests running when
the step is scheduled, prefills included, as vLLM reads it (vllm/v1/spec_decode/dynamic/utils.py at
vllm-project/vllm@48ebd6f2f164057043edb8301771a17dcaebd61d). Each request's steps are drawn at
every K of the table (as an arm at that K draws them); when K changes, each decoding request
keeps the tokens it has emitted and needs its remaining ones at the new K's rate, so its
remaining steps are its share of the work left times its steps at that K.
"""

from __future__ import annotations

import math

from infersize.core.serving.loop import Simulation
from infersize.core.serving.replica import KSwitch, Load, Replica, Run


class _Switching(Simulation):
    """The loop with K chosen per step by the requests running."""

    def __init__(self, replica: Replica, load: Load, switch: KSwitch) -> None:
        super().__init__(replica, load)
        self.switch = switch
        steps = load.steps_by_k or {}
        decode = [o - 1 for o in self.outputs]
        self.rate_at = {
            k: [d / s if s > 0 else 0.0 for d, s in zip(decode, steps[k].tolist(), strict=True)]
            for k in set(switch.draft_k)
        }
        self.running_k = -1
        self.per_context_at: dict[int, float] = {}
        self.intercepts_at: dict[int, dict[int, float]] = {}

    def _before_step(self) -> None:
        batch = len(self.decoding) + len(self.prefilling)
        k = self.switch.k_at(max(batch, 1))
        self.scale = self.switch.scale_at(batch)
        if k == self.running_k:
            return
        self.running_k = k
        self.table = self.switch.tables[k]
        self.step_tokens = 1 + k
        if k not in self.per_context_at:
            self.per_context_at[k] = self._per_context()
        self.per_context = self.per_context_at[k]
        self.intercepts = self.intercepts_at.setdefault(k, {})
        g = self.g
        for i in list(self.decoding):  # each keeps what it emitted, the rest at the new rate
            context = self.start_context[i] + self.rate[i] * (g - self.start[i])
            self._stop_decoding(i)
            self._decode_from(i, context)

    def _decode_from(self, i: int, start: float) -> None:
        """Request i's remaining tokens at the running K's rate: the share of its answer left
        times its steps at that K."""
        rate = self.rate_at[self.running_k][i]
        left = self.outputs[i] - 1 - (start - self.inputs[i])
        self.rate[i] = rate
        self.steps_left[i] = math.ceil(left / rate - 1e-9) if rate > 0 and left > 0 else 0
        super()._decode_from(i, start)


def simulate(replica: Replica, load: Load) -> Run:
    """Serve `load` on `replica`, step by step, until every request has finished."""
    if replica.switch is not None:
        return _Switching(replica, load, replica.switch).run()
    return Simulation(replica, load).run()
