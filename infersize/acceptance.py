"""`infersize alpha`: one acceptance metric in, all of them out (i.i.d. acceptance assumed).

Definitions (shared/reference/measurements.md): α is Leviathan's per-token acceptance rate;
E = (1 − α^(K+1)) / (1 − α) is the mean number of tokens per verification step (vLLM V1 "mean
acceptance length", Spec-Bench/EAGLE τ); vLLM V1 "acceptance rate" = (E − 1) / K; vLLM V0
"system efficiency" = E / (K + 1). llama.cpp's accept% is none of these (its drafting stops early).
"""

from __future__ import annotations

import math
from typing import Any

from infersize import speculative as sd
from infersize.errors import InfersizeError, ValueRangeError


def _check(name: str, value: float, low: float, high: float) -> None:
    if not math.isfinite(value) or not low <= value <= high:
        raise ValueRangeError(f"{name} must be in [{low:g}, {high:g}] at this K, got {value:g}")


def convert(
    k: int,
    mean_accepted_tokens: float | None = None,
    vllm_acceptance_rate: float | None = None,
    system_efficiency: float | None = None,
    acceptance_rate: float | None = None,
) -> dict[str, Any]:
    given = {
        name: value
        for name, value in (
            ("--mean-accepted-tokens", mean_accepted_tokens),
            ("--vllm-acceptance-rate", vllm_acceptance_rate),
            ("--system-efficiency", system_efficiency),
            ("--acceptance-rate", acceptance_rate),
        )
        if value is not None
    }
    if len(given) != 1:
        raise InfersizeError(
            "give exactly one of --mean-accepted-tokens, --vllm-acceptance-rate, "
            "--system-efficiency, --acceptance-rate"
        )
    if k < 1:
        raise ValueRangeError(f"--draft-k must be at least 1, got {k}")
    ((name, value),) = given.items()
    if name == "--mean-accepted-tokens":
        _check(name, value, 1.0, k + 1.0)
        alpha = float(sd.alpha_for_expected_tokens(value, k))
    elif name == "--vllm-acceptance-rate":
        _check(name, value, 0.0, 1.0)
        alpha = float(sd.alpha_from_vllm_acceptance_rate(value, k))
    elif name == "--system-efficiency":
        _check(name, value, 1.0 / (k + 1), 1.0)
        alpha = float(sd.alpha_from_system_efficiency(value, k))
    else:
        _check(name, value, 0.0, 1.0)
        alpha = value
    metrics = {key: float(v) for key, v in sd.acceptance_metrics(alpha, k).items()}
    return {"from": name.lstrip("-"), "draft_k": k, "acceptance_rate": alpha, **metrics}
