"""The step model: the time of one engine step serving a mixed batch. `spec` prices its decode
step through it, and so do the serving simulator and the mean-field model.

One step of a continuous-batching engine (vLLM V1's scheduler, vllm/v1/core/sched/scheduler.py
`Scheduler.schedule`) computes, in one forward pass of the target, every running sequence's decode
tokens (1, or 1 + K with K draft tokens to verify) and the prefill chunks scheduled beside them.
With speculation the drafter then proposes the next K tokens: its first pass runs over the step's
new tokens (the prefill chunks' too, which it must see to draft after them), its K − 1 others over
one token per decoding sequence (vllm/v1/spec_decode: `propose`); Medusa heads propose all K in
that one pass, n-gram lookup costs no GPU time. A draft tree (core/tree.py) of width k, depth K
and n draft tokens verifies n tokens per sequence, and its K − 1 later draft passes run over k
tokens per sequence each (SGLang's EAGLEWorker.draft_forward,
sgl-project/sglang@5c8bd8b51b53b9b39eb1edec582ee43b21002106:python/sglang/srt/speculative/eagle_worker.py).

Each pass is priced by the roofline (core/latency.py). The time is affine in the contexts and KV
bytes at a given token count, which the simulator uses (`StepTable`): a table over token counts
and the per-byte and per-attended-token slopes, read from the same pass function.
"""

from __future__ import annotations

import math
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike

from infersize.core.arrays import FloatArray, Num, floats
from infersize.core.deployment import SideNumbers
from infersize.core.engines import Engine
from infersize.core.latency import PassLoad, pass_seconds
from infersize.core.memory import kv_cache_bytes, step_traffic
from infersize.core.serving.step_math import step_seconds
from infersize.core.tree import CHAIN, Tree
from infersize.record import record


@record
class StepBatch:
    """What one engine step serves; every field broadcasts (arrays over settings or K)."""

    decode_seqs: Num  # sequences decoding this step
    draft_k: Num  # draft tokens each decoding sequence verifies (0: no speculation)
    decode_context: Num  # Σ tokens in the KV cache of the decoding sequences
    prefill_tokens: Num = 0.0  # prompt tokens computed this step (chunked prefill)
    prefill_attended: Num = 0.0  # Σ over those tokens of the tokens each attends to
    target_kv_bytes: Num = 0.0  # KV the target's attention reads (decodes and prefills)
    draft_kv_bytes: Num = 0.0  # KV the drafter's attention reads
    tree: Tree = CHAIN  # what each decoding sequence drafts and verifies

    @property
    def verify_tokens(self) -> FloatArray:
        """Tokens per decoding sequence in the target's pass: 1, 1 + K, or a tree's n."""
        k = floats(self.draft_k)
        return floats(np.where(k > 0, self.tree.verify_tokens(k), 1.0))


@record(kw_only=False)
class StepSeconds:
    target: FloatArray  # the target's pass: decodes, verification and prefill chunks
    draft: FloatArray  # the drafter's passes and the host work beside them (0 without one)

    @property
    def total(self) -> FloatArray:
        return floats(self.target + self.draft)


def decode_batch(
    target: SideNumbers,
    draft: SideNumbers | None,
    batch: ArrayLike,
    context: ArrayLike,
    draft_k: ArrayLike,
    tree: Tree = CHAIN,
) -> StepBatch:
    """`batch` sequences of `context` tokens each, all decoding: the step `spec` prices."""
    return StepBatch(
        decode_seqs=floats(batch),
        draft_k=floats(draft_k),
        decode_context=floats(floats(batch) * floats(context)),
        target_kv_bytes=kv_cache_bytes(step_traffic(target.kv), context, batch),
        draft_kv_bytes=0.0
        if draft is None
        else kv_cache_bytes(step_traffic(draft.kv), context, batch),
        tree=tree,
    )


def eager_passes(engine: Engine, seqs: ArrayLike, prefill: ArrayLike) -> tuple[Num, Num]:
    """(a pass over the step's new tokens, a decode-only pass) run outside CUDA graphs: 1 or
    0 each. Graphs hold decode batches up to cuda_graph_max_bs; engines whose graphs hold no
    prefill (eager_prefill: SGLang's extend batches, TensorRT-LLM's context phase) run a pass
    with prompt tokens eagerly."""
    limit = math.inf if engine.cuda_graph_max_bs is None else engine.cuda_graph_max_bs
    over = floats(floats(seqs) > limit)
    with_prefill = floats(floats(prefill) > 0) if engine.eager_prefill else 0.0
    return floats(np.maximum(over, with_prefill)), over


def engine_step_seconds(
    target: SideNumbers, draft: SideNumbers | None, engine: Engine, batch: StepBatch
) -> StepSeconds:
    """Seconds of one engine step: the target's pass over every new token, then the drafter's."""
    k, v = floats(batch.draft_k), batch.verify_tokens
    seqs, prefill = floats(batch.decode_seqs), floats(batch.prefill_tokens)
    eager, eager_decode = eager_passes(engine, seqs, prefill)
    verify = PassLoad(
        tokens=floats(seqs * v + prefill),
        kv_bytes=batch.target_kv_bytes,
        attended=floats(v * floats(batch.decode_context) + floats(batch.prefill_attended)),
        eager=eager,
    )
    t_target = pass_seconds(target.cost, engine, verify)
    if draft is None:
        return StepSeconds(t_target, np.zeros_like(t_target))
    # the host work a speculative step does not overlap (Engine.spec_host_s), n-gram's too
    host = np.where((k > 0) & (seqs > 0), engine.spec_host_s, 0.0)
    first = PassLoad(
        tokens=floats(seqs + prefill),
        kv_bytes=batch.draft_kv_bytes,
        attended=floats(floats(batch.decode_context) + floats(batch.prefill_attended)),
        eager=eager,
    )
    width = batch.tree.draft_width()
    later = PassLoad(
        tokens=floats(seqs * width),
        kv_bytes=batch.draft_kv_bytes,
        attended=floats(width * floats(batch.decode_context)),
        eager=eager_decode,
    )
    # the later passes draft for the decoding sequences only (none: no pass)
    sequential = np.where(floats(draft.parallel_draft) > 0, 0.0, np.maximum(k - 1.0, 0.0))
    passes_after_first = np.where(seqs > 0, sequential, 0.0)
    t_draft = pass_seconds(draft.cost, engine, first, drafter=True) + (
        passes_after_first * pass_seconds(draft.cost, engine, later, drafter=True)
    )
    t_draft = np.where(k > 0, t_draft * floats(draft.gpu_time), 0.0) + host
    return StepSeconds(t_target, floats(t_draft))


@record
class StepTable:
    """`engine_step_seconds` of one deployment at one K as a lookup, for the simulator's inner
    loop: the time is affine in the contexts and KV bytes at a given token count, so it is the
    pass times at zero context by token count plus slopes per KV byte and per attended token,
    each read from `pass_seconds` itself (test: the table equals the step at random batches)."""

    draft_k: int
    # plain floats: the simulator reads them one step at a time
    target_by_tokens: tuple[float, ...]  # the target's pass at T new tokens, no context
    draft_by_tokens: tuple[float, ...]  # one drafter pass at T new tokens (0s without one)
    target_per_kv_byte: float
    target_per_attended: float
    draft_per_kv_byte: float
    draft_per_attended: float
    draft_passes_after_first: float  # K - 1, or 0 for Medusa; every pass scaled by gpu time
    draft_gpu_time: float
    verify_tokens: int = 1  # tokens per decoding sequence in the target's pass (1 + K, a tree's n)
    draft_width: int = 1  # tokens per decoding sequence in each later draft pass (a tree's k)
    # what a pass outside CUDA graphs adds (core/step.eager_passes), the target's and one
    # drafter pass's, and when: prefill passes (eager_prefill), decodes above graph_max_bs
    target_eager: float = 0.0
    draft_eager: float = 0.0
    eager_prefill: bool = False
    graph_max_bs: float = math.inf
    spec_host_s: float = 0.0  # what a step with decodes to verify adds (Engine.spec_host_s)

    @cached_property
    def parameters(self) -> tuple[float, ...]:
        """The table's numbers in core/serving/step_math.py's order."""
        return (
            float(self.draft_k),
            float(self.verify_tokens),
            self.target_per_kv_byte,
            self.target_per_attended,
            self.draft_per_kv_byte,
            self.draft_per_attended,
            self.draft_passes_after_first,
            self.draft_gpu_time,
            float(self.draft_width),
            self.target_eager,
            self.draft_eager,
            float(self.eager_prefill),
            self.graph_max_bs,
            self.spec_host_s,
        )

    @cached_property
    def arrays(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """The target's and one drafter pass's seconds by token count, and the parameters, as
        arrays (for the compiled loop and fixed point)."""
        return floats(self.target_by_tokens), floats(self.draft_by_tokens), floats(self.parameters)

    def seconds(
        self,
        decode_seqs: int,
        prefill_tokens: int,
        decode_context: float,
        prefill_attended: float,
        target_kv_bytes: float,
        draft_kv_bytes: float,
    ) -> float:
        """The step's seconds, as engine_step_seconds gives them (core/serving/step_math.py)."""
        return step_seconds(
            self.target_by_tokens,
            self.draft_by_tokens,
            self.parameters,
            decode_seqs,
            prefill_tokens,
            decode_context,
            prefill_attended,
            target_kv_bytes,
            draft_kv_bytes,
        )


def _pass_table(
    side: SideNumbers, engine: Engine, max_tokens: int, drafter: bool = False
) -> tuple[tuple[float, ...], float, float, float]:
    """A pass's seconds by token count at no context, its slopes per KV byte and per
    attended token (the pass is affine in both), and what running it eagerly adds."""

    def seconds(load: PassLoad) -> FloatArray:
        return pass_seconds(side.cost, engine, load, drafter)

    tokens = np.arange(max_tokens + 1, dtype=np.float64)
    by_tokens = seconds(PassLoad(tokens=tokens, kv_bytes=0.0, attended=0.0))
    one = float(seconds(PassLoad(tokens=1.0, kv_bytes=0.0, attended=0.0)))
    per_gib = float(seconds(PassLoad(tokens=1.0, kv_bytes=2**30, attended=0.0)))
    per_mtok = float(seconds(PassLoad(tokens=1.0, kv_bytes=0.0, attended=1e6)))
    eager = float(seconds(PassLoad(tokens=1.0, kv_bytes=0.0, attended=0.0, eager=1.0))) - one
    table: tuple[float, ...] = tuple(by_tokens.tolist())
    return table, (per_gib - one) / 2**30, (per_mtok - one) / 1e6, eager


def step_table(
    target: SideNumbers,
    draft: SideNumbers | None,
    engine: Engine,
    draft_k: int,
    max_tokens: int,
    tree: Tree = CHAIN,
) -> StepTable:
    """The table of a deployment at K (`draft` None or K = 0: no speculation) for steps of up
    to `max_tokens` new target tokens."""
    t_tokens, t_kv, t_att, t_eager = _pass_table(target, engine, max_tokens)
    speculating = draft is not None and draft_k > 0
    limit = math.inf if engine.cuda_graph_max_bs is None else float(engine.cuda_graph_max_bs)
    if draft is None or not speculating:
        zeros = (0.0,) * len(t_tokens)
        return StepTable(
            draft_k=0,
            target_by_tokens=t_tokens,
            draft_by_tokens=zeros,
            target_per_kv_byte=t_kv,
            target_per_attended=t_att,
            draft_per_kv_byte=0.0,
            draft_per_attended=0.0,
            draft_passes_after_first=0.0,
            draft_gpu_time=0.0,
            target_eager=t_eager,
            eager_prefill=engine.eager_prefill,
            graph_max_bs=limit,
        )
    d_tokens, d_kv, d_att, d_eager = _pass_table(draft, engine, max_tokens, drafter=True)
    parallel = float(draft.parallel_draft) > 0
    return StepTable(
        draft_k=draft_k,
        target_by_tokens=t_tokens,
        draft_by_tokens=d_tokens,
        target_per_kv_byte=t_kv,
        target_per_attended=t_att,
        draft_per_kv_byte=d_kv,
        draft_per_attended=d_att,
        draft_passes_after_first=0.0 if parallel else draft_k - 1.0,
        draft_gpu_time=float(draft.gpu_time),
        verify_tokens=int(tree.verify_tokens(draft_k)),
        draft_width=int(tree.draft_width()),
        target_eager=t_eager,
        draft_eager=d_eager,
        eager_prefill=engine.eager_prefill,
        graph_max_bs=limit,
        spec_host_s=engine.spec_host_s,
    )
