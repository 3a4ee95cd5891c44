"""GPU memory of a deployment, in bytes: weights, KV cache, workspace, overhead, and the fit.

Every function takes numpy arrays (or scalars) for context, batch and K, so `infersize spec`
(one cell) and a sweep (millions of cells) run the same code. Bytes per element always come from
the precision catalog (configs/precisions.yaml), never a bare 2.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from infersize.catalog.records import ComponentBytes, KvDtype, Model, VisionTower, WeightFormat
from infersize.core.arrays import BoolArray, FloatArray, Num, floats
from infersize.core.engines import Engine
from infersize.core.params import ParamCounts
from infersize.errors import InfersizeError, ValueRangeError
from infersize.record import record

GIB = 2**30
LOGIT_BYTES = 4  # logits and draft probabilities are kept in fp32 for (rejection) sampling
ACTIVATION_BYTES = 2  # bf16/fp16 activations
SAFE_UTILIZATION = 0.90  # above this a deployment is "tight": allocator fragmentation, spikes


def _bytes(count: float, bits: float) -> int:
    """Storage of `count` values at `bits` each, rounded up to whole bytes."""
    return int(np.ceil(count * bits / 8))


def check_tp(model: Model, tp: int) -> None:
    if tp < 1:
        raise ValueRangeError("tp", f"must be at least 1, got {tp}")
    attends = model.speculator not in KV_FREE_SPECULATORS  # Medusa, MLP stages, n-gram: no heads
    if attends and model.num_attention_heads % tp:
        raise InfersizeError(
            f"{model.id}: tensor parallel {tp} does not divide its "
            f"{model.num_attention_heads} attention heads"
        )


def weight_bytes(counts: ParamCounts, fmt: WeightFormat, tp: int = 1) -> ComponentBytes:
    """Weights per GPU. With tensor parallel the matrices and the vocabulary are split across
    `tp` ranks (vLLM's column/row-parallel linears, vocab-parallel embedding); norms replicate."""
    return ComponentBytes(
        embedding=_bytes(counts.embedding / tp, fmt.embedding_bits),
        lm_head=_bytes(counts.lm_head / tp, fmt.lm_head_bits),
        linear=_bytes(counts.linear / tp, fmt.linear_bits_per_weight),
        small=_bytes(counts.small, fmt.norm_bits),
    )


def split_weights(weights: ComponentBytes, tp: int) -> ComponentBytes:
    """Known whole-model bytes on one of `tp` ranks (matrices and vocabulary split, norms not)."""
    return ComponentBytes(
        embedding=int(np.ceil(weights.embedding / tp)),
        lm_head=int(np.ceil(weights.lm_head / tp)),
        linear=int(np.ceil(weights.linear / tp)),
        small=weights.small,
    )


@record
class KvLayout:
    """KV cache bytes per token on one GPU, split by layer kind."""

    full_bytes_per_token: Num  # summed over full-attention layers
    window_bytes_per_token: Num  # summed over sliding-window layers
    window_tokens: Num  # sliding window length (0 when none)
    layer_bytes_per_token: Num  # one layer's page per token (vLLM groups layers by it)
    state_bytes_per_sequence: Num = 0.0  # linear-attention layers: a fixed state per sequence

    @property
    def bytes_per_token(self) -> Num:
        """Per token while the context is within the window (all layers store it)."""
        return self.full_bytes_per_token + self.window_bytes_per_token


KV_FREE_SPECULATORS = ("medusa", "mlp_speculator", "ngram")


def pool_layout(target: KvLayout, draft: KvLayout | None) -> KvLayout:
    """The layers that draw from the one pool: the target's and the draft's."""
    if draft is None:
        return target
    return KvLayout(
        full_bytes_per_token=target.full_bytes_per_token + draft.full_bytes_per_token,
        window_bytes_per_token=target.window_bytes_per_token + draft.window_bytes_per_token,
        window_tokens=np.maximum(target.window_tokens, draft.window_tokens),
        layer_bytes_per_token=target.layer_bytes_per_token,
        state_bytes_per_sequence=target.state_bytes_per_sequence + draft.state_bytes_per_sequence,
    )


def kv_pool_layout(target: KvLayout, draft: KvLayout | None, engine: Engine) -> KvLayout:
    """What a sequence holds in the KV pool: pool_layout, less the target's linear-attention
    state where the engine keeps those in a pool of their own (SGLang's MambaPool,
    core/sglang_pool.py)."""
    if engine.mamba_full_memory_ratio is not None:
        target = replace(target, state_bytes_per_sequence=0.0)
    return pool_layout(target, draft)


def kv_layout(model: Model, kv: KvDtype, tp: int = 1, ssm_dtype: KvDtype | None = None) -> KvLayout:
    """2 (K and V) · kv_heads · head_dim · bytes per element, per layer and token.
    With tensor parallel each rank holds kv_heads / tp heads, at least one (a head replicates
    when there are fewer KV heads than ranks, as in vLLM). Medusa heads, MLP speculators and
    n-gram lookup attend to nothing: no KV cache. `ssm_dtype`: the linear-attention layers'
    recurrent state's (linear_state_bytes)."""
    if model.speculator in KV_FREE_SPECULATORS:
        return KvLayout(
            full_bytes_per_token=0.0,
            window_bytes_per_token=0.0,
            window_tokens=0,
            layer_bytes_per_token=0.0,
        )
    if (mla := model.mla) is not None:  # DeepSeek-V2 §2.1.2: one latent, not split by TP
        per_layer = (mla.kv_lora_rank + mla.qk_rope_head_dim) * kv.bytes_per_element
        per_layer += indexer_key_bytes(model)
        return KvLayout(
            full_bytes_per_token=per_layer * model.num_hidden_layers,
            window_bytes_per_token=0.0,
            window_tokens=0,
            layer_bytes_per_token=per_layer,
        )
    kv_heads_per_gpu = max(1, model.num_key_value_heads // tp)
    per_layer = 2 * kv_heads_per_gpu * model.head_dim_resolved * kv.bytes_per_element
    attention_layers = model.num_hidden_layers - model.linear_attention_layers
    state = linear_state_bytes(model, tp, ssm_dtype)
    if model.sliding_window is None:
        return KvLayout(
            full_bytes_per_token=per_layer * attention_layers,
            window_bytes_per_token=0.0,
            window_tokens=0,
            layer_bytes_per_token=per_layer,
            state_bytes_per_sequence=state,
        )
    window_layers = (
        attention_layers if model.sliding_window_layers is None else model.sliding_window_layers
    )
    full_layers = attention_layers - window_layers
    return KvLayout(
        full_bytes_per_token=per_layer * full_layers,
        window_bytes_per_token=per_layer * window_layers,
        window_tokens=model.sliding_window,
        layer_bytes_per_token=per_layer,
        state_bytes_per_sequence=state,
    )


def indexer_key_bytes(model: Model) -> float:
    """Per layer and token, the key DeepSeek-V3.2's lightning indexer caches beside the latent:
    index_head_dim fp8 values and one fp32 scale per 128 of them (the Indexer's k_cache and
    k_scale_cache, deepseek-ai/DeepSeek-V3.2-Exp inference/model.py), whatever the KV dtype."""
    if model.index_head_dim is None:
        return 0.0
    return float(model.index_head_dim + 4 * -(-model.index_head_dim // 128))


def linear_state_bytes(model: Model, tp: int = 1, ssm_dtype: KvDtype | None = None) -> float:
    """Per sequence, the linear-attention layers' state: the conv window, (2·k + v channels) ·
    (kernel − 1), and one key × value matrix per value head, split over TP ranks. The window
    is 16-bit; the matrices are at `ssm_dtype` where the engine sets one, else at the model's
    16-bit dtype. vLLM (mamba_utils.py gated_delta_net_state_shape, mamba_cache_dtype "auto";
    the KV cache dtype does not apply) holds both at the model's dtype. SGLang holds the window
    in bfloat16 (CONV_DTYPE) and the matrices at --mamba-ssm-dtype, float32 by default
    (sgl-project/sglang@5c8bd8b51b53b9b39eb1edec582ee43b21002106:
    python/sglang/srt/configs/mamba_utils.py, Mamba2StateShape.create with conv_dim =
    v + 2 · k and the temporal state (value heads / tp, value head dim, key head dim), as
    configs/qwen3_next.py's mamba2_cache_params gives them; mamba_cache_per_req sums both
    over the linear layers)."""
    if (lin := model.linear_attention) is None:
        return 0.0
    k, v = lin.num_key_heads * lin.key_head_dim, lin.num_value_heads * lin.value_head_dim
    conv = (2 * k + v) // tp * (lin.conv_kernel_dim - 1)
    recurrent = lin.num_value_heads // tp * lin.key_head_dim * lin.value_head_dim
    recurrent_bytes = ACTIVATION_BYTES if ssm_dtype is None else ssm_dtype.bytes_per_element
    return float(lin.layers * (conv * ACTIVATION_BYTES + recurrent * recurrent_bytes))


def step_traffic(layout: KvLayout) -> KvLayout:
    """What one step moves per sequence, as a layout: the attention's KV cache read, and the
    linear-attention state read and then written back in place, so twice. Both engines'
    recurrent kernels update the state where it lies every step, at the dtype it is held in:
    SGLang's decode loads it and stores the final state back to `h0_source`
    (`tl.store(p_h0, b_h.to(p_h0.dtype.element_ty))`, float32 by default;
    sgl-project/sglang@5c8bd8b51b53b9b39eb1edec582ee43b21002106:
    python/sglang/srt/layers/attention/fla/fused_sigmoid_gating_recurrent.py); vLLM's decode
    calls `fused_sigmoid_gating_delta_rule_update(..., initial_state=ssm_state,
    inplace_final_state=True)`, its prefill stores `ssm_state[indices] = last_recurrent_state`,
    and `causal_conv1d_update` rewrites the conv window
    (vllm-project/vllm@dae956b29dfdefa6ffa2ae94a6fe77222647e38a:
    vllm/model_executor/layers/mamba/gdn_linear_attn.py). The pool holds the state once
    (`kv_cache_bytes` of the layout itself)."""
    return replace(layout, state_bytes_per_sequence=2.0 * layout.state_bytes_per_sequence)


def kv_cache_bytes(layout: KvLayout, tokens: ArrayLike, batch: ArrayLike) -> FloatArray:
    """KV cache = batch · (full layers · tokens + window layers · min(tokens, window)
    + the linear-attention layers' fixed state)."""
    n_tokens = floats(tokens)
    windowed = np.minimum(n_tokens, layout.window_tokens)  # window 0 only with 0 window bytes
    per_seq = layout.full_bytes_per_token * n_tokens + layout.window_bytes_per_token * windowed
    per_seq = per_seq + layout.state_bytes_per_sequence
    return floats(np.ceil(floats(batch) * per_seq))


def activation_bytes_per_token(model: Model, tp: int = 1) -> float:
    """Peak live activations of one layer per token: the residual and normed hidden state
    (2·h), q/k/v (split by tp) and the gate and up outputs of the MLP (2·i, split by tp)."""
    if (mla := model.mla) is not None:
        qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        qkv = model.num_attention_heads * qk + mla.kv_lora_rank + mla.qk_rope_head_dim
    else:
        qkv = (model.num_attention_heads + 2 * model.num_key_value_heads) * model.head_dim_resolved
    moe = model.moe
    if moe is None:
        mlp_i = model.intermediate_size
    else:
        mlp_i = moe.expert_intermediate_size * (moe.num_experts_per_tok + moe.num_shared_experts)
    return (2 * model.hidden_size + (qkv + 2 * mlp_i) / tp) * ACTIVATION_BYTES


def encoder_bytes_per_item(vision: VisionTower | None, tp: int = 1) -> float:
    """Live activations of the vision tower for one image, the same shape as a decoder layer:
    residual and normed hidden state, q/k/v (three full heads' width) and the MLP's two
    intermediate outputs, per patch; the matrices split over tensor parallel ranks."""
    if vision is None:
        return 0.0
    h, i = vision.hidden_size, vision.intermediate_size
    return vision.patches_per_item * (2 * h + (3 * h + 2 * i) / tp) * ACTIVATION_BYTES


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
    logits = floats(batch) * floats(logit_positions) * floats(vocab_size) * LOGIT_BYTES
    activations = floats(tokens) * floats(activation_bytes_per_token)
    return floats(np.ceil(logits + activations))


def overhead_bytes(engine: Engine, tp: ArrayLike = 1) -> FloatArray:
    """Runtime overhead of the one process that serves both models, per GPU."""
    extra = np.where(floats(tp) > 1, engine.tp_overhead_gib, 0.0)
    return floats(np.round((engine.overhead_gib + extra) * GIB))


def verdict(share: ArrayLike) -> NDArray[np.str_]:
    """safe (≤ 90% of the budget), tight (≤ 100%) or OOM, from used / budget."""
    used = floats(share)
    return np.where(used > 1.0, "OOM", np.where(used > SAFE_UTILIZATION, "tight", "safe"))


def filled(used: ArrayLike, pool: ArrayLike) -> FloatArray:
    """The share of a pool that `used` bytes fill; infinite where they fill a pool of none."""
    held, size = floats(used), floats(pool)
    share = held / np.maximum(size, 1e-9)
    return floats(np.where(size > 0, share, np.where(held > 0, np.inf, 0.0)))


def fits(share: ArrayLike) -> BoolArray:
    """Within the budget: what the verdict calls safe or tight."""
    return floats(share) <= 1.0
