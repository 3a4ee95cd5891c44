"""What a serving run measured, as `vllm bench serve` reports it (vllm/benchmarks/serve.py,
`calculate_metrics`): per request TTFT, TPOT = (e2e − TTFT) / (output tokens − 1) (requests of one
token have none) and e2e latency; ITL over every streamed chunk of every request; statistics
mean, p50, p90, p95, p99 with numpy's linear interpolation; throughput over the run's span.

An open loop whose queue grows has no steady state: its percentiles are whatever the run's length
makes them, so it meets no SLA ("overloaded"). The queue is the requests that have arrived and
not yet been admitted; it grows when, past the first tenth of the arrivals, its length at each
arrival rises with time: the least-squares slope b of that length against the arrival's time is
the offered rate λ less the rate at which the replica takes requests in, and the run is
overloaded when b > OVERLOAD_SHORTFALL · λ and the rise over the window, b · T, exceeds twice
the square root of the queue's mean length (the spread of a Poisson count: a stable queue's own
fluctuation).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from infersize.core.arrays import FloatArray, floats
from infersize.core.serving.replica import GiveUp, Run
from infersize.core.serving.sla import Sla
from infersize.record import record

PERCENTILES = (50.0, 90.0, 95.0, 99.0)
QUANTILES = tuple(p / 100.0 for p in PERCENTILES)  # the fractions np.percentile divides them to
WARM_UP_SHARE = 0.1  # of the arrivals, left out of the queue's trend
OVERLOAD_SHORTFALL = 0.02  # served below offered by more than this share: the queue grows
MIN_TREND_ARRIVALS = 20  # fewer arrivals past the warm-up say nothing of a trend


@record
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
            mean=self.mean * factor,
            p50=self.p50 * factor,
            p90=self.p90 * factor,
            p95=self.p95 * factor,
            p99=self.p99 * factor,
        )


def linear_percentiles(ordered: FloatArray) -> tuple[float, ...]:
    """np.percentile(values, PERCENTILES) (its linear method) of `ordered`, the values sorted
    (NaN last, as np.sort puts it), by numpy's own steps: the index (n − 1)·q, its floor's
    value and the next, and their lerp from the nearer end; so the same numbers, bit for bit,
    for a fraction of the call's cost. Any NaN makes every percentile NaN, as in numpy."""
    last = ordered.size - 1
    if math.isnan(ordered[last]):
        return (math.nan,) * len(QUANTILES)
    values = []
    for quantile in QUANTILES:
        index = last * quantile
        below = math.floor(index) if index < last else -1  # at the top: the last value
        low, high = float(ordered[below]), float(ordered[below + 1 if below >= 0 else -1])
        weight = index - below
        step = high - low
        values.append(high - step * (1 - weight) if weight >= 0.5 else low + step * weight)
    return tuple(values)


def stats(values: ArrayLike) -> Stats:
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        nan = float("nan")
        return Stats(mean=nan, p50=nan, p90=nan, p95=nan, p99=nan)
    p50, p90, p95, p99 = linear_percentiles(np.sort(data))
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


@record
class Latencies:
    """A load's latency statistics, whoever estimates them (the simulator's ServingMetrics, the
    mean-field model's MeanField): what an SLA term reads."""

    ttft_s: Stats
    tpot_s: Stats
    itl_s: Stats
    e2e_s: Stats

    def value(self, metric: str, statistic: str) -> float:
        """The SLA term's number: `metric` (ttft, tpot, itl, e2e) at `statistic` (mean, p50...)."""
        stats: Stats = getattr(self, f"{metric}_s")
        return stats.get(statistic)


@record
class ServingMetrics(Latencies):
    output_tokens_per_s: float
    requests_per_s: float
    mean_running_sequences: float  # time average of the sequences the engine holds
    preemptions: int
    queue_delay_s: Stats  # arrival to admission: waiting for a step, a slot or the pool
    overload: str = ""  # why the open loop's queue grows ("": it does not)


def itl_values(run: Run) -> tuple[FloatArray, FloatArray]:
    """Every step's seconds and the chunks streamed in it (one per decoding sequence)."""
    steps = run.itl_steps
    offsets = np.arange(int(steps.sum())) - np.repeat(np.cumsum(steps) - steps, steps)
    seconds = np.repeat(run.itl_first, steps) + np.repeat(run.itl_slope, steps) * offsets
    return seconds, np.repeat(run.itl_weight, steps)


def queue_trend(run: Run) -> tuple[float, float, bool] | None:
    """(offered, taken in) requests per second past the warm-up, and whether the queue grows;
    None for a closed loop or a run too short to have a trend."""
    arrival = np.sort(run.arrival[np.isfinite(run.arrival)])
    start = int(arrival.size * WARM_UP_SHARE)
    if not run.open_loop or arrival.size - start < MIN_TREND_ARRIVALS:
        return None
    admitted = np.sort(np.where(np.isfinite(run.admitted), run.admitted, np.inf))
    # the queue just after each arrival: arrived so far less admitted so far
    queue = np.arange(1, arrival.size + 1) - np.searchsorted(admitted, arrival, side="right")
    times, counts = arrival[start:], queue[start:].astype(np.float64)
    window = float(times[-1] - times[0])
    if window <= 0.0:
        return None
    centred = times - times.mean()
    slope = float(np.dot(centred, counts - counts.mean()) / np.dot(centred, centred))
    offered = (times.size - 1) / window
    grows = slope > OVERLOAD_SHORTFALL * offered and slope * window > 2.0 * math.sqrt(
        float(counts.mean()) + 1.0
    )
    return offered, offered - slope, grows


def overload_reason(run: Run) -> str:
    """'overloaded: the queue grows (...)' when it does, else ''."""
    trend = queue_trend(run)
    if trend is None or not trend[2]:
        return ""
    offered, taken, _ = trend
    return (
        f"overloaded: the queue grows (it takes in {taken:.3g} of the {offered:.3g} requests/s "
        "offered)"
    )


def latency_samples(run: Run, metric: str) -> FloatArray:
    """Per request, `metric`'s value: ttft, e2e, or tpot (requests of more than one token)."""
    ttft = run.first_token - run.arrival
    if metric == "ttft":
        return ttft
    e2e = run.finish - run.arrival
    if metric == "e2e":
        return e2e
    many = run.output_tokens > 1
    return floats((e2e - ttft)[many] / (run.output_tokens[many] - 1))


def metric_stats(run: Run, metric: str) -> Stats:
    """The statistics of one metric over the run: ttft, tpot, e2e or itl."""
    if metric == "itl":
        return weighted_stats(*itl_values(run))
    return stats(latency_samples(run, metric))


def metrics(run: Run, itl: bool = True) -> ServingMetrics:
    """The run's statistics; `itl` False leaves the inter-token latencies out (NaN), which a
    capacity probe whose SLA reads none skips: every step's gaps, sorted, cost more than the
    run."""
    return ServingMetrics(
        ttft_s=metric_stats(run, "ttft"),
        tpot_s=metric_stats(run, "tpot"),
        itl_s=metric_stats(run, "itl") if itl else stats([]),
        e2e_s=metric_stats(run, "e2e"),
        output_tokens_per_s=float(run.output_tokens.sum() / run.span),
        requests_per_s=float(run.output_tokens.size / run.span),
        mean_running_sequences=run.running_seconds / run.span,
        preemptions=run.preemptions,
        queue_delay_s=stats(run.admitted - run.arrival),
        overload=overload_reason(run),
    )


def sla_breaches(measured: ServingMetrics, sla: Sla) -> list[str]:
    """The SLA's terms the run breaks, each as 'ttft:p99 2,310 ms > 2,000 ms'; an overloaded
    run breaks the SLA whatever its percentiles say."""
    return _breaches(sla, measured.overload, measured.value)


def run_breaches(run: Run, sla: Sla) -> list[str]:
    """sla_breaches(metrics(run), sla), computing only the statistics the SLA's terms read
    (a capacity probe throws the rest away)."""
    read = {term.metric: metric_stats(run, term.metric) for term in sla.terms}
    return _breaches(
        sla, overload_reason(run), lambda metric, statistic: read[metric].get(statistic)
    )


def _breaches(sla: Sla, overload: str, value_of: Callable[[str, str], float]) -> list[str]:
    broken = [overload] if overload else []
    for term in sla.terms:
        value = value_of(term.metric, term.statistic)
        if not value <= term.limit_s:
            name = f"{term.metric}:{term.statistic}"
            broken.append(f"{name} {value * 1e3:,.1f} ms > {term.limit_s * 1e3:,.1f} ms")
    return broken


FLOOR_SHARE = 0.8  # one request alone at this share of an SLA term: the deployment's floor
NEAR_FLOOR_SHARE = 0.7  # and near it: capacity already swings with small changes


@record
class LatencyFloor:
    """The SLA term one request alone comes closest to, and how close (its value alone over
    the term's limit): at FLOOR_SHARE or more, any load at all breaks it, and capacity falls
    off a cliff on small changes."""

    term: str
    share: float

    @property
    def at_floor(self) -> bool:
        return self.share >= FLOOR_SHARE

    @property
    def near_floor(self) -> bool:
        return self.share >= NEAR_FLOOR_SHARE


def latency_floor(alone: ServingMetrics, sla: Sla) -> LatencyFloor:
    """`sla`'s term that a run of one request at a time comes closest to breaking."""
    shares = {
        str(term): alone.value(term.metric, term.statistic) / term.limit_s for term in sla.terms
    }
    term = max(shares, key=lambda name: (shares[name], name))
    share = shares[term]
    return LatencyFloor(term=term, share=share if math.isfinite(share) else 0.0)


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
