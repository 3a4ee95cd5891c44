"""Parameter counts by component, computed from a model's config fields.

Decoder-only transformer with a gated MLP (Llama, Qwen, Mistral, Gemma, Phi-3: Phi-3's fused
qkv_proj and gate_up_proj hold the same weights). Per layer, h hidden, d head_dim:
  attention  GQA: q h·(n_h·d), k and v h·(n_kv·d) each, o (n_h·d)·h;
             MLA (DeepSeek-V2 §2.1): q h·r_q + r_q·n_h·(d_nope+d_rope) (or h·n_h·(d_nope+d_rope)),
             kv_a h·(r_kv+d_rope), kv_b r_kv·n_h·(d_nope+d_v), o n_h·d_v·h, norms r_q and r_kv
  MLP        gate, up: h·i each, down: i·h; MoE layers: that per routed expert, the shared
             experts, a router h·E (and E bias terms in DeepSeek-V3 and gpt-oss; gpt-oss also
             biases each expert's projections, 2·i + h); DeepSeek's first k layers stay dense,
             Llama-4 Maverick's MoE layers are every 2nd (the rest dense, i = intermediate_size)
  norms      norms_per_layer·h, plus 2·d for Qwen3/Gemma-3 q/k norms; gpt-oss adds one
             attention-sink logit per head
  DeepSeek-V3.2: each MLA layer also holds a lightning indexer (_indexer)
  Qwen3-Next: gated attention's q_proj doubles (query and gate); its Gated DeltaNet layers
             replace attention by the projections, conv and norm of _linear_attention
plus the token embedding V·h, the final norm h and an lm_head V·h unless tied, and the
parameters a checkpoint loads beside the decoder (Gemma-3's vision tower), kept at 16 bit.
Multi-token-prediction layers (GLM-4.5, DeepSeek-V3 §2.2) are counted apart: each is one
decoder layer with the model's (MoE) MLP, the projection of [embedding; hidden] 2h·h and three
norms (GLM-4.5's enorm, hnorm and shared_head.norm), plus, where the checkpoint stores them, its
own embedding and output head V·h each. They are in the checkpoint's total but not in the
weights vLLM serves the model with (its loaders skip them unless MTP is the draft).
Speculator heads (EAGLE) take the embedding and output head from the target and count neither.
Counts equal the published totals exactly (tests/test_params.py).
"""

from __future__ import annotations

from infersize.catalog.records import Model
from infersize.core.counts import ParamCounts
from infersize.core.heads import HEAD_KINDS, head_counts
from infersize.record import record

__all__ = ["ParamCounts", "checkpoint_params", "decoder_counts", "param_counts"]


def _attention(model: Model) -> tuple[int, int]:
    """(weight-matrix parameters, small parameters) of one layer's attention."""
    h, n = model.hidden_size, model.num_attention_heads
    if (mla := model.mla) is not None:
        qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        r_q, r_kv = mla.q_lora_rank, mla.kv_lora_rank
        q = h * r_q + r_q * n * qk if r_q else h * n * qk
        kv = h * (r_kv + mla.qk_rope_head_dim) + r_kv * n * (mla.qk_nope_head_dim + mla.v_head_dim)
        o = n * mla.v_head_dim * h
        index, index_small = _indexer(model)
        return q + kv + o + index, r_kv + (r_q or 0) + index_small
    d = model.head_dim_resolved
    q_dim, kv_dim = n * d, model.num_key_value_heads * d
    biases = (q_dim + 2 * kv_dim if model.qkv_bias else 0) + (h if model.o_proj_bias else 0)
    norms = 2 * d if model.qk_norm else 0
    sinks = n if model.attention_sinks else 0
    gate = h * q_dim if model.attention_output_gate else 0  # q_proj emits query and gate
    return h * q_dim + gate + 2 * h * kv_dim + q_dim * h, biases + norms + sinks


def _indexer(model: Model) -> tuple[int, int]:
    """(weight-matrix parameters, small parameters) of one layer's lightning indexer
    (DeepSeek-V3.2, deepseek-ai/DeepSeek-V3.2-Exp@6d8cb70dfdd6f37c83c5208105a3e2c8da117485:
    inference/model.py `Indexer`): wq_b r_q·(n_i·d_i) from the query latent, wk h·d_i,
    weights_proj h·n_i, and k_norm, a LayerNorm of d_i with its bias."""
    n_i, d_i = model.index_n_heads, model.index_head_dim
    if n_i is None or d_i is None or model.q_lora_rank is None:
        return 0, 0
    h = model.hidden_size
    return model.q_lora_rank * n_i * d_i + h * d_i + h * n_i, 2 * d_i


def _linear_attention(model: Model) -> tuple[int, int]:
    """(weight-matrix parameters, small parameters) of one Gated DeltaNet layer (Qwen3-Next,
    transformers Qwen3NextGatedDeltaNet): in_proj_qkvz h·(2·k + 2·v), in_proj_ba h·2·n_v,
    out_proj v·h (k, v: all key and value heads' widths); a depthwise conv over q, k and v
    (2·k + v channels, kernel taps, no bias), dt_bias and A_log per value head, and a gated
    RMS norm of one value head's width."""
    lin = model.linear_attention
    if lin is None:
        return 0, 0
    h = model.hidden_size
    k, v = lin.num_key_heads * lin.key_head_dim, lin.num_value_heads * lin.value_head_dim
    matrices = h * (2 * k + 2 * v) + h * 2 * lin.num_value_heads + v * h
    small = (2 * k + v) * lin.conv_kernel_dim + 2 * lin.num_value_heads + lin.value_head_dim
    return matrices, small


@record
class _MlpLayers:
    """Per-layer MLP parameters of a model's dense and MoE layers."""

    dense_layers: int
    moe_layers: int
    experts_total: int  # one MoE layer: all routed and shared experts' matrices
    experts_active: int  # one MoE layer: the top-k routed plus the shared experts' matrices
    routed: int  # one MoE layer: the routed experts' matrices
    small: int  # one MoE layer: router (and its bias), the shared expert's gate, expert biases


def _mlp_layers(model: Model) -> _MlpLayers:
    moe = model.moe
    if moe is None:
        return _MlpLayers(
            dense_layers=model.num_hidden_layers,
            moe_layers=0,
            experts_total=0,
            experts_active=0,
            routed=0,
            small=0,
        )
    h = model.hidden_size
    expert = 3 * h * moe.expert_intermediate_size  # gate, up, down
    if moe.shared_expert_intermediate_size:  # Qwen-MoE: one shared expert and its gate
        shared, shared_gate = 3 * h * moe.shared_expert_intermediate_size, h
    else:
        shared, shared_gate = moe.num_shared_experts * expert, 0
    router = h * moe.num_experts + (moe.num_experts if moe.router_bias else 0)
    if moe.expert_bias:  # gate and up (2 · i) and down (h) per routed expert
        router += moe.num_experts * (2 * moe.expert_intermediate_size + h)
    moe_layers = (model.num_hidden_layers - moe.first_k_dense_replace) // moe.layer_step
    return _MlpLayers(
        dense_layers=model.num_hidden_layers - moe_layers,
        moe_layers=moe_layers,
        experts_total=moe.num_experts * expert + shared,
        experts_active=moe.num_experts_per_tok * expert + shared,
        routed=moe.num_experts * expert,
        small=router + shared_gate,
    )


def _mtp(model: Model, layer: int) -> int:
    """The multi-token-prediction layers: `layer` parameters each (attention, norms and MLP
    of one MoE decoder layer), the [embedding; hidden] projection 2h·h and three norms, and
    their own embedding and output head where the checkpoint keeps copies."""
    h = model.hidden_size
    own = 2 * model.vocab_size * h if model.mtp_embeddings else 0
    return model.mtp_layers * (layer + 2 * h * h + 3 * h + own)


def param_counts(model: Model) -> ParamCounts:
    """Counts of any model or speculator head (heads.py counts the heads that are not a
    decoder stack: EAGLE-3, Medusa, MLP speculator, n-gram)."""
    if model.speculator in HEAD_KINDS:
        return head_counts(model)
    return decoder_counts(model)


def checkpoint_params(model: Model) -> int:
    """Parameters in the published files: what the engine keeps, plus the embedding and LM
    head copies an MTP checkpoint stores and vLLM drops at load (it shares the target's)."""
    copies = 2 * model.vocab_size * model.hidden_size if model.checkpoint_copies_embedding else 0
    return param_counts(model).total + copies


def decoder_counts(model: Model) -> ParamCounts:
    h = model.hidden_size
    attention, attention_small = _attention(model)
    mlp = _mlp_layers(model)
    dense = 3 * h * model.intermediate_size  # gate, up, down
    mlp_bias = (2 * model.intermediate_size + h) if model.mlp_bias else 0
    norms = model.norms_per_layer * h
    layers = model.num_hidden_layers
    linear, linear_small = _linear_attention(model)
    full = layers - model.linear_attention_layers  # the rest: full (or windowed) attention
    vocab_matrix = model.vocab_size * h
    own_lm_head = not (model.tie_word_embeddings or model.lm_head_from_target)
    layer_mlp = mlp.experts_total + mlp.small if mlp.moe_layers else dense + mlp_bias
    mtp_layer = attention + attention_small + norms + layer_mlp
    return ParamCounts(
        embedding=0 if model.embedding_from_target else vocab_matrix,
        lm_head=vocab_matrix if own_lm_head else 0,
        attention=full * attention + model.linear_attention_layers * linear,
        mlp=mlp.dense_layers * dense + mlp.moe_layers * mlp.experts_total,
        mlp_active=mlp.dense_layers * dense + mlp.moe_layers * mlp.experts_active,
        mlp_routed=mlp.moe_layers * mlp.routed,
        small=layers * norms
        + full * attention_small
        + model.linear_attention_layers * linear_small
        + mlp.dense_layers * mlp_bias
        + mlp.moe_layers * mlp.small
        + (h if model.final_norm else 0)
        + model.extra_params,
        mtp=_mtp(model, mtp_layer),
    )
