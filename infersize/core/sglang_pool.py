"""SGLang's KV pools: how many tokens it allocates, and its scheduler's defaults.

Rules read from SGLang's source (sgl-project/sglang; `@0.5.6` is release 0.5.6.post2,
5c8bd8b51b53b9b39eb1edec582ee43b21002106; `@0.4.0` is f8b0326934bacb7a7d4eba68fb6eddebaa6ff751;
`@0.5.9` is the main of 2026-02-16, f9c3def7fe464a19d8321474a4e149a3a8d3dcc4, whose files these
rules read are release 0.5.9's, as PyPI ships it, but for lines none of them reads):

  max_total_num_tokens = ⌊(M_start · mem_fraction_static − W) / cell⌋
    M_start  the free memory SGLang measures once the CUDA context and NCCL are up, before any
             weights (ModelRunner.init_torch_distributed, min over ranks): the device less
             engine.overhead_gib (more under tensor parallel)
    W        the target's weights on the GPU (what loading them took from the free memory)
    cell     KV bytes per token per GPU of every target layer (profile_max_num_token)
  (python/sglang/srt/model_executor/model_runner.py @0.5.6, ModelRunner.profile_max_num_token:
  rest_memory = available_gpu_memory − total_gpu_memory · (1 − mem_fraction_static))

A hybrid model's linear-attention (Gated DeltaNet) layers keep no per-token KV: the cell counts
its full-attention layers only, and their fixed state per request lies in a pool of its own, the
MambaPool, carved out of the same rest first (ModelRunner.handle_max_mamba_cache). Under the
`per-slot` rule (@0.5.6, the radix cache on, SGLang's default):

  slots = ⌊rest · r / (1 + r) / (state · (1 + n))⌋, then // the attention data-parallel ranks
  max_total_num_tokens = ⌊(rest − slots · state · (1 + n)) / cell⌋
    rest   M_start · mem_fraction_static − W, as above
    r      mamba_full_memory_ratio (0.9): the state pool's memory over the KV pool's
    state  mamba_cache_per_req: the conv window (bfloat16) and the recurrent matrices
           (mamba_ssm_dtype, float32 by default) of every linear layer (core/memory.py)
    n      speculative_num_draft_tokens (0 without a drafter): MambaPool keeps n intermediate
           states and windows per slot for the verify pass (mem_cache/memory_pool.py @0.5.6)
  and the request slots are at most slots // 3 (MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO,
  init_memory_pool), which bounds max_running_requests, the user's and the speculative 48
  included (TpModelWorker: min(them, req_to_token_pool.size)).

Under the `reserved` rule (@0.5.9, python/sglang/srt/model_executor/
model_runner_kv_cache_mixin.py) a drafter's intermediate states come out of the rest first, for
R = max_running_requests (the user's, else the 48 of speculation) // the data-parallel ranks, and
a slot holds one state (MambaPool's intermediate caches hold max_num_reqs rows):

  rest' = rest − state · R · n
  slots = R with a drafter, else ⌊rest' · r / (1 + r) / state⌋ (not split over DP ranks)
  max_total_num_tokens = ⌊(rest' − slots · state) / cell⌋

With a drafter the pool holds R slots because the radix cache is off: ServerArgs turns
mamba_scheduler_strategy "auto" into "no_buffer" (__post_init__), and _handle_mamba_radix_cache
sets disable_radix_cache for Qwen3-Next and Qwen3.5 when speculating under no_buffer
(python/sglang/srt/server_args.py @0.5.9); handle_max_mamba_cache then sizes the pool at
max_running_requests, and init_memory_pool's ratio is 1, so all R run. Without a drafter the
ratio stays 3 (3 + 0: the extra buffer is off). Not modelled: --mamba-scheduler-strategy
extra_buffer, which keeps the radix cache with a drafter and makes the ratio 3 + 1 (3 + 2
without one).

mem_fraction_static budgets the weights and the pool only: activations, CUDA graphs, the draft's
weights and the draft's own pool come out of the rest. Nothing is profiled. With EAGLE, EAGLE-3,
MTP (NEXTN) or a draft model (STANDALONE) the draft keeps a pool of the same token count over
its own layers, and from 0.4.3.post3 to 0.5.6 both pools grow by the slots one step's drafts
write: R · d · k + R · n + 100 tokens, R the running requests (ModelRunner.init_memory_pool
@0.5.6, draft_runner_cache_size); from 0.5.7 draft_runner_cache_size is the target's count as
profiled (init_memory_pool @0.5.9). N-gram lookup keeps no pool.

Defaults when the user sets none (python/sglang/srt/server_args.py):
  mem_fraction_static  0.4.x (`tp` rule, ServerArgs.__post_init__ @0.4.0): 0.88 at TP 1, 0.87
      at TP 2, 0.85 at TP 4, 0.81 at TP 8, 0.79 at TP 16. 0.5.3+ (`reserve` rule,
      ServerArgs._handle_gpu_memory_settings @0.5.6, the same @0.5.9): reserved = 512 + 1.5 ·
      max(chunked prefill, 2048) + 2 · cuda_graph_max_bs + 1024 · TP / 8 MiB, at least 10 GiB
      on GPUs over 60 GiB, + 2 GiB for EAGLE-family heads, + 6 GiB for a draft model;
      round((G − reserved) / G, 3) with G the GPU's memory in MiB.
  chunked_prefill_size 2048 below 35 GiB, 4096 below 60, 8192 below 160, else 16384 (@0.5.6,
      @0.5.9); 2048 below 25,000 MiB, else 8192 (@0.4.0).
  cuda_graph_max_bs (the 0.5.3+ reserve reads it) 8 below 20 GiB; 24 (80 from TP 4) below 35;
      32 (160) below 60; 256 (512) below 160; else 512 (@0.5.6, @0.5.9).
  max_running_requests min(⌊pool / 2⌋, the request slots min(max(⌊pool · 512 / context⌋,
      2048), 4096)) (TpModelWorker.__init__, ModelRunner.init_memory_pool @0.5.6; ModelRunner
      @0.5.9); 48 when speculating (ServerArgs._handle_speculative_decoding, from 0.4.4.post4).
  mamba_ssm_dtype "float32", mamba_full_memory_ratio 0.9 (@0.5.6; the `sglang-0.4` preset
      keeps them: no 0.4 release ran a hybrid model). @0.5.9 mamba_ssm_dtype is None, the
      model config's (configs/mamba_utils.py, mamba2_state_dtype), float32 where it has none.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from infersize.core.arrays import FloatArray, floats
from infersize.core.engines import Engine
from infersize.record import record

MIB = 2.0**20
GIB = 2.0**30
SPECULATIVE_RUNNING_REQUESTS = 48.0
HEAD_RESERVE_MIB = 2 * 1024.0  # EAGLE, EAGLE-3, NEXTN (MTP) heads
DRAFT_MODEL_RESERVE_MIB = 6 * 1024.0  # STANDALONE: a separate draft model
TP_TABLE = ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))  # @0.4.0, by TP
STATE_SLOTS_PER_REQUEST = 3.0  # MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO, the radix cache on


def default_chunked_prefill(engine: Engine, memory_bytes: ArrayLike) -> FloatArray:
    """chunked_prefill_size when the user sets none, by the GPU's memory."""
    if engine.chunked_prefill_size is not None:
        return floats(engine.chunked_prefill_size)
    gib = floats(memory_bytes) / GIB
    if engine.mem_fraction_rule == "tp":
        return floats(np.where(gib * 1024 < 25_000, 2048.0, 8192.0))
    return floats(
        np.where(gib < 35, 2048.0, np.where(gib < 60, 4096.0, np.where(gib < 160, 8192.0, 16384.0)))
    )


def cuda_graph_max_bs(memory_bytes: ArrayLike, tp: ArrayLike) -> FloatArray:
    """The largest batch SGLang captures CUDA graphs for (@0.5.6), by memory and TP."""
    gib, wide = floats(memory_bytes) / GIB, floats(tp) >= 4
    return floats(
        np.where(
            gib < 20,
            8.0,
            np.where(
                gib < 35,
                np.where(wide, 80.0, 24.0),
                np.where(
                    gib < 60,
                    np.where(wide, 160.0, 32.0),
                    np.where(gib < 160, np.where(wide, 512.0, 256.0), 512.0),
                ),
            ),
        )
    )


def default_mem_fraction(
    engine: Engine,
    memory_bytes: ArrayLike,
    tp: ArrayLike,
    chunked_prefill: ArrayLike,
    drafter_reserve_mib: ArrayLike,
) -> FloatArray:
    """mem_fraction_static when the user sets none, by the preset's release rule."""
    if engine.mem_fraction_static is not None:
        return floats(engine.mem_fraction_static)
    ranks = floats(tp)
    if engine.mem_fraction_rule == "tp":
        table = floats(TP_TABLE[-1][1])
        for at_least, fraction in reversed(TP_TABLE[:-1]):
            table = floats(np.where(ranks >= at_least, fraction, table))
        return table
    mib = floats(memory_bytes) / MIB
    reserved = (
        512.0
        + 1.5 * np.maximum(floats(chunked_prefill), 2048.0)
        + 2.0 * cuda_graph_max_bs(memory_bytes, tp)
        + 1024.0 * ranks / 8.0
    )
    reserved = np.where(mib > 60 * 1024, np.maximum(reserved, 10 * 1024.0), reserved)
    reserved = reserved + floats(drafter_reserve_mib)
    return floats(np.round((mib - reserved) / mib, 3))


def drafter_reserve_mib(has_drafter: ArrayLike, is_head: ArrayLike) -> FloatArray:
    """What the 0.5.3+ default holds back for speculation: 2 GiB for a head, 6 for a model."""
    return floats(
        np.where(
            floats(has_drafter) > 0,
            np.where(floats(is_head) > 0, HEAD_RESERVE_MIB, DRAFT_MODEL_RESERVE_MIB),
            0.0,
        )
    )


def rest_bytes(free_at_start: ArrayLike, mem_fraction: ArrayLike, weights: ArrayLike) -> FloatArray:
    """M_start · mem_fraction_static − W: what the pools share, negative where the weights
    exceed the fraction."""
    return floats(floats(free_at_start) * floats(mem_fraction) - floats(weights))


def requested_running(engine: Engine, speculating: ArrayLike) -> FloatArray:
    """max_running_requests as ServerArgs leaves it: the user's, else 48 when speculating
    (_handle_speculative_decoding), else 0 (none: the pool sets it)."""
    drafting = floats(speculating) > 0
    if engine.max_running_requests is not None:
        return floats(np.full(drafting.shape, float(engine.max_running_requests)))
    return floats(np.where(drafting, SPECULATIVE_RUNNING_REQUESTS, 0.0))


def radix_cache_off(engine: Engine, speculating: ArrayLike) -> FloatArray:
    """1 where SGLang turns a hybrid model's radix cache off: a drafter under the `reserved`
    rule (no_buffer strategy, @0.5.9); 0 elsewhere."""
    reserved = engine.mamba_pool_rule == "reserved"
    return floats((floats(speculating) > 0) & reserved)


def request_state_bytes(state_bytes: ArrayLike, draft_tokens: ArrayLike) -> FloatArray:
    """What a running request holds in the state pool: its state, and as many again for each
    token a speculative step verifies (MambaPool's intermediate states and conv windows)."""
    return floats(floats(state_bytes) * (1.0 + floats(draft_tokens)))


def state_slot_bytes(engine: Engine, state_bytes: ArrayLike, draft_tokens: ArrayLike) -> FloatArray:
    """One slot of the state pool (max_mamba_cache_size counts them): a request's whole share
    under the `per-slot` rule, its state alone under `reserved`."""
    if engine.mamba_pool_rule == "per-slot":
        return request_state_bytes(state_bytes, draft_tokens)
    return floats(state_bytes)


def reserved_state_bytes(
    engine: Engine,
    state_bytes: ArrayLike,
    draft_tokens: ArrayLike,
    requested: ArrayLike,
    dp_ranks: ArrayLike,
) -> FloatArray:
    """The verify pass's intermediate states the `reserved` rule takes from the rest before the
    split: state · (max_running_requests // DP ranks) · n; none under `per-slot`."""
    if engine.mamba_pool_rule != "reserved":
        return floats(0.0)
    running = np.floor(floats(requested) / floats(dp_ranks))
    return floats(floats(state_bytes) * running * floats(draft_tokens))


def state_slots(
    engine: Engine,
    rest: ArrayLike,
    slot_bytes: ArrayLike,
    dp_ranks: ArrayLike,
    requested: ArrayLike = 0.0,
    speculating: ArrayLike = 0.0,
) -> FloatArray:
    """max_mamba_cache_size: ⌊rest · r / (1 + r) / slot⌋ (// dp_ranks under `per-slot`), none
    below 0, or max_running_requests // dp_ranks where the radix cache is off; infinite (no
    bound) for a model without linear-attention state, or an engine that keeps the states in
    its KV pool."""
    slot = floats(slot_bytes)
    ratio = engine.mamba_full_memory_ratio
    if ratio is None:
        return floats(np.full_like(slot, np.inf))
    memory = np.maximum(floats(rest), 0.0) * ratio / (1.0 + ratio)
    slots = np.floor(memory / np.maximum(slot, 1e-9))
    if engine.mamba_pool_rule == "per-slot":
        slots = np.floor(slots / floats(dp_ranks))
    by_setting = np.floor(floats(requested) / floats(dp_ranks))
    slots = np.where(radix_cache_off(engine, speculating) > 0, by_setting, slots)
    return floats(np.where(slot > 0, slots, np.inf))


def state_pool_bytes(
    slots: ArrayLike, slot_bytes: ArrayLike, reserved: ArrayLike = 0.0
) -> FloatArray:
    """The state pool's memory: slots · slot and the reserved intermediate states (0 where it
    holds none), as SGLang accounts for it. Its tensors hold one row more than their slots
    (MambaPool allocates `size + 1` rows, the first a padding slot: mem_cache/memory_pool.py
    at the commits above), one slot's bytes outside that accounting and left out here too
    (0.11 GiB a GPU for Qwen3.5-397B with MTP at TP 8)."""
    count = floats(slots)
    held = np.isfinite(count)
    return floats(np.where(held, count, 0.0) * floats(slot_bytes) + held * floats(reserved))


@record
class StatePool:
    """A hybrid model's state pool beside the KV pool (MambaPool)."""

    slots: FloatArray  # max_mamba_cache_size; infinite where there is no pool
    pool_bytes: FloatArray  # the slots and any reserved intermediate states
    request_bytes: FloatArray  # what a running request holds of it; 0 where there is no pool


def state_pool(
    engine: Engine,
    rest: ArrayLike,
    state_bytes: ArrayLike,
    draft_tokens: ArrayLike,
    dp_ranks: ArrayLike,
) -> StatePool:
    """The state pool the engine's rule carves out of the rest before the KV pool; a drafter
    verifies `draft_tokens` (0: none)."""
    speculating = floats(floats(draft_tokens) > 0)
    requested = requested_running(engine, speculating)
    reserved = reserved_state_bytes(engine, state_bytes, draft_tokens, requested, dp_ranks)
    slot = state_slot_bytes(engine, state_bytes, draft_tokens)
    slots = state_slots(engine, floats(rest) - reserved, slot, dp_ranks, requested, speculating)
    share = request_state_bytes(state_bytes, draft_tokens)
    return StatePool(
        slots=slots,
        pool_bytes=state_pool_bytes(slots, slot, reserved),
        request_bytes=floats(np.where(np.isfinite(slots), share, 0.0)),
    )


def profiled_tokens(kv_rest: ArrayLike, cell: ArrayLike) -> FloatArray:
    """⌊(rest less the state pool) / cell⌋, negative where the weights exceed the fraction
    (ModelRunner.profile_max_num_token @0.5.6 does not clamp it: the speculative headroom is
    added to it, and ModelRunner.init_memory_pool refuses a total of 0 or less, "Not enough
    memory. Please try to increase --mem-fraction-static")."""
    return floats(np.floor(floats(kv_rest) / np.maximum(floats(cell), 1e-9)))


def running_requests(
    engine: Engine,
    pool_tokens: ArrayLike,
    context_window: ArrayLike,
    speculating: ArrayLike,
    slots: ArrayLike = np.inf,
) -> FloatArray:
    """max_running_requests: the user's, else 48 when speculating, else min(pool / 2, the
    request slots); at most the state pool's `slots` // 3, or all of them where the radix cache
    is off (init_memory_pool's ratio 1)."""
    per_request = np.where(radix_cache_off(engine, speculating) > 0, 1.0, STATE_SLOTS_PER_REQUEST)
    by_state = np.floor(floats(slots) / per_request)
    requested = requested_running(engine, speculating)
    pool = floats(pool_tokens)
    requests = np.clip(np.floor(pool * 512.0 / np.maximum(floats(context_window), 1.0)), 2048, 4096)
    plain = np.minimum(np.floor(pool / 2.0), requests)
    return floats(np.minimum(np.where(requested > 0, requested, plain), by_state))


def speculative_headroom(
    running: ArrayLike, depth: ArrayLike, topk: ArrayLike, verify_tokens: ArrayLike
) -> FloatArray:
    """Tokens both pools grow by (0.4.3.post3 to 0.5.6): R · d · k + R · n + 100."""
    r = floats(running)
    return floats(r * floats(depth) * floats(topk) + r * floats(verify_tokens) + 100.0)
