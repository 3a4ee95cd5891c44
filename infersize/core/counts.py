"""Parameter counts by what they are stored as: the record params.py and heads.py fill."""

from __future__ import annotations

from infersize.record import record


@record
class ParamCounts:
    """Parameters by what they are stored as; all counts are exact integers."""

    embedding: int
    lm_head: int  # 0 when tied to the embedding
    attention: int  # attention weight matrices, all layers
    mlp: int  # MLP matrices, all layers and all experts
    mlp_active: int  # the MLP matrices one token passes through (MoE: top-k + shared experts)
    mlp_routed: int  # the routed experts' matrices (0 for a dense model)
    small: int  # norms, biases, routers: kept at 16/32 bit by every format
    mtp: int = 0  # multi-token-prediction layers: in the checkpoint, not in the served weights

    @property
    def linear(self) -> int:
        return self.attention + self.mlp

    @property
    def total(self) -> int:
        """Everything the checkpoint stores (its published total)."""
        return self.embedding + self.lm_head + self.linear + self.small + self.mtp

    @property
    def active(self) -> int:
        """Parameters used per token (Mixtral 8x7B: 12.9B of 46.7B), MTP layers left out."""
        return self.total - self.mtp - self.mlp + self.mlp_active
