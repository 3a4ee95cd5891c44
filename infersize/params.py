"""Parameter counts by component, computed from a model's config fields.

Decoder-only transformer with grouped-query attention and a gated MLP (Llama, Qwen, Mistral,
Gemma, Phi-3: Phi-3's fused qkv_proj and gate_up_proj hold the same weights). Per layer:
  attention  q: h·(n_h·d), k and v: h·(n_kv·d) each, o: (n_h·d)·h   (h hidden, d head_dim)
  MLP        gate, up: h·i each, down: i·h; MoE: that per expert, plus a router h·E
  norms      norms_per_layer·h, plus 2·d for Qwen3's q/k norms
plus the token embedding V·h, the final norm h and an lm_head V·h unless tied.
Counts equal the published totals exactly (tests/test_params.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from infersize.catalog import ModelSpec


@dataclass(frozen=True)
class ParamCounts:
    """Parameters by what they are stored as; all counts are exact integers."""

    embedding: int
    lm_head: int  # 0 when tied to the embedding
    attention: int  # q, k, v, o weight matrices, all layers
    mlp: int  # gate/up/down matrices, all layers and all experts
    mlp_active: int  # the MLP matrices one token passes through (MoE: top-k + shared experts)
    mlp_routed: int  # the routed experts' matrices (0 for a dense model)
    small: int  # norms, biases, routers: kept at 16/32 bit by every format

    @property
    def linear(self) -> int:
        return self.attention + self.mlp

    @property
    def total(self) -> int:
        return self.embedding + self.lm_head + self.linear + self.small

    @property
    def active(self) -> int:
        """Parameters used per token (Mixtral 8x7B: 12.9B of 46.7B)."""
        return self.total - self.mlp + self.mlp_active


def param_counts(model: ModelSpec) -> ParamCounts:
    h, layers, d = model.hidden_size, model.num_hidden_layers, model.head_dim_resolved
    q_dim, kv_dim = model.num_attention_heads * d, model.num_key_value_heads * d
    attention = h * q_dim + 2 * h * kv_dim + q_dim * h
    biases = (q_dim + 2 * kv_dim if model.qkv_bias else 0) + (h if model.o_proj_bias else 0)

    expert_i = model.moe_intermediate_size or model.intermediate_size
    per_expert = 3 * h * expert_i  # gate, up, down
    experts = model.num_experts or 1
    routed_active = model.num_experts_per_tok or 1
    mlp = per_expert * experts + model.num_shared_experts * per_expert
    mlp_active = per_expert * routed_active + model.num_shared_experts * per_expert
    router = h * model.num_experts if model.is_moe else 0
    if model.mlp_bias:
        biases += (2 * expert_i + h) * (experts + model.num_shared_experts)

    norms = model.norms_per_layer * h + (2 * d if model.qk_norm else 0)
    vocab_matrix = model.vocab_size * h
    return ParamCounts(
        embedding=vocab_matrix,
        lm_head=0 if model.tie_word_embeddings else vocab_matrix,
        attention=layers * attention,
        mlp=layers * mlp,
        mlp_active=layers * mlp_active,
        mlp_routed=layers * per_expert * experts if model.is_moe else 0,
        small=layers * (norms + biases + router) + h,  # + final norm
    )
