"""Latency targets: "ttft:p99<=2000ms;tpot:p99<=50ms", the convention of llm-d's planner and
BentoML's llm-optimizer (a metric, a statistic over requests, a bound with its unit).

Metrics as `vllm bench serve` reports them (vllm/benchmarks/serve.py, `calculate_metrics`):
ttft (arrival to first token), tpot ((e2e − ttft) / (output tokens − 1), per request), itl (the
gaps between streamed chunks, over all requests: with speculation a chunk carries every token a
step accepted, so ITL and TPOT differ) and e2e (arrival to last token). Statistics: mean, p50,
p90, p95, p99 (numpy's linear interpolation).
"""

from __future__ import annotations

import math
import re

from infersize.errors import ValueRangeError
from infersize.record import record

METRICS = ("ttft", "tpot", "itl", "e2e")
STATISTICS = ("mean", "p50", "p90", "p95", "p99")
UNITS = {"ms": 1e-3, "s": 1.0}
MIN_SLA_REQUESTS = 10  # fewer requests load a replica too little for a capacity to mean anything
MAX_SLA_CHARS = 1000  # four terms take under 100; a longer text is not an SLA
# No two parts of a term can match the same characters (a number's exponent needs a digit after
# its 'e', so a unit's letters are never a number's): matching is linear in the term's length
_NUMBER = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:e[+-]?[0-9]+)?"
_TERM = re.compile(rf"([a-z0-9]+):([a-z0-9.]+)\s*(<=|<)\s*({_NUMBER})\s*([a-z]*)")


@record(kw_only=False)
class SlaTerm:
    metric: str
    statistic: str
    limit_s: float

    def __str__(self) -> str:
        if self.limit_s < 1.0:
            return f"{self.metric}:{self.statistic}<={self.limit_s * 1e3:g}ms"
        return f"{self.metric}:{self.statistic}<={self.limit_s:g}s"


@record(kw_only=False)
class Sla:
    terms: tuple[SlaTerm, ...]

    def __str__(self) -> str:
        return ";".join(str(t) for t in self.terms)

    @property
    def reads_itl(self) -> bool:
        """Whether a term limits the inter-token latency (the one statistic that costs more to
        compute than the run it is computed from)."""
        return any(term.metric == "itl" for term in self.terms)


def _problem(text: str) -> str:
    return (
        f"term '{text}' is not a target: write metric:statistic<=limit with a unit, e.g. "
        "ttft:p99<=2000ms;tpot:p99<=50ms"
    )


def parse_sla(text: str) -> Sla:
    """Terms separated by ';' (or ','); each metric once."""
    if len(text) > MAX_SLA_CHARS:
        raise ValueRangeError(
            "sla", f"is {len(text):,} characters long; an SLA is at most {MAX_SLA_CHARS:,}"
        )
    terms: list[SlaTerm] = []
    for part in re.split(r"[;,]", text.strip().lower()):
        part = part.strip()
        if not part:
            raise ValueRangeError("sla", f"has an empty term in '{text}'")
        match = _TERM.fullmatch(part)
        if match is None:
            raise ValueRangeError("sla", _problem(part))
        metric, statistic, _, number, unit = match.groups()
        if metric not in METRICS:
            raise ValueRangeError(
                "sla", f"has an unknown metric '{metric}': choose {', '.join(METRICS)}"
            )
        if statistic not in STATISTICS:
            raise ValueRangeError(
                "sla", f"has an unknown statistic '{statistic}': choose {', '.join(STATISTICS)}"
            )
        if unit not in UNITS:
            raise ValueRangeError("sla", f"term '{part}' needs a unit: ms or s")
        try:
            limit = float(number) * UNITS[unit]
        except ValueError:
            raise ValueRangeError("sla", _problem(part)) from None
        if not (math.isfinite(limit) and limit > 0):
            raise ValueRangeError("sla", f"term '{part}' needs a positive limit")
        if any(t.metric == metric for t in terms):
            raise ValueRangeError("sla", f"gives {metric} twice")
        terms.append(SlaTerm(metric, statistic, limit))
    return Sla(tuple(terms))


def fewest_requests(statistic: str) -> int:
    """The fewest requests whose `statistic` is one: a percentile pq needs 100 / (100 − q) of
    them (of fewer, numpy's interpolated p99 is nearly their maximum), and any capacity search
    MIN_SLA_REQUESTS."""
    if statistic == "mean":
        return MIN_SLA_REQUESTS
    share_above = 100 - int(statistic[1:])
    return max(MIN_SLA_REQUESTS, -(-100 // share_above))


def check_requests(sla: Sla, requests: int) -> None:
    """Refuse a run of too few requests for a statistic the SLA asks of them."""
    for term in sla.terms:
        fewest = fewest_requests(term.statistic)
        if requests < fewest:
            raise ValueRangeError(
                "requests",
                f"{requests:,} is too few for the SLA term '{term}': its {term.statistic} needs "
                f"at least {fewest:,} requests",
            )
