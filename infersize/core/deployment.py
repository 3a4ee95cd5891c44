"""A deployment: a target, an optional draft, a GPU, tensor parallelism, an engine and a price,
as the numbers the memory and speed formulas read.

`Side` is one model at its precision as one GPU holds it; its `numbers` are what the formulas
read. `stack` turns the numbers of many deployments into one `DeploymentNumbers` of arrays, so a
sweep chunk is evaluated by one broadcast call of the same function `infersize spec` uses.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

from infersize.catalog.records import ComponentBytes, Gpu, KvDtype, Model, WeightFormat
from infersize.core import memory as mem
from infersize.core import sglang_pool, trtllm_pool
from infersize.core.arrays import Num
from infersize.core.engines import Engine
from infersize.core.latency import StepCost, step_cost
from infersize.core.methods import method_of
from infersize.core.params import ParamCounts, param_counts
from infersize.core.vllm_pool import Profile, default_profile
from infersize.errors import InfersizeError
from infersize.record import record

T = TypeVar("T")
TP_SIZES = (1, 2, 4, 8)  # the tensor-parallel sizes of one node


def tensor_parallel_sizes(attention_heads: int, sizes: tuple[int, ...] = TP_SIZES) -> list[int]:
    """The sizes that split a model's attention heads evenly (vLLM requires it)."""
    return [tp for tp in sizes if attention_heads % tp == 0]


@record
class SideNumbers:
    """What the memory and speed formulas read of one side (per GPU); scalars or arrays."""

    weights_bytes: Num
    vocab_size: Num
    activation_bytes_per_token: Num
    tp: Num
    kv: mem.KvLayout
    cost: StepCost
    moe: Num = 0.0  # 1.0 for a mixture-of-experts model
    hidden_size: Num = 0.0
    encoder_bytes_per_item: Num = 0.0  # vision tower activations for one image (0: text only)
    encoder_tokens_per_item: Num = 0.0  # decoder tokens of that image
    # drafters: how a draft pass is priced (core/methods.py)
    parallel_draft: Num = 0.0  # 1.0: one pass proposes all K tokens (Medusa)
    max_k: Num = math.inf  # the most tokens it can propose (Medusa heads, MLP stages)
    gpu_time: Num = 1.0  # 0.0: drafting costs no GPU time (n-gram lookup on the CPU)
    speculator_head: Num = 0.0  # 1.0: a head (EAGLE, MTP ...), not a draft model (SGLang's reserve)
    context_window: Num = 0.0  # max_position_embeddings: SGLang's context length by default


@record
class Side:
    """One model of the deployment at its precision, as held by one GPU."""

    model: Model
    fmt: WeightFormat
    counts: ParamCounts
    weights: ComponentBytes  # per GPU
    numbers: SideNumbers
    weights_from_files: bool = False  # exact bytes read from the checkpoint's headers

    @property
    def tp(self) -> int:
        return int(self.numbers.tp)


def prepare_side(
    model: Model,
    fmt: WeightFormat,
    kv_dtype: KvDtype,
    gpu: Gpu,
    tp: int = 1,
    exact: ComponentBytes | None = None,
    weight_only: bool = False,
    dp_attention: bool = False,
    ssm_dtype: KvDtype | None = None,
    fused_allreduce: bool = False,
    moe_layer_s: float = math.nan,
) -> Side:
    """`exact`: the whole model's weight bytes read from its files, used instead of the
    format's bits per weight (split over TP ranks like the formula). `weight_only`: the GPU
    runs `fmt` through dequantising kernels. `dp_attention`: attention runs data parallel over
    the `tp` ranks (attention_data_parallel). `ssm_dtype`: the engine's dtype for the
    linear-attention layers' recurrent state (None: the model's, mem.linear_state_bytes).
    `fused_allreduce`: the engine fuses the all-reduces of its passes (core/allreduce.py).
    `moe_layer_s`: the engine's fixed cost of one of its MoE layers (NaN: the engine's pooled
    one, core/latency.pass_seconds)."""
    mem.check_tp(model, tp)
    counts = param_counts(model)
    weights = mem.weight_bytes(counts, fmt, tp) if exact is None else mem.split_weights(exact, tp)
    kv = mem.kv_layout(model, kv_dtype, tp, ssm_dtype)
    if dp_attention and tp > 1:
        weights, kv = attention_data_parallel(model, counts, fmt, kv_dtype, weights, tp, ssm_dtype)
    on_gpu = model.speculator != "ngram"  # n-gram lookup keeps no logits or activations
    numbers = SideNumbers(
        weights_bytes=weights.total,
        vocab_size=model.vocab_size if on_gpu else 0,
        activation_bytes_per_token=mem.activation_bytes_per_token(model, tp) if on_gpu else 0.0,
        tp=tp,
        kv=kv,
        cost=step_cost(
            model, counts, weights, fmt, kv, gpu, tp, weight_only, fused_allreduce, moe_layer_s
        ),
        moe=0.0 if model.moe is None else 1.0,
        hidden_size=model.hidden_size,
        encoder_bytes_per_item=mem.encoder_bytes_per_item(model.vision, tp),
        encoder_tokens_per_item=0 if model.vision is None else model.vision.tokens_per_item,
        parallel_draft=1.0 if method_of(model).parallel else 0.0,
        max_k=float(model.speculator_heads or math.inf),
        gpu_time=1.0 if on_gpu else 0.0,
        speculator_head=1.0 if model.is_speculator_head else 0.0,
        context_window=model.max_position_embeddings,
    )
    return Side(
        model=model,
        fmt=fmt,
        counts=counts,
        weights=weights,
        numbers=numbers,
        weights_from_files=exact is not None,
    )


def attention_data_parallel(
    model: Model,
    counts: ParamCounts,
    fmt: WeightFormat,
    kv_dtype: KvDtype,
    weights: ComponentBytes,
    tp: int,
    ssm_dtype: KvDtype | None = None,
) -> tuple[ComponentBytes, mem.KvLayout]:
    """Attention data parallel over the `tp` ranks (SGLang's --enable-dp-attention,
    TensorRT-LLM's enable_attention_dp, vLLM's data-parallel attention): each rank holds the
    attention weights whole, instead of a 1/tp share, and attends for its own 1/tp of the
    sequences, whose KV it alone holds: per token of the replica's batch a rank holds 1/tp of
    an unsplit layout (MLA's latent is no longer copied on every rank)."""
    extra = counts.attention * fmt.linear_bits_per_weight / 8 * (1.0 - 1.0 / tp)
    whole = dataclasses.replace(weights, linear=int(weights.linear + extra))
    one = mem.kv_layout(model, kv_dtype, 1, ssm_dtype)
    kv = mem.KvLayout(
        full_bytes_per_token=one.full_bytes_per_token / tp,
        window_bytes_per_token=one.window_bytes_per_token / tp,
        window_tokens=one.window_tokens,
        layer_bytes_per_token=one.layer_bytes_per_token / tp,
        state_bytes_per_sequence=one.state_bytes_per_sequence / tp,
    )
    return whole, kv


@record
class DeploymentNumbers:
    """Everything the evaluation reads of a deployment; each numeric field one value or one per
    stacked deployment."""

    target: SideNumbers
    draft: SideNumbers | None  # None: the target alone
    memory_bytes: Num  # per GPU, as the CUDA runtime reports it
    price_usd_per_hour: Num  # per GPU; NaN when unknown
    tp: Num
    # pooled engines: the scheduler's token budget per step (vLLM's max_num_batched_tokens, the
    # size of its profiling pass; SGLang's chunked_prefill_size; TensorRT-LLM's max_num_tokens)
    profile_tokens: Num = 0.0
    # and the most sequences it runs at once (max_num_seqs; max_batch_size; SGLang's
    # max_running_requests when set, else 0: it follows the pool, core/sglang_pool.py)
    profile_seqs: Num = 0.0


def _with_shared_head(draft: Side, target: Side) -> SideNumbers:
    """A head that computes its logits with the target's LM head (EAGLE-1, MTP in vLLM) reads
    those weights on every draft pass: they are the target's bytes, priced in the head's step."""
    if not draft.model.lm_head_from_target:
        return draft.numbers
    head = target.weights.lm_head or target.weights.embedding  # tied: the embedding is the head
    cost = dataclasses.replace(
        draft.numbers.cost, dense_bytes=draft.numbers.cost.dense_bytes + head
    )
    return dataclasses.replace(draft.numbers, cost=cost)


def scheduler_limits(engine: Engine, gpu: Gpu) -> Profile:
    """The token budget and sequence limit of the engine's scheduler on this GPU."""
    if engine.memory_rule == "sglang":
        chunked = float(sglang_pool.default_chunked_prefill(engine, gpu.memory_bytes))
        return Profile(chunked, float(engine.max_running_requests or 0))
    if engine.memory_rule == "trtllm":
        tokens, seqs = trtllm_pool.limits(engine)
        return Profile(tokens, seqs)
    return default_profile(engine, gpu.memory_bytes, gpu.name)


def hourly_price(gpu: Gpu, override: float | None) -> float:
    """The one price rule: the user's price, else the catalog's; NaN when neither is known."""
    price = override if override is not None else gpu.price_usd_per_hour
    return math.nan if price is None else price


def deployment_numbers(
    target: Side,
    draft: Side | None,
    gpu: Gpu,
    price_usd_per_hour: float | None = None,
    engine: Engine | None = None,
    limits: Profile | None = None,
) -> DeploymentNumbers:
    """`limits`: scheduler_limits(engine, gpu) where the caller has it already (a sweep asks
    once per GPU for thousands of deployments)."""
    profile = limits if limits is not None or engine is None else scheduler_limits(engine, gpu)
    return DeploymentNumbers(
        target=target.numbers,
        draft=None if draft is None else _with_shared_head(draft, target),
        memory_bytes=gpu.memory_bytes,
        price_usd_per_hour=hourly_price(gpu, price_usd_per_hour),
        tp=target.tp,
        profile_tokens=0.0 if profile is None else float(profile.batched_tokens),
        profile_seqs=0.0 if profile is None else float(profile.seqs),
    )


def head_problem(target: Model, draft: Model | None) -> str | None:
    """A speculator head is never a target, and drafts only for a target of its width and
    vocabulary (it reads the target's hidden states and embedding); n-gram lookup drafts for
    any target."""
    if target.is_speculator_head:
        return f"{target.id} is a speculator head: give it as the draft of a {target.family} model"
    if (
        draft is not None
        and draft.is_speculator_head
        and draft.speculator != "ngram"
        and (draft.hidden_size != target.hidden_size or draft.vocab_size != target.vocab_size)
    ):
        return (
            f"speculator head {draft.id} (hidden {draft.hidden_size}, vocabulary "
            f"{draft.vocab_size}) does not fit {target.id} (hidden {target.hidden_size}, "
            f"vocabulary {target.vocab_size})"
        )
    return None


def pairing_problem(target: Model, draft: Model, allow_cross_tokenizer: bool) -> str | None:
    """The pairing rules: head_problem, and a draft shares its target's tokenizer family
    (unless allowed)."""
    if problem := head_problem(target, draft):
        return problem
    t_tok, d_tok = target.tokenizer_family, draft.tokenizer_family
    # a head shares the target's vocabulary (head_problem checks it): no tokenizer to compare
    if t_tok != d_tok and not allow_cross_tokenizer and not draft.is_speculator_head:
        return (
            f"draft {draft.id} ({d_tok} tokenizer) does not share {target.id}'s tokenizer ({t_tok})"
        )
    return None


def check_pair(target: Model, draft: Model | None, allow_cross_tokenizer: bool) -> None:
    if problem := head_problem(target, draft):
        raise InfersizeError(problem)
    if draft is None:
        return
    problem = pairing_problem(target, draft, allow_cross_tokenizer)
    if problem:
        raise InfersizeError(
            f"{problem}; add {{allow_cross_tokenizer}} to size it anyway",
            settings=("allow_cross_tokenizer",),
        )


def draft_is_smaller(target: Model, draft: Model) -> bool:
    """Grids pair a target only with smaller drafts (explicit pairs may break the rule)."""
    return param_counts(draft).total < param_counts(target).total


def with_trailing_axis(record: T) -> T:
    """`record` with a new last axis on every array field (nested records too), so stacked
    settings broadcast against a K axis or a batch ladder placed last. Scalars stay."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(record):  # type: ignore[arg-type]
        value = getattr(record, f.name)
        if dataclasses.is_dataclass(value):
            value = with_trailing_axis(value)
        elif isinstance(value, np.ndarray) and value.ndim:
            value = value[..., None]
        values[f.name] = value
    result: T = dataclasses.replace(record, **values)  # type: ignore[type-var]
    return result


def select(record: T, index: np.ndarray) -> T:
    """The stacked deployments at `index` (one per row), as 1-D arrays: a stacked field of
    shape (settings, 1, ...) becomes (rows,); scalars stay."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(record):  # type: ignore[arg-type]
        value = getattr(record, f.name)
        if dataclasses.is_dataclass(value):
            value = select(value, index)
        elif isinstance(value, np.ndarray) and value.ndim:
            value = value[(index,) + (0,) * (value.ndim - 1)]
        values[f.name] = value
    result: T = dataclasses.replace(record, **values)  # type: ignore[type-var]
    return result


def stack(items: Sequence[T], ndim: int) -> T:
    """One dataclass like items[0] whose numeric fields are arrays of shape (len(items), 1, ...),
    `ndim` dimensions in all, so they broadcast against the grid axes that follow. Items that
    are one object (a side shared by many deployments) are read once and their values
    repeated."""
    first: Any = items[0]
    position: dict[int, int] = {}
    index = np.fromiter((position.setdefault(id(x), len(position)) for x in items), np.int64)
    if len(position) < len(items):
        unique = list({id(x): x for x in items}.values())
        return _repeated(stack(unique, ndim), index)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(first):
        column = [getattr(item, f.name) for item in items]
        if column[0] is None:
            values[f.name] = None
        elif dataclasses.is_dataclass(column[0]):
            values[f.name] = stack(column, ndim)
        else:
            values[f.name] = np.asarray(column, dtype=np.float64).reshape((-1,) + (1,) * (ndim - 1))
    result: T = type(first)(**values)
    return result


def _repeated(record: T, index: np.ndarray) -> T:
    """A stacked record's values at `index` along the first axis (nested records too)."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(record):  # type: ignore[arg-type]
        value = getattr(record, f.name)
        if dataclasses.is_dataclass(value):
            value = _repeated(value, index)
        elif isinstance(value, np.ndarray):
            value = value[index]
        values[f.name] = value
    result: T = type(record)(**values)
    return result
