"""The request rate per replica above which speculation stops paying: where its mean e2e
latency meets plain decoding's, by the mean-field model (core/serving/meanfield.py) at both
arms: the first rate of a ladder, up to where the first arm saturates, at which it no longer
pays, bisected against the rate below. Below it the drafts shorten the answer; above it,
verification's share of every step (and the pool the drafter takes) costs more than the
accepted tokens save. A capacity sweep writes it per row (`break_even_request_rate`), at the
row's K, or where speculation does not pay at the row's load, at the K that answers a lone
request fastest."""

from __future__ import annotations

import numpy as np

from infersize.core.serving.meanfield import mean_field, sustained_rate
from infersize.service.capacity.arm import Arm, ReplicaCache, make_arm
from infersize.service.capacity.request import CapacityRequest, NoKvRoomError
from infersize.service.request import Prepared

LIGHT = 1e-3  # the share of the saturation rate a light load is
LADDER = 24  # rates from a light load to saturation, log-spaced: the first that stops paying
BISECTIONS = 30  # then to 2^-30 of its step: far inside the model's own error


def _e2e(arm: Arm, rate: float) -> float:
    return mean_field(arm.replica, arm.lengths, rate).e2e_s.mean


def _arms(
    prepared: Prepared, request: CapacityRequest, draft_k: int, cache: ReplicaCache
) -> tuple[Arm, Arm] | None:
    """Plain decoding's arm and speculation's at `draft_k` (0: the K fastest alone)."""
    traffic = request.traffic
    plain = make_arm(prepared, traffic, 0, cache)
    if draft_k > 0:
        return plain, make_arm(prepared, traffic, draft_k, cache)
    arms = []
    for k in range(1, prepared.request.max_k + 1):
        try:
            arm = make_arm(prepared, traffic, k, cache)
        except NoKvRoomError:
            continue
        ceiling = sustained_rate(arm.replica, arm.lengths)
        if ceiling > 0:
            arms.append((_e2e(arm, ceiling * LIGHT), k, arm))
    return None if not arms else (plain, min(arms, key=lambda a: (a[0], a[1]))[2])


def break_even_rate(
    prepared: Prepared, request: CapacityRequest, draft_k: int, cache: ReplicaCache
) -> float | None:
    """The rate per replica where speculation's mean e2e latency meets plain decoding's: 0
    where it is slower even under a light load, None where it is faster at every rate both
    sustain (or there is no drafter, or no K fits)."""
    if prepared.deployment.draft is None:
        return None
    arms = _arms(prepared, request, draft_k, cache)
    if arms is None:
        return None
    plain, spec = arms
    ceiling = min(sustained_rate(a.replica, a.lengths) for a in arms)
    if ceiling <= 0:
        return None

    def pays(rate: float) -> bool:
        return _e2e(spec, rate) < _e2e(plain, rate)

    ladder = ceiling * np.geomspace(LIGHT, 1.0 - LIGHT, LADDER)
    if not pays(float(ladder[0])):
        return 0.0
    stops = next((i for i, rate in enumerate(ladder) if not pays(float(rate))), None)
    if stops is None:
        return None
    low, high = float(ladder[stops - 1]), float(ladder[stops])
    for _ in range(BISECTIONS):
        middle = (low + high) / 2.0
        low, high = (middle, high) if pays(middle) else (low, middle)
    return low
