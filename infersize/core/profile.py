"""Position-wise acceptance, in vLLM's convention, vectorised over numpy arrays.

vLLM V1 logs "Per-position acceptance rate: r_1, r_2, …" (vllm/v1/spec_decode/metrics.py): r_i is
the share of drafts whose i-th token was accepted, so r_i is non-increasing (token i is accepted
only after tokens 1 … i−1 were). Then

  E(K)  = 1 + Σ_{i≤K} r_i      tokens per verification step ("Mean acceptance length")
  c_i   = r_i / r_{i−1}        the conditional acceptance at position i (r_0 = 1)

and Leviathan's i.i.d. α is the profile r_i = α^i, for which E(K) is his (1 − α^(K+1)) / (1 − α).

A profile measured at K = P says nothing about positions past P. Past its end infersize keeps the
last measured conditional acceptance: r_{P+j} = r_P · c_P^j (for a one-position profile c = r_1,
the i.i.d. case). Heads decay with position (EAGLE, MTP), so this is the profile's own trend, not
a constant α fitted to all of it; the panel says when an answer rests on extrapolated positions.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from infersize.core.arrays import FloatArray, floats


def profile_problem(rates: Sequence[float]) -> str | None:
    """Why `rates` is not a per-position acceptance profile (None: it is one)."""
    if not rates:
        return "needs at least one rate"
    for i, r in enumerate(rates, start=1):
        if not np.isfinite(r) or not 0.0 <= r <= 1.0:
            return f"rate {i} must be in [0, 1], got {r:g}"
        if i > 1 and r > rates[i - 2] + 1e-9:
            return (
                f"rates must not increase with position (r_{i} = {r:g} > r_{i - 1} = "
                f"{rates[i - 2]:g}): r_i is the share of drafts whose i-th token was accepted"
            )
    return None


def extend_profile(rates: Sequence[float], positions: int) -> FloatArray:
    """r_1 … r_positions: the measured rates, then the last conditional acceptance carried on."""
    measured = floats(list(rates)[:positions])
    if len(rates) >= positions:
        return measured
    last = float(rates[-1])
    before = float(rates[-2]) if len(rates) > 1 else 1.0
    conditional = last / before if before > 0.0 else 0.0
    more = last * conditional ** np.arange(1, positions - len(rates) + 1, dtype=np.float64)
    return floats(np.concatenate([measured, more]))


def iid_profile(alpha: ArrayLike, positions: int) -> FloatArray:
    """Leviathan's i.i.d. case as a profile: r_i = α^i, i = 1 … positions (a new last axis)."""
    i = np.arange(1, positions + 1, dtype=np.float64)
    return floats(floats(alpha)[..., None] ** i)


def expected_tokens_profile(rates: ArrayLike, ks: ArrayLike) -> FloatArray:
    """E(K) = 1 + Σ_{i≤K} r_i for each K of `ks` (1-D, each ≥ 1 and ≤ the profile's length);
    `rates` holds r_1 … r_P on its last axis, the result holds E on a last axis over `ks`."""
    r = floats(rates)
    cumulative = np.cumsum(r, axis=-1)
    index = np.asarray(ks, dtype=np.int64) - 1
    return floats(1.0 + cumulative[..., index])


def conditional_rates(rates: ArrayLike) -> FloatArray:
    """c_i = r_i / r_{i−1} (r_0 = 1); 0 after a position no draft got past."""
    r = floats(rates)
    before = np.concatenate([np.ones_like(r[..., :1]), r[..., :-1]], axis=-1)
    safe = np.where(before > 0.0, before, 1.0)
    return floats(np.where(before > 0.0, r / safe, 0.0))


def limit_positions(rates: ArrayLike, positions: ArrayLike) -> FloatArray:
    """The profile with every position past `positions` (broadcast against the profile's
    leading axes; inf: none) set to 0: acceptance measured at K = m only, priced without
    extrapolating it. E(K) then stays at E(m) past m while each draft pass still costs, so a
    K search never goes past m. This is how a head's figure measured at one K is used when no
    per-position profile of its method is published (DeepSeek-V3's MTP acceptance is that of
    the second token with one MTP module, arXiv 2412.19437 §5.4.3; vLLM runs that one layer
    again for K > 1, https://github.com/vllm-project/vllm/pull/13626, at an acceptance nobody
    published for it)."""
    r = floats(rates)
    index = np.arange(1, r.shape[-1] + 1, dtype=np.float64)
    return floats(np.where(index <= floats(positions)[..., None], r, 0.0))
