"""GPU memory of a deployment, in bytes: weights, KV cache, workspace, overhead, and the fit.

Every function takes numpy arrays (or scalars) for context, batch and K, so `infersize spec`
(one cell) and a sweep (millions of cells) run the same code. Bytes per element always come from
the precision catalog (configs/precisions.yaml), never a bare 2.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from infersize.catalog import KvDtype, ModelSpec, WeightFormat
from infersize.engines import Engine
from infersize.errors import ValueRangeError
from infersize.params import ParamCounts

GIB = 2**30
LOGIT_BYTES = 4  # logits and draft probabilities are kept in fp32 for (rejection) sampling
ACTIVATION_BYTES = 2  # bf16/fp16 activations
SAFE_UTILIZATION = 0.90  # above this a deployment is "tight": allocator fragmentation, spikes

FloatArray = NDArray[np.float64]


def _bytes(count: float, bits: float) -> int:
    """Storage of `count` values at `bits` each, rounded up to whole bytes."""
    return int(np.ceil(count * bits / 8))


@dataclass(frozen=True)
class WeightBytes:
    """Weight bytes held by one GPU (the whole model when tp = 1)."""

    embedding: int
    lm_head: int
    linear: int
    small: int

    @property
    def total(self) -> int:
        return self.embedding + self.lm_head + self.linear + self.small

    @property
    def read_per_step(self) -> int:
        """Bytes a decode step streams: everything but the embedding table, of which only
        the looked-up rows are read (a tied embedding is read in full as the lm_head)."""
        return self.total - self.embedding + (self.embedding if self.lm_head == 0 else 0)


def check_tp(model: ModelSpec, tp: int) -> None:
    if tp < 1:
        raise ValueRangeError(f"--tp must be at least 1, got {tp}")
    if model.num_attention_heads % tp:
        raise ValueRangeError(
            f"{model.id}: tensor parallel {tp} does not divide its "
            f"{model.num_attention_heads} attention heads"
        )


def weight_bytes(counts: ParamCounts, fmt: WeightFormat, tp: int = 1) -> WeightBytes:
    """Weights per GPU. With tensor parallel the matrices and the vocabulary are split across
    `tp` ranks (vLLM's column/row-parallel linears, vocab-parallel embedding); norms replicate."""
    return WeightBytes(
        embedding=_bytes(counts.embedding / tp, fmt.embedding_bits),
        lm_head=_bytes(counts.lm_head / tp, fmt.lm_head_bits),
        linear=_bytes(counts.linear / tp, fmt.linear_bits_per_weight),
        small=_bytes(counts.small, fmt.norm_bits),
    )


def split_weights(weights: WeightBytes, tp: int) -> WeightBytes:
    """Known whole-model bytes on one of `tp` ranks (matrices and vocabulary split, norms not)."""
    return WeightBytes(
        embedding=int(np.ceil(weights.embedding / tp)),
        lm_head=int(np.ceil(weights.lm_head / tp)),
        linear=int(np.ceil(weights.linear / tp)),
        small=weights.small,
    )


@dataclass(frozen=True)
class KvLayout:
    """KV cache bytes per token on one GPU, split by layer kind."""

    full_bytes_per_token: float  # summed over full-attention layers
    window_bytes_per_token: float  # summed over sliding-window layers
    window_tokens: int  # sliding window length (0 when none)

    @property
    def bytes_per_token(self) -> float:
        """Per token while the context is within the window (all layers store it)."""
        return self.full_bytes_per_token + self.window_bytes_per_token


def kv_layout(model: ModelSpec, kv: KvDtype, tp: int = 1) -> KvLayout:
    """2 (K and V) · kv_heads · head_dim · bytes per element, per layer and token.
    With tensor parallel each rank holds kv_heads / tp heads, at least one (a head replicates
    when there are fewer KV heads than ranks, as in vLLM)."""
    if model.is_mla:  # DeepSeek-V2 §2.1.2: one latent of kv_lora_rank + d_rope, not split by TP
        latent = model.kv_lora_rank + model.qk_rope_head_dim
        return KvLayout(latent * kv.bytes_per_element * model.num_hidden_layers, 0.0, 0)
    kv_heads_per_gpu = max(1, model.num_key_value_heads // tp)
    per_layer = 2 * kv_heads_per_gpu * model.head_dim_resolved * kv.bytes_per_element
    if model.sliding_window is None:
        return KvLayout(per_layer * model.num_hidden_layers, 0.0, 0)
    window_layers = (
        model.num_hidden_layers
        if model.sliding_window_layers is None
        else model.sliding_window_layers
    )
    full_layers = model.num_hidden_layers - window_layers
    return KvLayout(per_layer * full_layers, per_layer * window_layers, model.sliding_window)


def kv_cache_bytes(layout: KvLayout, tokens: ArrayLike, batch: ArrayLike) -> FloatArray:
    """KV cache = batch · (full layers · tokens + window layers · min(tokens, window))."""
    tokens = np.asarray(tokens, dtype=np.float64)
    windowed = np.minimum(tokens, layout.window_tokens)  # window 0 only with 0 window bytes
    per_seq = layout.full_bytes_per_token * tokens + layout.window_bytes_per_token * windowed
    return np.ceil(np.asarray(batch, dtype=np.float64) * per_seq)


def activation_bytes_per_token(model: ModelSpec, tp: int = 1) -> float:
    """Peak live activations of one layer per token: the residual and normed hidden state
    (2·h), q/k/v (split by tp) and the gate and up outputs of the MLP (2·i, split by tp)."""
    if model.is_mla:
        qk = model.qk_nope_head_dim + model.qk_rope_head_dim
        qkv = model.num_attention_heads * qk + model.kv_lora_rank + model.qk_rope_head_dim
    else:
        qkv = (model.num_attention_heads + 2 * model.num_key_value_heads) * model.head_dim_resolved
    expert_i = model.moe_intermediate_size or model.intermediate_size
    mlp_i = expert_i * ((model.num_experts_per_tok or 1) + model.num_shared_experts)
    return (2 * model.hidden_size + (qkv + 2 * mlp_i) / tp) * ACTIVATION_BYTES


def workspace_bytes(
    vocab_size: ArrayLike,
    activation_bytes_per_token: ArrayLike,
    batch: ArrayLike,
    logit_positions: ArrayLike,
    tokens: ArrayLike,
) -> FloatArray:
    """fp32 logits for batch · logit_positions rows of the vocabulary, plus the activations of
    a forward pass over `tokens` tokens. Target: K+1 positions verified in one pass; draft: the
    K proposal distributions it keeps for rejection sampling, one token per step."""
    batch = np.asarray(batch, dtype=np.float64)
    positions = np.asarray(logit_positions, dtype=np.float64)
    logits = batch * positions * np.asarray(vocab_size, dtype=np.float64) * LOGIT_BYTES
    activations = np.asarray(tokens, dtype=np.float64) * activation_bytes_per_token
    return np.ceil(logits + activations)


def overhead_bytes(engine: Engine, tp: ArrayLike = 1) -> FloatArray:
    """Runtime overhead of the one process that serves both models, per GPU."""
    extra = np.where(np.asarray(tp) > 1, engine.tp_overhead_gib, 0.0)
    return np.round((engine.overhead_gib + extra) * GIB)


def vllm_profile_bytes(
    vocab_size: ArrayLike, activation_bytes_per_token: ArrayLike, engine: Engine
) -> FloatArray:
    """Activation peak of vLLM's profiling forward pass: max_num_batched_tokens tokens through
    the model plus the sampler's fp32 logits for max_num_seqs sequences (vLLM V1 gpu_worker)."""
    return np.asarray(
        engine.max_num_batched_tokens * np.asarray(activation_bytes_per_token, dtype=np.float64)
        + engine.max_num_seqs * np.asarray(vocab_size, dtype=np.float64) * LOGIT_BYTES
    )


def verdict(share: ArrayLike) -> NDArray[np.str_]:
    """safe (≤ 90% of the budget), tight (≤ 100%) or OOM, from used / budget."""
    share = np.asarray(share, dtype=np.float64)
    return np.where(share > 1.0, "OOM", np.where(share > SAFE_UTILIZATION, "tight", "safe"))
