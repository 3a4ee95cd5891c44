"""The simulator's loop: one replica's state and its steps, as core/serving/simulate.py
describes them. `Simulation` serves at one K; simulate.py's subclass switches K by the running
batch through the hooks here (`step_tokens`, `table`, `scale`, `_before_step`, `_decode_from`).
"""

from __future__ import annotations

import heapq
import math
from collections import deque

import numpy as np

from infersize.core.serving.replica import (
    Layout,
    Load,
    Replica,
    Run,
    Tally,
    check_fits,
    first_arrivals,
    layout_floats,
    sequence_kv_bytes,
    steps_until_seen,
)


class Simulation:
    """The simulation's state; `run()` drives it. Lengths are tokens, KV bytes, times seconds.

    A decoding request i started decoding at step start[i] with start_context[i] tokens and
    grows by rate[i] tokens a step; it ends with step end[i]. Σ contexts of the decoding
    requests at step g is context_base + context_rate · g, kept as two running sums."""

    def __init__(self, replica: Replica, load: Load) -> None:
        self.r = replica
        self.n = len(load.input_tokens)
        self.inputs = [int(x) for x in load.input_tokens]
        self.outputs = [int(x) for x in load.output_tokens]
        self.steps_left = [int(x) for x in load.steps]
        pairs = zip(self.outputs, self.steps_left, strict=True)
        self.rate = [(o - 1) / s if s > 0 else 0.0 for o, s in pairs]
        self.k = replica.lookahead  # KV slots reserved per decode (K, n − 1)
        self.step_tokens = replica.step_tokens  # budget tokens per decode (1 + K, a tree's n)
        self.table = replica.table  # the step model at the K running
        self.scale = 1.0  # the step time's factor (a K schedule's cost to the engine)
        self.t, self.g = 0.0, 0
        self.waiting: deque[int] = deque()
        self.prefilling: list[int] = []  # admitted, prompt not yet computed; admission order
        self.prompt = list(self.inputs)  # tokens to compute before decoding (grows on preemption)
        self.computed = [0] * self.n
        self.decoding: dict[int, None] = {}  # ids, in the order they started decoding
        self.ends: list[tuple[int, int]] = []  # heap of (last step, id); stale entries skipped
        self.start, self.end = [0] * self.n, [-1] * self.n
        self.start_context = [0.0] * self.n
        self.order = [0] * self.n  # admission order: the last admitted is preempted first
        self.admissions = 0
        self.context_base = self.context_rate = 0.0
        self.arrival = [math.nan] * self.n
        self.admitted = [math.nan] * self.n
        self.first_token = [math.nan] * self.n
        self.finish = [math.nan] * self.n
        self.running_seconds, self.preemptions, self.done = 0.0, 0, 0
        self.reserved = 0.0  # whole-request admission: the running requests' final KV bytes
        self.itl: list[tuple[float, float, int, int]] = []
        self.pool, self.target = layout_floats(replica.pool_kv), layout_floats(replica.target_kv)
        self.draft = layout_floats(replica.draft_kv)
        self.capacity = float(replica.kv_capacity_bytes)
        self.tally = None if load.give_up is None else Tally(rule=load.give_up)
        self.gave_up = ""
        self.windowed = any(layout[1] for layout in (self.pool, self.target, self.draft))
        # without windows an all-decode step is an intercept by count plus a cost per token of
        # context (the step model is affine in it): read both off the table once
        self.intercepts: dict[int, float] = {}
        self.per_context = self._per_context()
        # (seen from, sent: TTFT's origin, id); `sent`: the next request a client sends
        self.arrivals, self.sent = first_arrivals(load, self.n)
        self.open_loop = load.arrivals is not None
        self.ahead = replica.schedules_ahead  # it chose the step now starting a step ago
        self.launched = 0.0  # when the step that just ended began
        check_fits(self.pool, self.capacity, self.inputs, self.outputs, self.k)

    def _per_context(self) -> float:
        """Seconds an all-decode step adds per token of context (the table is affine in it)."""
        scale = 1e6  # tokens of context for the slope's difference (exact: affine)
        table = self.table
        return (
            table.seconds(1, 0, scale, 0.0, self.target[0] * scale, self.draft[0] * scale)
            - table.seconds(1, 0, 0.0, 0.0, 0.0, 0.0)
        ) / scale

    def _decode_kv(self, layout: Layout, step: int, extra: float = 0.0) -> float:
        """Σ KV bytes of the decoding requests at `step`, each `extra` tokens longer."""
        n = len(self.decoding)
        if n == 0:
            return 0.0
        full, window_bytes, window, state = layout
        total = full * (self.context_base + self.context_rate * step + extra * n) + state * n
        if window_bytes:
            total += window_bytes * sum(
                min(self.start_context[i] + self.rate[i] * (step - self.start[i]) + extra, window)
                for i in self.decoding
            )
        return total

    def _intercept(self, n: int) -> float:
        """An all-decode step of n sequences at no context (their fixed state included)."""
        if n not in self.intercepts:
            t_state, d_state = self.target[3] * n, self.draft[3] * n
            self.intercepts[n] = self.table.seconds(n, 0, 0.0, 0.0, t_state, d_state)
        return self.intercepts[n]

    def _held(self, step: int) -> float:
        """KV bytes the running requests hold at `step` (decodes with their draft slots)."""
        held = self._decode_kv(self.pool, step, float(self.k))
        if not self.prefilling:
            return held
        pool, computed = self.pool, self.computed
        return held + sum(sequence_kv_bytes(pool, float(computed[i])) for i in self.prefilling)

    def _step_seconds(
        self,
        step: int,
        prefill: int = 0,
        attended: float = 0.0,
        prefill_kv: tuple[float, float] = (0.0, 0.0),
    ) -> float:
        decoding = self.decoding
        contexts = self.context_base + self.context_rate * step if decoding else 0.0
        return self.scale * self.table.seconds(
            len(decoding),
            prefill,
            contexts,
            attended,
            self._decode_kv(self.target, step) + prefill_kv[0],
            self._decode_kv(self.draft, step) + prefill_kv[1],
        )

    # ---- requests coming and going ----

    def _take(self) -> None:
        _, sent, i = self.arrivals.popleft()
        self.arrival[i] = sent
        self.waiting.append(i)

    def _arrive(self) -> None:
        """The requests the scheduler sees as it chooses the step starting now: those in by now,
        or (ahead) by the start of the step that just ended."""
        horizon = self.launched if self.ahead else self.t
        while self.arrivals and self.arrivals[0][0] <= horizon:
            self._take()

    def _start_decoding(self, i: int) -> None:
        """Request i's prompt is in the KV cache: it decodes from the next step on."""
        self._decode_from(i, float(self.prompt[i]))

    def _decode_from(self, i: int, start: float) -> None:
        """Request i decodes from the next step on, from `start` tokens of context."""
        g = self.g
        end = g + self.steps_left[i]
        self.start[i], self.end[i] = g, end
        self.start_context[i] = start
        if self.steps_left[i] <= 0:
            self._finish(i)
            return
        self.decoding[i] = None
        rate = self.rate[i]
        self.context_base += start - rate * g
        self.context_rate += rate
        heapq.heappush(self.ends, (end, i))

    def _stop_decoding(self, i: int) -> None:
        decoding = self.decoding
        del decoding[i]
        rate = self.rate[i]
        self.context_base -= self.start_context[i] - rate * self.start[i]
        self.context_rate -= rate
        if not decoding:  # no drift from sums of many floats
            self.context_base = self.context_rate = 0.0

    def _final_kv(self, i: int) -> float:
        """KV bytes request i holds at its last step: prompt, answer and draft slots."""
        return sequence_kv_bytes(self.pool, float(self.inputs[i] + self.outputs[i] + self.k))

    def _finish(self, i: int) -> None:
        t = self.t
        self.finish[i] = t
        self.done += 1
        if self.r.reserve_whole:
            self.reserved -= self._final_kv(i)
        if self.sent < self.n:  # closed loop: this client sends its next request now
            # it comes back (detokenizer, HTTP, tokenizer) after the next step is chosen
            self.arrivals.append((math.nextafter(t, math.inf), t, self.sent))
            self.sent += 1
        if self.tally is not None:
            output = self.outputs[i]
            tpot = (t - self.first_token[i]) / (output - 1) if output > 1 else 0.0
            self.gave_up = self.tally.finished(tpot, t - self.arrival[i])

    def _preempt(self) -> None:
        """The most recently admitted running request gives back its KV and waits at the head
        of the queue to recompute its prompt and the tokens it has emitted."""
        running = [*self.decoding, *self.prefilling]
        victim = max(running, key=lambda i: self.order[i])
        self.preemptions += 1
        if victim in self.decoding:
            done_steps = self.g - self.start[victim]
            emitted = self.rate[victim] * done_steps
            self._stop_decoding(victim)
            self.steps_left[victim] = self.end[victim] - self.g
            self.prompt[victim] = round(self.start_context[victim] + emitted)
        else:
            self.prefilling.remove(victim)
        self.computed[victim] = 0
        self.waiting.appendleft(victim)

    # ---- steps ----

    def _prefill_step(self) -> bool:
        """One step with prefill chunks (running prefills first, then waiting requests within
        the budget, max_num_seqs and the pool); False when no chunk could be scheduled."""
        r, pool, capacity = self.r, self.pool, self.capacity
        prompt, computed, prefilling, waiting = (
            self.prompt,
            self.computed,
            self.prefilling,
            self.waiting,
        )
        decodes = len(self.decoding) * self.step_tokens if r.mixed_prefill else 0
        budget = r.max_num_batched_tokens - decodes
        held = self._held(self.g)
        chunks: list[tuple[int, int]] = []
        for i in prefilling:
            take = min(prompt[i] - computed[i], budget)
            if take <= 0 or held + sequence_kv_bytes(pool, float(take)) > capacity:
                continue
            chunks.append((i, take))
            budget -= take
            held += sequence_kv_bytes(pool, float(take)) - pool[3]
        running = len(self.decoding) + len(prefilling)
        while waiting and budget > 0 and running < r.max_num_seqs:
            i = waiting[0]
            take = min(prompt[i], budget)
            chunk_kv = sequence_kv_bytes(pool, float(take))
            if held + chunk_kv > capacity or not self._reserve(i):
                break  # the queue waits for KV to free up (first come, first served)
            waiting.popleft()
            prefilling.append(i)
            self.order[i] = self.admissions
            self.admissions += 1
            if self.admitted[i] != self.admitted[i]:  # NaN: its first admission
                self.admitted[i] = self.t
            chunks.append((i, take))
            budget -= take
            held += chunk_kv
            running += 1
        if not chunks:
            return False
        tokens = attended = kv_target = kv_draft = 0.0
        target, draft = self.target, self.draft
        for i, take in chunks:  # a chunk [a, b) attends to a+1 .. b tokens and reads b of KV
            a = computed[i]
            b = a + take
            tokens += take
            attended += (b * (b + 1) - a * (a + 1)) / 2.0
            kv_target += sequence_kv_bytes(target, float(b))
            kv_draft += sequence_kv_bytes(draft, float(b))
        if r.mixed_prefill:
            seconds = self._step_seconds(self.g, int(tokens), attended, (kv_target, kv_draft))
            self._advance(1, seconds, 0.0)
        else:  # a step of prompts alone: the decodes wait (time moves, their steps do not)
            table_seconds = self.table.seconds(0, int(tokens), 0.0, attended, kv_target, kv_draft)
            seconds = self.scale * table_seconds
            self.running_seconds += (len(self.decoding) + len(self.prefilling)) * seconds
            self.launched = self.t
            self.t += seconds
        self._computed(chunks)
        return True

    def _reserve(self, i: int) -> bool:
        """Whole-request admission: whether request i's final KV fits beside every running
        request's (then it is reserved); always true under first-chunk admission."""
        if not self.r.reserve_whole:
            return True
        need = self._final_kv(i)
        if self.reserved + need > self.capacity and (self.decoding or self.prefilling):
            return False
        self.reserved += need
        return True

    def _computed(self, chunks: list[tuple[int, int]]) -> None:
        """The step's chunks are in the KV cache: a prompt done gives its first token."""
        computed, prompt, tally = self.computed, self.prompt, self.tally
        for i, take in chunks:
            computed[i] += take
            if computed[i] >= prompt[i]:
                self.prefilling.remove(i)
                if self.first_token[i] != self.first_token[i]:  # NaN: its first token now
                    self.first_token[i] = self.t
                    if tally is not None:
                        self.gave_up = tally.first_token(self.t - self.arrival[i])
                self._start_decoding(i)

    def _advance(self, steps: int, first: float, slope: float) -> None:
        """Move `steps` steps of `first` seconds, each `slope` longer than the one before;
        requests whose last step this was finish."""
        seconds = steps * first + slope * steps * (steps - 1) / 2.0
        decoding = self.decoding
        self.running_seconds += (len(decoding) + len(self.prefilling)) * seconds
        if decoding:
            self.itl.append((first, slope, steps, len(decoding)))
        self.t += seconds
        self.launched = self.t - (first + slope * (steps - 1))  # the last step's start
        self.g = g = self.g + steps
        ends, end_of = self.ends, self.end
        while ends and ends[0][0] <= g:
            end, i = heapq.heappop(ends)
            if i in decoding and end_of[i] == end:
                self._stop_decoding(i)
                self._finish(i)

    def _decode_run(self) -> None:
        """Decode only, up to the next event: a completion, an arrival the scheduler could
        admit, or the step at which the pool runs out (then preempt)."""
        r, g, ends = self.r, self.g, self.ends
        steps = ends[0][0] - g if ends else 1
        if self.windowed:
            held = self._held(g)
            growth = self._held(g + 1) - held
            first = self._step_seconds(g)
            slope = self._step_seconds(g + 1) - first
        else:  # every term is linear in Σ contexts: the same numbers, without the sums
            pool, context_rate = self.pool, self.context_rate
            n, full, state = len(self.decoding), pool[0], pool[3]
            context = self.context_base + context_rate * g
            held = full * (context + self.k * n) + state * n
            if self.prefilling:
                computed = self.computed
                held += sum(sequence_kv_bytes(pool, float(computed[i])) for i in self.prefilling)
            growth = full * context_rate
            intercept = self.intercepts.get(n)
            if intercept is None:
                intercept = self._intercept(n)
            first = self.scale * (intercept + self.per_context * context)
            slope = self.scale * self.per_context * context_rate
        if growth > 0:
            steps = min(steps, int((self.capacity - held) // growth))
        if steps < 1:
            self._preempt()
            return
        arrivals = self.arrivals
        if arrivals and not self.waiting and len(self.decoding) < r.max_num_seqs:
            wait = arrivals[0][0] - self.t
            steps = min(steps, steps_until_seen(wait, first, slope, self.ahead))
        self._advance(max(steps, 1), first, slope)

    def _before_step(self) -> None:
        """What changes with the requests running before a step is scheduled (one K: nothing)."""

    def _span(self) -> float:
        """First arrival to last finish (0 when a run gave up before any finished)."""
        finished = [f for f in self.finish if not math.isnan(f)]
        arrived = [a for a in self.arrival if not math.isnan(a)]
        return max(finished) - min(arrived) if finished else 0.0

    def run(self) -> Run:
        while self.done < self.n and not self.gave_up:
            # an idle engine steps as soon as one request is in (vLLM's EngineCore and SGLang's
            # scheduler wake on their input queue): requests sent at once reach it one after
            # another, so the first runs its step alone and the rest join the next
            idle = not (self.decoding or self.prefilling or self.waiting)
            if idle:  # it takes the first as it is sent
                self.t = self.launched = max(self.t, self.arrivals[0][1])
                self._take()
            else:
                self._arrive()
            self._before_step()
            if (self.prefilling or self.waiting) and self._prefill_step():
                continue
            if self.decoding:
                self._decode_run()
            else:  # prefills alone fill the pool: the last admitted goes back to the queue
                self._preempt()
        itl = np.asarray(self.itl, dtype=np.float64).reshape(-1, 4)
        return Run(
            arrival=np.asarray(self.arrival),
            admitted=np.asarray(self.admitted),
            first_token=np.asarray(self.first_token),
            finish=np.asarray(self.finish),
            output_tokens=np.asarray(self.outputs, dtype=np.int64),
            running_seconds=self.running_seconds,
            gave_up=self.gave_up,
            span=self._span(),
            open_loop=self.open_loop,
            preemptions=self.preemptions,
            itl_first=itl[:, 0],
            itl_slope=itl[:, 1],
            itl_steps=itl[:, 2].astype(np.int64),
            itl_weight=itl[:, 3].astype(np.int64),
        )
