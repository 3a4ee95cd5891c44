"""Where the compiled loop (core/serving/kernel.py) keeps its state: its scalars and the
requests' numbers, by index into plain arrays (numba-free, so that what fills and reads the
arrays loads no compiler)."""

from __future__ import annotations

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
