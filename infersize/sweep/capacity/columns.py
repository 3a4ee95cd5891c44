"""The capacity table's columns: names as `infersize capacity --json` gives them, the arm
(baseline: plain decoding, speculative) as a suffix where the JSON nests it."""

from __future__ import annotations

from infersize.service.capacity.answer import ARMS
from infersize.sweep.columns import BY_NAME, IDENTITY, Column, Kind


def _per_arm(name: str, kind: Kind, unit: str, description: str) -> tuple[Column, ...]:
    return tuple(
        Column(
            name=f"{name}_{arm.key}",
            kind=kind,
            unit=unit,
            description=f"{description} ({arm.label}{' at draft_k' if arm.speculates else ''})",
        )
        for arm in ARMS
    )


def _latency(metric: str, statistic: str) -> tuple[Column, ...]:
    return _per_arm(
        f"{metric}_{statistic}_ms",
        "float",
        "ms",
        f"{statistic} {metric.upper()} at the target rate's load per replica (target rate / "
        "replicas); null where no rate meets the SLA",
    )


CAPACITY_COLUMNS: tuple[Column, ...] = (
    *(
        IDENTITY[name]
        for name in (
            "gpu",
            "gpu_name",
            "tp",
            "target",
            "target_quant",
            "kv_dtype",
            "method",
            "draft",
            "draft_quant",
        )
    ),
    Column(name="workload", kind="str", unit="", description="the workload's name in the sweep"),
    Column(
        name="input_tokens",
        kind="float",
        unit="tokens",
        description="mean prompt tokens of the workload's requests",
    ),
    Column(
        name="output_tokens",
        kind="float",
        unit="tokens",
        description="mean answer tokens of the workload's requests",
    ),
    Column(name="arrival", kind="str", unit="", description="arrival process (poisson, ...)"),
    Column(
        name="workload_kind",
        kind="str",
        unit="",
        description="the workload's kind of traffic (chat, code, ...), whose published "
        "acceptance the row's α is; null: not given",
    ),
    Column(
        name="within_max_context",
        kind="bool",
        unit="",
        description="the workload's longest request (prompt plus answer) is at most "
        "target_max_context_tokens and draft_max_context_tokens: false rows are what-ifs the "
        "models cannot serve (without rope scaling) and never answer `infersize best "
        "--request-rate`",
    ),
    BY_NAME["target_max_context_tokens"],
    BY_NAME["draft_max_context_tokens"],
    Column(name="sla", kind="str", unit="", description="the SLA's name in the sweep"),
    Column(
        name="sla_terms", kind="str", unit="", description="the SLA, as capacity --sla reads it"
    ),
    IDENTITY["acceptance_scenario"],
    Column(
        name="acceptance_rate",
        kind="float",
        unit="probability",
        description="α of the scenario (the i.i.d. rate; a profile's same-length α)",
    ),
    Column(
        name="target_request_rate",
        kind="float",
        unit="requests/s",
        description="the fleet's load this row is sized for",
    ),
    IDENTITY["engine"],
    Column(
        name="price_usd_per_hour",
        kind="float",
        unit="USD per GPU-hour",
        description="the GPU's hourly price used (null: unknown)",
    ),
    Column(
        name="draft_k",
        kind="int",
        unit="tokens",
        description="the K that serves the load best (0: speculation does not pay here)",
    ),
    *_per_arm(
        "max_request_rate",
        "float",
        "requests/s",
        "the highest request rate per replica at which every SLA term holds",
    ),
    *_per_arm(
        "max_request_rate_low",
        "float",
        "requests/s",
        "the low end of max_request_rate's 95 % range (the simulator's replications under "
        "independent draws; a screened row widens plain decoding's by the screen's error)",
    ),
    *_per_arm(
        "max_request_rate_high", "float", "requests/s", "the high end of max_request_rate's range"
    ),
    Column(
        name="max_request_rate_k_schedule",
        kind="float",
        unit="requests/s",
        description="the highest request rate per replica at which every SLA term holds with K "
        "chosen each step by the running batch, from the table infersize schedule prices (as "
        "capacity --k-schedule auto serves it, one search, the engine's measured cost of a "
        "switching table included), beside max_request_rate_speculative's static K; null where "
        "the row is screened, the engine has no such table or the drafter drafts a tree",
    ),
    Column(
        name="break_even_request_rate",
        kind="float",
        unit="requests/s",
        description="the request rate per replica above which speculation stops paying: where "
        "its mean e2e latency meets plain decoding's (mean-field model), at draft_k, or where "
        "draft_k is 0 at the K fastest for a lone request; 0: slower at any load; null: faster "
        "at every rate both arms sustain",
    ),
    *_per_arm("replicas", "int", "replicas", "ceil(headroom × target rate / max_request_rate)"),
    *_per_arm("gpus", "int", "GPUs", "replicas × tp"),
    *_per_arm("gpus_low", "int", "GPUs", "gpus at max_request_rate_high (null: none)"),
    *_per_arm("gpus_high", "int", "GPUs", "gpus at max_request_rate_low (null: no count)"),
    *_per_arm("usd_per_hour", "float", "USD/hour", "gpus × the GPU's hourly price"),
    Column(
        name="speculation_saves_gpus",
        kind="int",
        unit="GPUs",
        description="gpus_baseline − gpus_speculative (negative: speculation costs GPUs)",
    ),
    *_latency("ttft", "p50"),
    *_latency("ttft", "p99"),
    *_latency("tpot", "p50"),
    *_latency("tpot", "p99"),
    Column(
        name="capacity_source",
        kind="str",
        unit="",
        description="simulator (the row is what infersize capacity --draft-k auto answers) or "
        "mean-field (plain decoding as simulated; speculation's K and capacity from the "
        "mean-field model's ratio of the two arms, its latencies mean-field)",
    ),
)
CAPACITY_BY_NAME = {c.name: c for c in CAPACITY_COLUMNS}
