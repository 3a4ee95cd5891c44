"""What a target rate needs at a capacity per replica: replicas = ceil(headroom × rate /
capacity), GPUs = replicas × TP, dollars at the GPU's price, with the GPUs at the two ends of
the capacity's range."""

from __future__ import annotations

import math

from infersize.record import record


def replicas_for(rate: float, capacity_rate: float | None, headroom: float) -> int | None:
    """ceil(headroom × target / capacity); None when no rate meets the SLA."""
    if capacity_rate is None or capacity_rate <= 0:
        return None
    return max(1, math.ceil(headroom * rate / capacity_rate - 1e-12))


@record
class Fleet:
    """What a target rate needs at an arm's capacity: replicas, GPUs and dollars, with the
    GPUs at the two ends of the capacity's interval (None where no rate meets the SLA)."""

    replicas: int | None
    gpus: int | None
    gpus_interval: tuple[int | None, int | None] | None
    usd_per_hour: float | None


def fleet(
    target: float,
    max_request_rate: float | None,
    interval: tuple[float, float] | None,
    *,
    headroom: float,
    tp: int,
    price: float | None,
) -> Fleet:
    """The fleet for `target` requests/s at a capacity per replica and its 95 % range (None:
    none); the one place replicas become GPUs and dollars (to the cent), for `capacity`, the
    capacity table and `best --request-rate` alike."""

    def gpus_at(rate: float) -> int | None:
        replicas = replicas_for(target, rate, headroom)
        return None if replicas is None else replicas * tp

    replicas = replicas_for(target, max_request_rate, headroom)
    gpus = None if replicas is None else replicas * tp
    return Fleet(
        replicas=replicas,
        gpus=gpus,
        gpus_interval=None if interval is None else (gpus_at(interval[1]), gpus_at(interval[0])),
        usd_per_hour=None if gpus is None or price is None else round(gpus * price, 2),
    )
