"""What a serving run measured, as `vllm bench serve` reports it (vllm/benchmarks/serve.py,
`calculate_metrics`): per request TTFT, TPOT = (e2e − TTFT) / (output tokens − 1) (requests of one
token have none) and e2e latency; ITL over every streamed chunk of every request; statistics
mean, p50, p90, p95, p99 with numpy's linear interpolation; throughput over the run's span."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from infersize.core.arrays import FloatArray
from infersize.core.replica import GiveUp, Run
from infersize.core.sla import Sla

PERCENTILES = (50.0, 90.0, 95.0, 99.0)


@dataclass(frozen=True, kw_only=True)
class Stats:
    mean: float
    p50: float
    p90: float
    p95: float
    p99: float

    def get(self, statistic: str) -> float:
        value: float = getattr(self, statistic)
        return value

    def scaled(self, factor: float) -> Stats:
        return Stats(
            mean=self.mean * factor, p50=self.p50 * factor, p90=self.p90 * factor,
            p95=self.p95 * factor, p99=self.p99 * factor,
        )  # fmt: skip


def stats(values: ArrayLike) -> Stats:
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        nan = float("nan")
        return Stats(mean=nan, p50=nan, p90=nan, p95=nan, p99=nan)
    p50, p90, p95, p99 = (float(v) for v in np.percentile(data, PERCENTILES))
    return Stats(mean=float(data.mean()), p50=p50, p90=p90, p95=p95, p99=p99)


def weighted_stats(values: ArrayLike, counts: ArrayLike) -> Stats:
    """The statistics of `values` repeated `counts` times each, as numpy's linear percentile of
    the repeated array gives them, without building it."""
    data, weight = np.asarray(values, dtype=np.float64), np.asarray(counts, dtype=np.int64)
    keep = weight > 0
    data, weight = data[keep], weight[keep]
    if data.size == 0:
        return stats([])
    order = np.argsort(data, kind="stable")
    data, weight = data[order], weight[order]
    ends = np.cumsum(weight)  # the repeated array's index of each value's last copy, plus one
    total = int(ends[-1])

    def at(position: FloatArray) -> FloatArray:
        return data[np.searchsorted(ends, position, side="right")]

    positions = np.asarray(PERCENTILES) / 100.0 * (total - 1)
    low, high = np.floor(positions), np.ceil(positions)
    values_at = at(low) + (at(high) - at(low)) * (positions - low)
    p50, p90, p95, p99 = (float(v) for v in values_at)
    mean = float(np.dot(data, weight) / total)
    return Stats(mean=mean, p50=p50, p90=p90, p95=p95, p99=p99)


@dataclass(frozen=True, kw_only=True)
class ServingMetrics:
    ttft_s: Stats
    tpot_s: Stats
    itl_s: Stats
    e2e_s: Stats
    output_tokens_per_s: float
    requests_per_s: float
    mean_running_sequences: float  # time average of the sequences the engine holds
    preemptions: int
    queue_delay_s: Stats  # arrival to admission: waiting for a step, a slot or the pool

    def value(self, metric: str, statistic: str) -> float:
        return {"ttft": self.ttft_s, "tpot": self.tpot_s, "itl": self.itl_s, "e2e": self.e2e_s}[
            metric
        ].get(statistic)


def itl_values(run: Run) -> tuple[FloatArray, FloatArray]:
    """Every step's seconds and the chunks streamed in it (one per decoding sequence)."""
    steps = run.itl_steps
    offsets = np.arange(int(steps.sum())) - np.repeat(np.cumsum(steps) - steps, steps)
    seconds = np.repeat(run.itl_first, steps) + np.repeat(run.itl_slope, steps) * offsets
    return seconds, np.repeat(run.itl_weight, steps)


def metrics(run: Run) -> ServingMetrics:
    ttft = run.first_token - run.arrival
    e2e = run.finish - run.arrival
    many = run.output_tokens > 1
    tpot = (e2e - ttft)[many] / (run.output_tokens[many] - 1)
    itl, chunks = itl_values(run)
    return ServingMetrics(
        ttft_s=stats(ttft),
        tpot_s=stats(tpot),
        itl_s=weighted_stats(itl, chunks),
        e2e_s=stats(e2e),
        output_tokens_per_s=float(run.output_tokens.sum() / run.span),
        requests_per_s=float(run.output_tokens.size / run.span),
        mean_running_sequences=run.running_seconds / run.span,
        preemptions=run.preemptions,
        queue_delay_s=stats(run.admitted - run.arrival),
    )


def sla_breaches(measured: ServingMetrics, sla: Sla) -> list[str]:
    """The SLA's terms the run breaks, each as 'ttft:p99 2,310 ms > 2,000 ms'."""
    broken = []
    for term in sla.terms:
        value = measured.value(term.metric, term.statistic)
        if not value <= term.limit_s:
            name = f"{term.metric}:{term.statistic}"
            broken.append(f"{name} {value * 1e3:,.1f} ms > {term.limit_s * 1e3:,.1f} ms")
    return broken


def breaches_allowed(requests: int, statistic: str) -> int | None:
    """How many of `requests` values may exceed a bound before `statistic` (a percentile, as
    numpy's linear interpolation computes it) exceeds it whatever the others are: once the
    value at the interpolation's lower index is over the bound, so is the percentile. None for
    the mean (any one value can move it)."""
    if statistic == "mean" or requests == 0:
        return None
    position = float(statistic[1:]) / 100.0 * (requests - 1)
    return requests - int(np.floor(position)) - 1


def give_up_rule(sla: Sla, requests: int, answers: int) -> GiveUp | None:
    """What a run may stop at, for `sla` over `requests` requests of which `answers` have a
    TPOT (more than one output token). ITL and means are only known at the end."""
    bounds: dict[str, float | int] = {}
    for term in sla.terms:
        counted = answers if term.metric == "tpot" else requests
        allowed = breaches_allowed(counted, term.statistic)
        if term.metric in ("ttft", "tpot", "e2e") and allowed is not None:
            bounds[f"{term.metric}_s"] = term.limit_s
            bounds[f"{term.metric}_allowed"] = allowed
    return GiveUp(**bounds) if bounds else None  # type: ignore[arg-type]
