"""vLLM V1's KV cache pool: how much memory it gets, and how many tokens and sequences it holds.

Rules read from vLLM's source (vllm-project/vllm, release 0.33.0 unless the engine preset says
otherwise; docs/modelling.md cites each function):
  pool P per GPU = ceil(total · gpu_memory_utilization) − W − A − N − G
    W  weights on the GPU: target and draft (V1 runs the draft at the target's TP), vision tower
    A  activation peak of the profile run (gpu_worker.determine_available_memory,
       gpu_model_runner.profile_run), the largest of its passes, one after the other: the vision
       encoder on its largest images; max_num_batched_tokens tokens through the target, then
       through the drafter (its K passes, the target's hidden states still held); the sampler on
       min(max_num_seqs, max_num_batched_tokens) rows of the target's logits, the profiled
       batch's hidden states still held, and with any drafter the rejection sampler's dry run
       on as many rows beside it
    N  non-torch memory that appears after the start-up snapshot (cuBLAS workspaces, lazily
       created buffers; more under tensor parallel, custom all-reduce's IPC buffers)
    G  the CUDA graph estimate, subtracted before sizing from vLLM 0.21 on
       (gpu_model_runner.profile_cudagraph_memory); before that, graphs come on top
  Blocks of 16 tokens; every layer of both models draws from the one pool. Sliding-window
  layers form their own groups (the hybrid allocator, vllm/v1/core/kv_cache_utils.py): a block holds
  one page of `group_size` layers, and a request needs, per sliding group, only the blocks of
  its window plus the tokens of one scheduling step.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from infersize.core.arrays import FloatArray, Num, floats
from infersize.core.engine_constants import SAMPLER_BYTES_PER_LOGIT
from infersize.core.engines import Engine
from infersize.core.memory import ACTIVATION_BYTES, GIB, KvLayout
from infersize.record import record

BLOCK_TOKENS = 16  # CacheConfig.DEFAULT_BLOCK_SIZE


@record(kw_only=False)
class Profile:
    """The profiling forward pass vLLM sizes the pool after."""

    batched_tokens: Num  # max_num_batched_tokens
    seqs: Num  # max_num_seqs


# EngineArgs.get_batch_defaults (vllm-project/vllm@e1a34c3a5d9273431ee182253750d39b546d37a1:
# vllm/engine/arg_utils.py lines 1802-1880, the same table at
# vllm-project/vllm@48ebd6f2f164057043edb8301771a17dcaebd61d:vllm/engine/arg_utils.py line 2509):
# (max_num_batched_tokens, max_num_seqs) by entry point, for GPUs of 70 GiB or more that are not
# A100s, and for the others. `vllm serve` is OPENAI_API_SERVER (entrypoints/cli/serve.py);
# LLM(...) and `vllm bench throughput` are LLM_CLASS (entrypoints/llm.py).
BATCH_DEFAULTS: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "serve": ((8192, 1024), (2048, 256)),
    "offline": ((16384, 1024), (8192, 256)),
}
# From 0.28 (engine.large_gpu_gib) `vllm serve` profiles 16384 tokens on GPUs of 160 GiB or
# more; LLM(...)'s value for them was not read, and its 70 GiB value (the same) is kept.
LARGE_GPU_DEFAULTS = (16384, 1024)


def default_profile(engine: Engine, memory_bytes: float, gpu_name: str) -> Profile:
    """vLLM's defaults for the engine's entry point (`vllm serve` or LLM(...)), by the GPU's
    memory and name (BATCH_DEFAULTS); the engine preset (or the user) may set them."""
    gib = memory_bytes / GIB
    large, other = BATCH_DEFAULTS[engine.entrypoint]
    if gib >= engine.large_gpu_gib:
        tokens, seqs = max(LARGE_GPU_DEFAULTS, large)
    elif gib >= 70 and "a100" not in gpu_name.lower():
        tokens, seqs = large
    else:
        tokens, seqs = other
    return Profile(engine.max_num_batched_tokens or tokens, engine.max_num_seqs or seqs)


@record
class PoolSide:
    """What the pool rules read of one model on one GPU."""

    activation_bytes_per_token: Num
    vocab_size: Num
    layers: Num
    moe: Num  # 1.0 for mixture-of-experts models (their graphs hold more kernels)
    kv: KvLayout
    hidden_size: Num = 0.0
    encoder_bytes_per_item: Num = 0.0
    encoder_tokens_per_item: Num = 0.0


def _rows(profile: Profile) -> FloatArray:
    """The sampler's rows: the dummy batch of min(max_num_seqs, max_num_batched_tokens)."""
    return floats(np.minimum(floats(profile.seqs), floats(profile.batched_tokens)))


def held_hidden_bytes(side: PoolSide, profile: Profile, sampling: bool = True) -> FloatArray:
    """The hidden states profile_run holds while the drafter and the sampler run, in the model's
    dtype: the profiled batch's (max_num_batched_tokens rows) and, in the sampler pass, its
    last-token rows and the random rows put in their place (the dummy batch's rows each)
    (vllm-project/vllm@e1a34c3a5d9273431ee182253750d39b546d37a1:
    vllm/v1/worker/gpu_model_runner.py lines 4547-4550, 4564-4566 (`torch.rand_like`) and
    4767-4778 (`del hidden_states` only after the sampler))."""
    rows = floats(profile.batched_tokens) + (2.0 * _rows(profile) if sampling else 0.0)
    return floats(rows * floats(side.hidden_size) * ACTIVATION_BYTES)


def _encoder_items(side: PoolSide, profile: Profile) -> FloatArray:
    """Largest images the profiling pass runs through the vision encoder (0: text only)."""
    tokens = floats(profile.batched_tokens)
    per_item = floats(side.encoder_tokens_per_item)
    safe = np.maximum(per_item, 1.0)
    return floats(np.where(per_item > 0, np.floor(np.maximum(tokens, safe) / safe), 0.0))


def forward_peak(side: PoolSide, profile: Profile, engine: Engine) -> FloatArray:
    """The decoder forward over max_num_batched_tokens tokens, beside the vision encoder's
    outputs it keeps cached."""
    cached = (
        _encoder_items(side, profile)
        * floats(side.encoder_tokens_per_item)
        * side.hidden_size
        * ACTIVATION_BYTES
    )
    tokens = floats(profile.batched_tokens)
    return floats(engine.activation_factor * tokens * side.activation_bytes_per_token + cached)


def encoder_peak(side: PoolSide, profile: Profile) -> FloatArray:
    """The vision encoder on as many largest images as the token budget holds."""
    return floats(_encoder_items(side, profile) * side.encoder_bytes_per_item)


def sampler_peak(
    side: PoolSide, profile: Profile, engine: Engine, speculating: Num = 0.0
) -> FloatArray:
    """The sampler phase of profile_run (gpu_model_runner._dummy_sampler_run): the sampler on
    the dummy batch's rows of the target's logits (SAMPLER_BYTES_PER_LOGIT), the profiled
    batch's hidden states still held, and, with any speculative method (`speculating` 1.0),
    the rejection sampler's dry run on as many rows (engine.rejection_sampler_bytes_per_logit).
    Only the target's logits are sampled: a drafter's dummy_run computes none."""
    per_logit = SAMPLER_BYTES_PER_LOGIT[engine.sampler] + (
        engine.rejection_sampler_bytes_per_logit * floats(speculating)
    )
    logits = _rows(profile) * floats(side.vocab_size)
    return floats(per_logit * logits + held_hidden_bytes(side, profile))


def activation_peak(
    side: PoolSide, profile: Profile, engine: Engine, speculating: Num = 0.0
) -> FloatArray:
    """A of the target alone: the largest of the passes vLLM's profile_run makes one after the
    other (the vision encoder, the decoder forward over max_num_batched_tokens tokens, the
    sampler phase)."""
    forward = forward_peak(side, profile, engine)
    sampler = sampler_peak(side, profile, engine, speculating)
    return floats(np.maximum(np.maximum(forward, sampler), encoder_peak(side, profile)))


def drafter_peak(draft: PoolSide, target: PoolSide, profile: Profile, engine: Engine) -> FloatArray:
    """The drafter's pass of profile_run: its dummy_run makes K forwards over the same
    max_num_batched_tokens tokens, one after the other and without logits
    (vllm-project/vllm@e1a34c3a5d9273431ee182253750d39b546d37a1:vllm/v1/spec_decode/eagle.py
    lines 1213-1267, which DraftModelProposer and MTP inherit;
    vllm-project/vllm@48ebd6f2f164057043edb8301771a17dcaebd61d:
    vllm/v1/spec_decode/llm_base_proposer.py lines 1625-1677), while the target's hidden states
    are held. Its peak is one forward's."""
    held = held_hidden_bytes(target, profile, sampling=False)
    return floats(forward_peak(draft, profile, engine) + held)


def capture_sizes(seqs: ArrayLike, tokens: ArrayLike, query_len: ArrayLike) -> FloatArray:
    """How many batch sizes vLLM captures CUDA graphs for (VllmConfig._set_cudagraph_sizes):
    1, 2, 4, multiples of 8 below 256, multiples of 16 from 256, up to
    min(2 · max_num_seqs · query_len, 512, max_num_batched_tokens); query_len is 1 + K with
    speculative decoding."""
    top = np.minimum(np.minimum(2 * floats(seqs) * floats(query_len), 512.0), floats(tokens))
    small = (top >= 1).astype(float) + (top >= 2) + (top >= 4)
    eights = np.clip(np.floor(top / 8), 0, 31)
    sixteens = np.where(top >= 256, np.floor((top - 256) / 16) + 1, 0.0)
    return floats(small + eights + sixteens)


def cuda_graph_bytes(sides: list[PoolSide], sizes: ArrayLike, engine: Engine) -> FloatArray:
    """G: every captured batch size holds graphs for every layer of both models; per layer and
    size they take engine.graph_bytes_per_layer (more for MoE layers)."""
    per_size = sum(
        (
            side.layers * engine.graph_bytes_per_layer * (1.0 + engine.graph_moe_extra * side.moe)
            for side in sides
        ),
        floats(0.0),
    )
    return floats(floats(sizes) * per_size)


@record(kw_only=False)
class PoolCapacity:
    tokens: FloatArray  # what vLLM logs as "GPU KV cache size: N tokens"
    concurrency: FloatArray  # "Maximum concurrency for L tokens per request: X x"
    bytes_per_sequence: FloatArray  # the pool one sequence of `context` tokens occupies


def _groups(
    layers: FloatArray, window_layers: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(group size in layers, full groups, sliding groups) of the hybrid allocator: layers of
    one kind are bucketed, the group size is the smaller bucket (the larger when it is under
    1.5 times the smaller, vLLM 0.18+), and each bucket splits into ceil(n / size) groups."""
    full = layers - window_layers
    small, large = np.minimum(full, window_layers), np.maximum(full, window_layers)
    hybrid = small > 0
    size = np.where(hybrid, np.where(large < 1.5 * small, large, small), layers)
    safe = np.maximum(size, 1.0)
    full_groups = np.where(hybrid, np.ceil(full / safe), np.where(window_layers > 0, 0.0, 1.0))
    window_groups = np.where(
        hybrid, np.ceil(window_layers / safe), np.where(window_layers > 0, 1.0, 0.0)
    )
    return floats(size), floats(full_groups), floats(window_groups)


def pool_capacity(
    pool: ArrayLike, kv: KvLayout, context: ArrayLike, profile: Profile, engine: Engine
) -> PoolCapacity:
    """Tokens and sequences the pool holds, as vLLM counts them. `kv` is the per-GPU layout of
    all layers that draw from the pool (target and draft, summed)."""
    page = np.maximum(floats(kv.layer_bytes_per_token), 1e-9)  # one layer, one token
    layers = floats((kv.full_bytes_per_token + kv.window_bytes_per_token) / page)
    window_layers = floats(kv.window_bytes_per_token / page)
    size, full_groups, window_groups = _groups(layers, window_layers)
    block_bytes = size * page * BLOCK_TOKENS
    blocks = np.floor(np.maximum(floats(pool), 0.0) / block_bytes)
    ctx = floats(context)
    in_flight = floats(profile.batched_tokens) * engine.steps_in_flight
    window_blocks = (
        np.ceil(np.minimum(floats(kv.window_tokens) - 1 + in_flight, ctx) / BLOCK_TOKENS) + 1
    )
    # linear-attention state (Qwen3-Next): the blocks its bytes fill. vLLM instead widens the
    # attention blocks to one Mamba-state page and gives each state group one block per request
    # (kv_cache_utils.py); at ordinary contexts the two differ by under a block group.
    state_blocks = np.ceil(floats(kv.state_bytes_per_sequence) / block_bytes)
    per_request = (
        full_groups * np.ceil(ctx / BLOCK_TOKENS) + window_groups * window_blocks + state_blocks
    )
    concurrency = blocks / per_request
    if engine.credits_windows_in_tokens:  # vLLM 0.21+: get_kv_cache_capacity
        tokens = np.floor(concurrency * ctx)
    else:  # before: num_blocks // num_groups · block_size
        tokens = np.floor(blocks / (full_groups + window_groups)) * BLOCK_TOKENS
    return PoolCapacity(floats(tokens), floats(concurrency), floats(per_request * block_bytes))
