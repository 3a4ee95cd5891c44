"""The step model's formula and a sequence's KV bytes over plain numbers: the simulator's loop
runs them compiled (core/serving/kernel.py), the mean-field model and StepTable.seconds in
Python, over tuples, the same source either way. Indexing is all they ask of their numbers, so
a tuple and a numpy array give the same floats.

A step's seconds are core/step.engine_step_seconds's: the target's pass over its decode and
prefill tokens (a table by token count at no context), plus its slopes per KV byte and per
attended token; the drafter's first pass over the same sequences and its later passes over the
decoding sequences only; each plus what running outside CUDA graphs adds where the engine runs
it eagerly (core/step.eager_passes: prefill passes with eager_prefill, decodes above
graph_max_bs), and the host work a step with decodes to verify adds where the engine does not
overlap it (spec_host).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Numbers = Sequence[float] | np.ndarray

# a StepTable's parameters, in order (StepTable.parameters)
DRAFT_K, VERIFY, T_KV, T_ATT, D_KV, D_ATT, D_AFTER, D_GPU, D_WIDTH = range(9)
T_EAGER, D_EAGER, EAGER_PREFILL, GRAPH_MAX_BS, SPEC_HOST = range(9, 14)


def step_seconds(
    by_tokens_target: Numbers,
    by_tokens_draft: Numbers,
    p: Numbers,
    decode_seqs: int,
    prefill_tokens: int,
    decode_context: float,
    prefill_attended: float,
    target_kv_bytes: float,
    draft_kv_bytes: float,
) -> float:
    """The step's seconds, as core/step.engine_step_seconds gives them: the target's pass over
    its decode and prefill tokens, and the drafter's first pass (over the same sequences) and
    later passes (the decoding sequences only); each outside CUDA graphs where the engine
    runs it eagerly (prefill passes with eager_prefill, decodes above graph_max_bs)."""
    k = int(p[DRAFT_K])
    v = int(p[VERIFY])
    over = decode_seqs > p[GRAPH_MAX_BS]
    eager = over or (p[EAGER_PREFILL] != 0.0 and prefill_tokens > 0)
    target = (
        by_tokens_target[decode_seqs * v + prefill_tokens]
        + p[T_KV] * target_kv_bytes
        + p[T_ATT] * (v * decode_context + prefill_attended)
        + (p[T_EAGER] if eager else 0.0)
    )
    if k == 0:
        return float(target)
    host = p[SPEC_HOST] if decode_seqs > 0 else 0.0  # the step's host work, where not overlapped
    if p[D_GPU] == 0.0:
        return float(target + host)
    kv = p[D_KV] * draft_kv_bytes
    first = (
        by_tokens_draft[decode_seqs + prefill_tokens]
        + kv
        + p[D_ATT] * (decode_context + prefill_attended)
        + (p[D_EAGER] if eager else 0.0)
    )
    if decode_seqs == 0:  # the later passes draft for decoding sequences only
        return float(target + p[D_GPU] * first)
    width = int(p[D_WIDTH])
    later = (
        by_tokens_draft[decode_seqs * width]
        + kv
        + p[D_ATT] * width * decode_context
        + (p[D_EAGER] if over else 0.0)
    )
    return float(target + p[D_GPU] * (first + p[D_AFTER] * later) + host)


def sequence_kv(layout: Numbers, context: float) -> float:
    """KV bytes of one sequence of `context` tokens (core/memory.kv_cache_bytes in floats)."""
    return float(layout[0] * context + layout[1] * min(context, layout[2]) + layout[3])
