"""How long `infersize capacity` takes: the README's call (an SLA and a target rate, 2,000
simulated requests per run, five replications, --draft-k auto), end to end as a user runs it,
pinned to one core; the same call at K 2; the same with --tp auto; and one simulation of 2,000
requests (events per second of the event loop).

Usage: python benchmarks/capacity_bench.py [--repeat 5] [--json FILE]
Every figure is the median of the repeats; the machine's load is printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

EXAMPLE = [
    "capacity",
    "--target",
    "llama-3.1-70b",
    "--target-quant",
    "fp8",
    "--draft",
    "llama-3.2-1b",
    "--gpu",
    "h100",
    "--tp",
    "2",
    "--engine",
    "vllm",
    "--input-tokens",
    "1024",
    "--output-tokens",
    "256",
    "--request-rate",
    "2",
    "--sla",
    "ttft:p99<=2000ms;tpot:p99<=50ms",
    "--target-request-rate",
    "20",
    "--requests",
    "2000",
    "--json",
]
TP_AUTO = [*EXAMPLE[: EXAMPLE.index("--tp")], "--tp", "auto", *EXAMPLE[EXAMPLE.index("--tp") + 2 :]]


def one_core() -> list[str]:
    """Pin to one core where taskset exists (the call is single-threaded; pinning keeps other
    load from lending it a second core's caches)."""
    return ["taskset", "-c", "0"] if shutil.which("taskset") else []


def timed_cli(args: list[str]) -> tuple[float, dict[str, object]]:
    exe = shutil.which("infersize")
    if exe is None:
        sys.exit("infersize is not on PATH: install the project first")
    start = time.perf_counter()
    done = subprocess.run([*one_core(), exe, *args], capture_output=True, text=True, check=True)
    return time.perf_counter() - start, json.loads(done.stdout)


def simulation_rate() -> tuple[float, int]:
    """Seconds for one simulation of 2,000 requests of the example at 2 requests/s, and its
    events (steps run one at a time plus runs of decode-only steps)."""
    from infersize.catalog.store import load_catalog
    from infersize.core.engines import EngineSettings
    from infersize.core.serving.simulate import simulate
    from infersize.service.capacity.arm import load, make_arm
    from infersize.service.capacity.request import CapacityRequest, Traffic, prepare_capacity
    from infersize.service.request import SpecRequest
    from infersize.service.resolve import DeploymentRequest

    traffic = Traffic(input_tokens=(1024,), output_tokens=(256,), request_rate=2.0)
    deployment = DeploymentRequest(
        target="llama-3.1-70b", target_quant="fp8", draft="llama-3.2-1b", gpu="h100", tp=2
    )
    request = CapacityRequest(
        spec=SpecRequest(deployment=deployment, engine=EngineSettings(engine="vllm"), draft_k=2),
        traffic=traffic,
    )
    arm = make_arm(prepare_capacity(request, load_catalog()), traffic, 2)
    requests = load(arm, traffic)
    start = time.perf_counter()
    run = simulate(arm.replica, requests)
    return time.perf_counter() - start, int(run.itl_steps.size)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path)
    options = parser.parse_args()
    load_before = os.getloadavg()[0]
    fixed, auto, tp_auto, sims = [], [], [], []
    answer: dict[str, object] = {}
    for _ in range(options.repeat):
        seconds, answer = timed_cli([*EXAMPLE, "--draft-k", "auto"])
        auto.append(seconds)
        fixed.append(timed_cli([*EXAMPLE, "--draft-k", "2"])[0])
        tp_auto.append(timed_cli([*TP_AUTO, "--draft-k", "auto"])[0])
        sims.append(simulation_rate())
    figures = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.python_version()}",
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "capacity_call_s": round(statistics.median(fixed), 3),
        "capacity_call_auto_k_s": round(statistics.median(auto), 3),
        "capacity_call_tp_auto_s": round(statistics.median(tp_auto), 3),
        "simulation_s": round(statistics.median(s for s, _ in sims), 4),
        "simulation_runs_of_steps": sims[0][1],
        "gpus": answer.get("gpus"),
        "gpus_interval": answer.get("gpus_interval"),
        "max_request_rate": answer.get("max_request_rate"),
    }
    print("| what | median |")
    print("| --- | --- |")
    print(
        f"| `infersize capacity` (README example: --draft-k auto, 5 replications), one core | "
        f"{figures['capacity_call_auto_k_s']} s |"
    )
    print(f"| the same at K 2 | {figures['capacity_call_s']} s |")
    print(f"| the same with `--tp auto` | {figures['capacity_call_tp_auto_s']} s |")
    print(
        f"| one simulation of 2,000 requests ({figures['simulation_runs_of_steps']:,} runs of "
        f"steps) | {figures['simulation_s']} s |"
    )
    print(
        f"machine: {figures['machine']}; load {figures['load_before']} -> {figures['load_after']}"
    )
    if options.json:
        options.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
