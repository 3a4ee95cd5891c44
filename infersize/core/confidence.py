"""How far a decode speed can be trusted: one rule for `spec` and the sweep's `confidence`.

The roofline prices a mixture-of-experts step by the experts its tokens select: at batch B with
k experts per token, at most B·k of a layer's E experts are read. While B·k < E the step reads
a few experts, and what bounds it then (expert dispatch across TP/EP ranks, the router, kernel
launches, small grouped GEMMs) is priced only as a fixed cost per MoE layer, fitted to SGLang's
public runs (docs/calibration.md), an architecture's own where its runs are fit rows and pooled
otherwise: SGLang 0.5.8's one-client steps on 8×B200 take about the priced time for
gpt-oss-120b and Qwen3-235B and a quarter more for GLM-4.6 (each its own cost, fitted to other
runs), while dense models of the same tables sit within a few per cent. Once B·k ≥ E every
expert is read each step and the step is the weights' read, as for a dense model.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from infersize.core.arrays import floats

HIGH, LOW = "high", "low"


def moe_decode_unvalidated(
    num_experts: ArrayLike, experts_per_token: ArrayLike, batch: ArrayLike
) -> np.ndarray:
    """True where a MoE target (num_experts > 0; 0 for a dense model) decodes a batch whose
    tokens select fewer experts than a layer holds: B·k < E."""
    experts = floats(num_experts)
    return np.asarray((experts > 0) & (floats(batch) * floats(experts_per_token) < experts))


def decode_confidence(
    num_experts: ArrayLike, experts_per_token: ArrayLike, batch: ArrayLike
) -> np.ndarray:
    """'low' where moe_decode_unvalidated, else 'high' (strings, broadcast)."""
    low = moe_decode_unvalidated(num_experts, experts_per_token, batch)
    return np.where(low, LOW, HIGH)


def low_confidence_reason(num_experts: int, experts_per_token: int, batch: int) -> str:
    """The caveat `spec` prints for a low-confidence decode speed."""
    touched = min(batch * experts_per_token, num_experts)
    return (
        f"confidence low: a MoE decode step at batch {batch} selects at most {touched} of "
        f"{num_experts} experts a layer, where what bounds it (expert dispatch, router, kernel "
        "launches) is priced only as a fixed cost per MoE layer fitted to SGLang's public runs "
        "(an architecture's own under SGLang where its runs set one, else one pooled cost, "
        "which vLLM and TensorRT-LLM take for all); SGLang's one-client steps on 8 x B200 take "
        "from about the time its preset says (gpt-oss-120b, Qwen3-235B) to a quarter more "
        "(GLM-4.6), so treat the speeds as estimates either way"
    )
