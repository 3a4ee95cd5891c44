"""Memory per GPU of a deployment over arrays of context, batch and K, and whether it fits.

One rule per engine's `memory_rule`: `sum` adds weights, KV caches, workspaces and overhead
against the device memory; engines that pre-allocate their KV pool size it as they do (vLLM:
core/vllm_pool.py, SGLang: core/sglang_pool.py, TensorRT-LLM: core/trtllm_pool.py), and a batch
fits when its sequences' KV fits in the pool (and the pool itself in the device)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from infersize.core import memory as mem
from infersize.core import sglang_pool, trtllm_pool
from infersize.core.arrays import BoolArray, FloatArray, floats
from infersize.core.deployment import DeploymentNumbers, SideNumbers
from infersize.core.engines import Engine
from infersize.core.tree import CHAIN, Tree
from infersize.core.vllm_pool import (
    PoolSide,
    Profile,
    activation_peak,
    capture_sizes,
    cuda_graph_bytes,
    drafter_peak,
    pool_capacity,
)
from infersize.record import record


@record
class PoolMemory:
    """vLLM's pool per GPU, what it holds, and the non-KV parts subtracted before it."""

    kv_pool: FloatArray
    kv_pool_tokens: FloatArray  # as vLLM logs "GPU KV cache size"
    max_concurrent_sequences: FloatArray  # as vLLM logs "Maximum concurrency"
    activation_peak: FloatArray
    non_torch: FloatArray
    cuda_graphs: FloatArray  # subtracted before the pool from vLLM 0.20 on; else 0
    speculative_peak: FloatArray  # what speculating adds to the activation peak (vLLM)
    mem_fraction: FloatArray | None = None  # SGLang's mem_fraction_static as applied
    max_running: FloatArray | None = None  # SGLang's max_running_requests from its pool
    # SGLang's pool of linear-attention states beside the KV pool (MambaPool): its memory and
    # its slots (max_mamba_cache_size; infinite where it holds none)
    state_pool: FloatArray | None = None
    state_slots: FloatArray | None = None


@record
class Memory:
    """Bytes per GPU. Arrays broadcast over the inputs of deployment_memory."""

    target_weights: FloatArray
    target_kv: FloatArray
    target_workspace: FloatArray
    draft_weights: FloatArray
    draft_kv: FloatArray
    draft_workspace: FloatArray
    overhead: FloatArray  # plain: runtime overhead; pools: non-torch memory and CUDA graphs
    combined: FloatArray
    budget: FloatArray  # what the engine may use: the device memory, or U · memory for vLLM
    device: FloatArray  # the device memory (utilization is of it)
    pool: PoolMemory | None = None  # engines with a KV pool

    @property
    def share(self) -> FloatArray:
        return floats(self.combined / self.budget)

    @property
    def utilization(self) -> FloatArray:
        return floats(self.combined / self.device)

    @property
    def fits(self) -> BoolArray:
        return mem.fits(self.share)

    @property
    def verdict(self) -> NDArray[np.str_]:
        return mem.verdict(self.share)


@record
class _Parts:
    """What a memory rule returns: KV and workspace per model, overhead, budget, the pool."""

    target_kv: FloatArray
    target_workspace: FloatArray
    draft_kv: FloatArray
    draft_workspace: FloatArray
    overhead: FloatArray
    budget: FloatArray
    pool: PoolMemory | None


@record(kw_only=False)
class _Cells:
    """The grid inputs, as floats, and the tokens each sequence keeps (context + the slots of
    the drafts it verifies: K for a chain, num_draft_tokens − 1 for a tree)."""

    batch: FloatArray
    spec_k: FloatArray
    tokens: FloatArray
    tree: Tree = CHAIN


def _plain(dep: DeploymentNumbers, engine: Engine, cells: _Cells, usable: FloatArray) -> _Parts:
    target, draft, bat, spec_k = dep.target, dep.draft, cells.batch, cells.spec_k
    verify = np.where(spec_k > 0, cells.tree.verify_tokens(spec_k), 1.0)
    t_kv = mem.kv_cache_bytes(target.kv, cells.tokens, bat)
    t_ws = mem.workspace_bytes(
        target.vocab_size, target.activation_bytes_per_token, bat, verify, bat * verify
    )
    d_kv = d_ws = np.zeros_like(t_kv)
    if draft is not None:
        d_kv = mem.kv_cache_bytes(draft.kv, cells.tokens, bat)
        width = cells.tree.draft_width()
        d_ws = mem.workspace_bytes(
            draft.vocab_size, draft.activation_bytes_per_token, bat, spec_k * width, bat * width
        )
    overhead = mem.overhead_bytes(engine, target.tp)
    return _Parts(
        target_kv=t_kv,
        target_workspace=floats(t_ws),
        draft_kv=d_kv,
        draft_workspace=floats(d_ws),
        overhead=overhead,
        budget=usable,
        pool=None,
    )


def _pool_side(side: SideNumbers) -> PoolSide:
    return PoolSide(
        activation_bytes_per_token=side.activation_bytes_per_token,
        vocab_size=side.vocab_size,
        layers=side.cost.layers,
        moe=side.moe,
        kv=side.kv,
        hidden_size=side.hidden_size,
        encoder_bytes_per_item=side.encoder_bytes_per_item,
        encoder_tokens_per_item=side.encoder_tokens_per_item,
    )


def _pooled(dep: DeploymentNumbers, engine: Engine, cells: _Cells, usable: FloatArray) -> _Parts:
    """vLLM: budget = ⌈U · memory⌉; pool = budget − weights − A − N − G; a batch uses its
    sequences' blocks of the pool (sliding windows credited as vLLM allocates them). With a
    drafter, A is also the largest of the drafter's forward and the sampler phase with the
    rejection sampler's dry run; what that adds to the target's own peak is the draft's share."""
    profile = Profile(dep.profile_tokens, dep.profile_seqs)
    sides = [dep.target] + ([] if dep.draft is None else [dep.draft])
    target = _pool_side(dep.target)
    alone = activation_peak(target, profile, engine)
    peak = alone
    if dep.draft is not None:  # any drafter, n-gram lookup too: the rejection sampler runs
        peak = activation_peak(target, profile, engine, speculating=1.0)
        peak = floats(
            np.maximum(peak, drafter_peak(_pool_side(dep.draft), target, profile, engine))
        )
    extra = floats(peak - alone)
    non_torch = mem.overhead_bytes(engine, dep.tp)
    query_len = 1.0 + cells.spec_k
    sizes = capture_sizes(dep.profile_seqs, dep.profile_tokens, query_len)
    graphs = (
        cuda_graph_bytes([_pool_side(s) for s in sides], sizes, engine)
        if engine.estimates_cuda_graphs
        else floats(0.0)
    )
    budget = floats(np.ceil(engine.gpu_memory_utilization * usable))
    weights = sum((floats(s.weights_bytes) for s in sides), floats(0.0))
    pool = floats(budget - weights - peak - non_torch - graphs)
    layout = mem.pool_layout(dep.target.kv, None if dep.draft is None else dep.draft.kv)
    capacity = pool_capacity(pool, layout, cells.tokens, profile, engine)
    used = floats(cells.batch * capacity.bytes_per_sequence)
    t_plain = mem.kv_cache_bytes(dep.target.kv, cells.tokens, 1)
    d_plain = (
        mem.kv_cache_bytes(dep.draft.kv, cells.tokens, 1) if dep.draft else np.zeros_like(t_plain)
    )
    t_share = t_plain / np.maximum(t_plain + d_plain, 1.0)
    memory_pool = PoolMemory(
        kv_pool=pool,
        kv_pool_tokens=capacity.tokens,
        max_concurrent_sequences=capacity.concurrency,
        activation_peak=peak,
        non_torch=non_torch,
        cuda_graphs=floats(graphs),
        speculative_peak=extra,
    )
    kv_target, kv_draft = floats(used * t_share), floats(used * (1 - t_share))
    overhead = floats(non_torch + graphs)
    return _Parts(
        target_kv=kv_target,
        target_workspace=alone,
        draft_kv=kv_draft,
        draft_workspace=floats(extra + np.zeros_like(used)),
        overhead=overhead,
        budget=budget,
        pool=memory_pool,
    )


def _cell(side: SideNumbers | None) -> FloatArray:
    """KV bytes per token of every layer of a model (SGLang and TensorRT-LLM allocate each
    layer for every token: sliding windows are not credited)."""
    return floats(0.0) if side is None else floats(side.kv.bytes_per_token)


def _fixed_pool(
    dep: DeploymentNumbers, engine: Engine, cells: _Cells, usable: FloatArray, sized: _Sized
) -> _Parts:
    """An engine that allocates its whole pool at start: the pool (tokens × both models' bytes
    per token, and a state pool where the engine keeps one) beside the weights, activations
    and overhead; a batch uses its sequences' tokens and states, and nothing fits when the
    allocation itself does not fit the device. With two pools a batch fits when each holds its
    share: the budget is what the batch's mix of tokens and states could grow to before the
    first of them is full."""
    cell_t, cell_d = _cell(dep.target), _cell(dep.draft)
    draft_kv = None if dep.draft is None else dep.draft.kv
    states = mem.kv_pool_layout(dep.target.kv, draft_kv, engine).state_bytes_per_sequence
    kv_used = floats(cells.batch * (cells.tokens * (cell_t + cell_d) + states))
    state_used = floats(cells.batch * sized.state_slot_bytes)
    pool = floats(sized.tokens * (cell_t + cell_d))
    state_pool = floats(sized.state_pool)
    fill = np.maximum(mem.filled(kv_used, pool), mem.filled(state_used, state_pool))
    used = floats(kv_used + state_used)
    scaled = (state_pool > 0) & (fill > 0)  # one pool alone: its own size, exactly
    room = np.where(scaled, used / np.where(scaled, fill, 1.0), pool + state_pool)
    weights = floats(dep.target.weights_bytes) + (
        0.0 if dep.draft is None else floats(dep.draft.weights_bytes)
    )
    fixed = floats(weights + sized.activation + sized.overhead)
    budget = floats(np.where(usable - fixed - pool - state_pool >= 0, fixed + room, fixed))
    t_share = cell_t / np.maximum(cell_t + cell_d, 1e-9)
    concurrency = np.minimum(sized.tokens / np.maximum(cells.tokens, 1.0), sized.state_slots)
    memory_pool = PoolMemory(
        kv_pool=pool,
        kv_pool_tokens=floats(sized.logged_tokens),
        max_concurrent_sequences=floats(concurrency),
        activation_peak=floats(sized.activation),
        non_torch=floats(sized.overhead),
        cuda_graphs=np.zeros_like(pool),
        speculative_peak=np.zeros_like(pool),  # in SGLang's and TensorRT-LLM's activation term
        mem_fraction=sized.fraction,
        max_running=sized.running,
        state_pool=state_pool,
        state_slots=floats(sized.state_slots),
    )
    return _Parts(
        target_kv=floats(kv_used * t_share + state_used),
        target_workspace=floats(sized.activation),
        draft_kv=floats(kv_used * (1 - t_share)),
        draft_workspace=np.zeros_like(used),
        overhead=floats(sized.overhead),
        budget=budget,
        pool=memory_pool,
    )


@record
class _Sized:
    """What an engine's pool rule decided: tokens per model, and what it logs."""

    tokens: FloatArray
    logged_tokens: FloatArray
    activation: FloatArray
    overhead: FloatArray
    fraction: FloatArray | None = None
    running: FloatArray | None = None
    # a pool of linear-attention states beside the KV pool (SGLang): its memory, its slots
    # (infinite: no bound) and a sequence's slot (0: its state lies in the KV pool)
    state_pool: FloatArray | float = 0.0
    state_slots: FloatArray | float = np.inf
    state_slot_bytes: FloatArray | float = 0.0


def _sglang(dep: DeploymentNumbers, engine: Engine, cells: _Cells, usable: FloatArray) -> _Parts:
    """SGLang: ⌊(free at start · mem_fraction_static − W − the state pool) / cell⌋ tokens, grown
    by one step's draft slots when speculating up to 0.5.6 (core/sglang_pool.py)."""
    target, draft = dep.target, dep.draft
    overhead = mem.overhead_bytes(engine, dep.tp)
    chunked = floats(dep.profile_tokens)
    # a drafter on the GPU (not n-gram lookup) reserves memory and keeps a pool
    on_gpu = floats(0.0) if draft is None else floats(draft.gpu_time)
    reserve = sglang_pool.drafter_reserve_mib(
        on_gpu, 0.0 if draft is None else draft.speculator_head
    )
    fraction = sglang_pool.default_mem_fraction(engine, dep.memory_bytes, dep.tp, chunked, reserve)
    rest = sglang_pool.rest_bytes(usable - overhead, fraction, target.weights_bytes)
    drafting = floats(cells.spec_k > 0) * (0.0 if draft is None else 1.0)  # n-gram too
    verify = cells.tree.verify_tokens(cells.spec_k)
    dp_ranks = floats(dep.tp) if engine.dp_attention else 1.0
    states = sglang_pool.state_pool(
        engine, rest, target.kv.state_bytes_per_sequence, verify * drafting, dp_ranks
    )
    profiled = sglang_pool.profiled_tokens(rest - states.pool_bytes, _cell(target))
    running = sglang_pool.running_requests(
        engine, np.maximum(profiled, 0.0), target.context_window, drafting, states.slots
    )
    grown = sglang_pool.speculative_headroom(running, cells.spec_k, cells.tree.topk, verify) * (
        on_gpu * (cells.spec_k > 0) * engine.speculative_headroom
    )
    # the headroom grows the profiled count as it is, negative where the weights exceed the
    # fraction; a total of 0 or less SGLang refuses to start with (init_memory_pool @0.5.6)
    tokens = floats(np.maximum(profiled + grown, 0.0))
    sized = _Sized(
        tokens=tokens,
        logged_tokens=tokens,
        activation=floats(chunked * target.activation_bytes_per_token),
        overhead=overhead,
        fraction=fraction,
        running=running,
        state_pool=states.pool_bytes,
        state_slots=states.slots,
        state_slot_bytes=states.request_bytes,
    )
    return _fixed_pool(dep, engine, cells, usable, sized)


def _trtllm(dep: DeploymentNumbers, engine: Engine, cells: _Cells, usable: FloatArray) -> _Parts:
    """TensorRT-LLM: free_gpu_memory_fraction of what its profiled prefill leaves
    (core/trtllm_pool.py)."""
    sides = [dep.target] + ([] if dep.draft is None else [dep.draft])
    overhead = mem.overhead_bytes(engine, dep.tp)
    tokens_run = floats(dep.profile_tokens)
    activation = floats(
        np.max(
            [engine.activation_factor * tokens_run * s.activation_bytes_per_token for s in sides],
            axis=0,
        )
    )
    weights = sum((floats(s.weights_bytes) for s in sides), floats(0.0))
    pool_bytes = trtllm_pool.kv_bytes(engine, usable, weights + activation + overhead)
    per_token = _cell(dep.target) + _cell(dep.draft)
    tokens = floats(np.floor(pool_bytes / np.maximum(per_token, 1e-9)))
    logged = trtllm_pool.logged_tokens(engine, pool_bytes, per_token)
    sized = _Sized(
        tokens=tokens,
        logged_tokens=logged,
        activation=activation,
        overhead=overhead,
        fraction=floats(engine.free_gpu_memory_fraction),
    )
    return _fixed_pool(dep, engine, cells, usable, sized)


Rule = Callable[[DeploymentNumbers, Engine, _Cells, FloatArray], _Parts]
RULES: dict[str, Rule] = {"sum": _plain, "vllm": _pooled, "sglang": _sglang, "trtllm": _trtllm}


def deployment_memory(
    dep: DeploymentNumbers,
    engine: Engine,
    context: ArrayLike,
    batch: ArrayLike,
    k: ArrayLike,
    headroom: float = 0.0,
    tree: Tree = CHAIN,
) -> Memory:
    """Both models keep a KV cache for the full context plus a slot for each draft token
    verified (K for a chain); the workspace grows with K (fp32 logits of the verified
    positions, the draft distributions). `headroom` is a share of the device kept free
    (counted against the budget)."""
    bat, n_k = floats(batch), floats(k)
    spec_k = n_k if dep.draft is not None else np.zeros_like(n_k)
    slots = np.where(spec_k > 0, tree.verify_tokens(spec_k) - 1.0, 0.0)
    cells = _Cells(bat, spec_k, floats(context) + slots, tree)
    device = floats(dep.memory_bytes)
    usable = floats(device * (1.0 - headroom)) if headroom else device
    p = RULES[engine.memory_rule](dep, engine, cells, usable)
    t_weights = floats(dep.target.weights_bytes)
    d_weights = floats(0.0 if dep.draft is None else dep.draft.weights_bytes)
    combined = floats(
        t_weights
        + d_weights
        + p.target_kv
        + p.target_workspace
        + p.draft_kv
        + p.draft_workspace
        + p.overhead
    )
    return Memory(
        target_weights=t_weights,
        target_kv=p.target_kv,
        target_workspace=p.target_workspace,
        draft_weights=d_weights,
        draft_kv=p.draft_kv,
        draft_workspace=p.draft_workspace,
        overhead=p.overhead,
        combined=combined,
        budget=p.budget,
        device=device,
        pool=p.pool,
    )
