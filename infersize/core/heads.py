"""Parameter counts of speculator heads whose structure is not a decoder stack, from their
config fields. EAGLE-1 heads and MTP modules are one ordinary decoder layer plus an input
projection, so params.py counts them like any model (the projection in extra_params).

  eagle3  (EAGLE-3, Li et al. arXiv 2503.01840; SafeAILab/EAGLE eagle/model/cnets.py and vLLM
          model_executor/models/llama_eagle3.py): fc 3h→h fusing three target layers' hidden
          states; one layer whose q, k, v read [embedding ‖ hidden] (2h); the gated MLP; norms
          input_layernorm, hidden_norm, post_attention_layernorm and the final norm; its own
          lm_head over the draft vocabulary V_d; d2t, V_d int64 offsets mapping draft ids to
          target ids (vLLM loads it; t2d, the reverse mask, it skips)
  medusa  (Cai et al. arXiv 2401.10774; vLLM model_executor/models/medusa.py): per head, L
          residual blocks Linear(h, h) (with bias when medusa_fc_bias) and its own lm_head V·h
  mlp_speculator (Wertheimer et al. arXiv 2404.19124; vLLM model_executor/models/
          mlp_speculator.py): per stage an embedding V·d_in, a projection (h→d_in for the
          first stage, d_in→d_in after), a LayerNorm with scale and shift (2·d_in) and a head
          d_in·V; tie_weights shares the embedding, the later projections and the norm
  ngram   prompt lookup: no weights
"""

from __future__ import annotations

from infersize.catalog.records import Model
from infersize.core.counts import ParamCounts

EAGLE3_FUSED_LAYERS = 3  # EAGLE-3 reads the target's hidden states at three depths


def _eagle3(model: Model) -> ParamCounts:
    h, i = model.hidden_size, model.intermediate_size
    n, kv, d = model.num_attention_heads, model.num_key_value_heads, model.head_dim_resolved
    v_draft = model.draft_vocab_size or model.vocab_size
    attention = 2 * h * n * d + 2 * (2 * h * kv * d) + n * d * h  # q, k, v read 2h; o
    biases = (n * d + 2 * kv * d) if model.qkv_bias else 0
    fc = EAGLE3_FUSED_LAYERS * h * h
    return ParamCounts(
        embedding=0,  # the target's
        lm_head=v_draft * h,
        attention=attention,
        mlp=3 * h * i + fc,
        mlp_active=3 * h * i + fc,
        mlp_routed=0,
        small=4 * h + biases + v_draft,  # three layer norms, the final norm, d2t
    )


def _medusa(model: Model) -> ParamCounts:
    h, v = model.hidden_size, model.vocab_size
    heads, blocks = model.speculator_heads or 1, model.num_hidden_layers
    linear = heads * blocks * h * h
    return ParamCounts(
        embedding=0,
        lm_head=heads * v * h,
        attention=0,
        mlp=linear,
        mlp_active=linear,
        mlp_routed=0,
        small=heads * blocks * h if model.mlp_bias else 0,
    )


def _mlp_speculator(model: Model) -> ParamCounts:
    h, d_in, v = model.hidden_size, model.intermediate_size, model.vocab_size
    stages = model.speculator_heads or 1
    tied = model.tie_word_embeddings
    embeddings = 1 if tied else stages
    projections = h * d_in + (1 if tied else stages - 1) * d_in * d_in
    return ParamCounts(
        embedding=embeddings * v * d_in,
        lm_head=stages * d_in * v,
        attention=0,
        mlp=projections,
        mlp_active=projections,
        mlp_routed=0,
        small=(1 if tied else stages) * 2 * d_in,
    )


NO_PARAMS = ParamCounts(
    embedding=0, lm_head=0, attention=0, mlp=0, mlp_active=0, mlp_routed=0, small=0
)


HEAD_KINDS = ("eagle3", "medusa", "mlp_speculator", "ngram")  # the kinds counted here


def head_counts(model: Model) -> ParamCounts:
    """Counts of a head by its structure (param_counts sends the HEAD_KINDS here)."""
    if model.speculator == "eagle3":
        return _eagle3(model)
    if model.speculator == "medusa":
        return _medusa(model)
    if model.speculator == "mlp_speculator":
        return _mlp_speculator(model)
    if model.speculator == "ngram":
        return NO_PARAMS
    raise ValueError(f"{model.id} is not a head counted by its structure")
