"""How far an answer found by simulation moves with the seed: R independent replications (each
its own draws of arrivals, lengths and acceptance, so each carries the percentile's own sampling
error) give a mean and a 95 % prediction interval for one more replication,

  x̄ ± t(0.975, R − 1) · s · √(1 + 1/R)

(s the replications' sample standard deviation; the interval for a new observation from a normal
sample, e.g. NIST/SEMATECH e-Handbook of Statistical Methods, section 7.2.2). A run of the same
request under another seed lands inside it 95 times in 100, and the mean of R such runs, which is
what `infersize capacity` answers, lands inside it more often still.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from infersize.bounds import Bound

# Student's t at 0.975 by degrees of freedom (any table of t quantiles, e.g. NIST/SEMATECH
# e-Handbook, section 1.3.6.7.2; tests/test_interval.py checks them against scipy.stats.t.ppf)
T_975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
)
MAX_REPLICATIONS = len(T_975) + 1
REPLICATIONS = Bound(name="replications", kind=int, low=1, high=MAX_REPLICATIONS)


def mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def prediction_interval(values: Sequence[float]) -> tuple[float, float] | None:
    """The 95 % range of one more replication, clipped at 0 (None for fewer than two)."""
    count = len(values)
    if count < 2:
        return None
    centre = mean(values)
    spread = math.sqrt(math.fsum((v - centre) ** 2 for v in values) / (count - 1))
    half = T_975[count - 2] * spread * math.sqrt(1.0 + 1.0 / count)
    return max(centre - half, 0.0), centre + half
