"""The load and latency-target options of `infersize capacity` (capacity sweeps read the same
names as YAML keys)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from infersize.core.engines import ENGINES
from infersize.defaults import DEFAULTS

InputTokens = Annotated[
    int | None, typer.Option("--input-tokens", help="Prompt tokens of every request.")
]
OutputTokens = Annotated[
    int | None, typer.Option("--output-tokens", help="Answer tokens of every request.")
]
LengthsFile = Annotated[
    Path | None,
    typer.Option(
        "--lengths",
        help="A trace to replay instead: CSV, JSON Lines or Parquet with columns input_tokens "
        "and output_tokens.",
    ),
]
RequestRate = Annotated[
    float | None,
    typer.Option("--request-rate", help="Open loop: requests per second arriving."),
]
Concurrency = Annotated[
    int | None,
    typer.Option(
        "--concurrency",
        help="Closed loop: N clients, each sending its next request when its last one ends "
        "(vllm bench serve --max-concurrency).",
    ),
]
Arrival = Annotated[
    str,
    typer.Option(
        "--arrival",
        help="Arrival process of --request-rate: poisson, constant or gamma:CV (burstier "
        "above CV 1).",
    ),
]
Sla = Annotated[
    str | None,
    typer.Option(
        "--sla",
        help='Latency target, e.g. "ttft:p99<=2000ms;tpot:p99<=50ms": metrics ttft, tpot, itl, '
        "e2e; statistics mean, p50, p90, p95, p99; units ms or s.",
    ),
]
TargetRequestRate = Annotated[
    float | None,
    typer.Option(
        "--target-request-rate",
        help="The fleet's load (requests/s): replicas and GPUs to serve it at the SLA.",
    ),
]
Headroom = Annotated[
    float, typer.Option("--headroom", help="Replicas for headroom × the target rate (≥ 1).")
]
Requests = Annotated[
    int,
    typer.Option(
        "--requests",
        help="Requests simulated per run (2,000 gives p99 20 requests beyond it; fewer is "
        "warned of).",
    ),
]
Replications = Annotated[
    int,
    typer.Option(
        "--replications",
        help="Capacity searches under independent draws: their mean answers, their spread "
        "gives the 95 % range (1 to 30).",
    ),
]
Seed = Annotated[int, typer.Option("--seed", help="Seed of the arrival and acceptance draws.")]
CapacityEngine = Annotated[
    str | None,
    typer.Option(
        "--engine",
        help=f"The engine whose scheduler, limits and pool serve the load (default "
        f"{DEFAULTS.capacity_engine}): " + ", ".join(ENGINES) + ".",
    ),
]
TpOrAuto = Annotated[
    str,
    typer.Option(
        "--tp",
        help="Tensor-parallel GPUs per replica, or auto: every size the target's attention heads "
        "divide, up to 8 (one node), each arm at its fewest GPUs for the target rate.",
    ),
]
KSchedule = Annotated[
    str | None,
    typer.Option(
        "--k-schedule",
        help="Serve with K chosen each step by the running batch: auto (the table 'infersize "
        "schedule' prices, or the best static K where that serves more), or a file holding "
        "one (vLLM's speculative_config JSON, TensorRT-LLM's YAML, 'schedule --json'); "
        "compared with the best static K and K = 0.",
    ),
]
