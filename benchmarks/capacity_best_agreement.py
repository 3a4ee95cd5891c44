"""Whether `infersize best --request-rate` answers alike from two runs of one capacity sweep: the
sweep as it runs (the screen, the simulator where it counts) and the same sweep with
`capacity: {simulate_all: true}` (the simulator answers every row). For every workload, SLA,
target and target rate of the sweep (the default α scenario), per GPU type, it compares the
plain and the speculative choice: the deployment, its drafter and K, its replicas, GPUs and
$/hour. The capacity of a speculative choice the screen answered is the screen's, not the
simulator's, so capacities are compared apart.

Usage: python benchmarks/capacity_best_agreement.py SWEPT_DIR SIMULATED_DIR
Exit code 0 when every choice agrees, 1 with the ones that differ listed.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infersize.errors import InfersizeError
from infersize.service.capacity.answer import ARMS
from infersize.sweep.best import read_table
from infersize.sweep.capacity.best import FleetAsk, fewest_gpus
from infersize.sweep.capacity.columns import CAPACITY_COLUMNS

# what a choice is besides its capacity (and the source of that capacity)
CHOICE = (
    "tp",
    "target",
    "target_quant",
    "kv_dtype",
    "method",
    "draft",
    "draft_quant",
    "draft_k",
    "acceptance_rate",
    "replicas",
    "gpus",
    "usd_per_hour",
)

Key = tuple[str, str, str, float, str, str]  # workload, SLA, target, rate, GPU, arm


def answers(out_dir: Path) -> dict[Key, dict[str, Any] | None]:
    """Every choice `best --request-rate` makes from the sweep's capacity table (None: no
    deployment of that GPU type meets the SLA with that arm)."""
    frame = read_table(out_dir, "capacity", CAPACITY_COLUMNS)
    found: dict[Key, dict[str, Any] | None] = {}
    for workload in sorted(frame["workload"].unique().to_list()):
        of_workload = frame.filter(frame["workload"] == workload)
        rates = sorted(of_workload["target_request_rate"].unique().to_list())
        for sla in sorted(of_workload["sla"].unique().to_list()):
            for target in sorted(of_workload["target"].unique().to_list()):
                for rate in rates:
                    ask = FleetAsk(request_rate=rate, sla=sla, workload=workload, target=target)
                    try:
                        rows = fewest_gpus(out_dir, ask).rows
                    except InfersizeError:  # no deployment of the target holds the workload
                        continue
                    for row in rows:
                        for arm in ARMS:
                            key = (workload, sla, target, rate, row["gpu"], arm.key)
                            found[key] = row[arm.key]
    return found


@dataclass
class Agreement:
    choices: int = 0  # (workload, SLA, target, rate, GPU type, arm) answered by either run
    same_choice: int = 0
    compared_capacity: int = 0  # choices alike in both, with a capacity
    same_capacity: int = 0
    differ: list[str] = field(default_factory=list)


def agreement(swept: Path, simulated: Path) -> Agreement:
    mine, truth = answers(swept), answers(simulated)
    result = Agreement()
    for key in sorted(mine.keys() | truth.keys()):
        a, b = mine.get(key), truth.get(key)
        result.choices += 1
        if (a is None) != (b is None) or (
            a is not None and b is not None and any(a[n] != b[n] for n in CHOICE if n in a)
        ):
            result.differ.append(f"{key}: {a} vs {b}")
            continue
        result.same_choice += 1
        if a is not None and b is not None:
            result.compared_capacity += 1
            result.same_capacity += a["max_request_rate"] == b["max_request_rate"]
    return result


def summary(result: Agreement) -> str:
    return (
        f"best --request-rate agrees with a fully simulated run: {result.same_choice:,} of "
        f"{result.choices:,} choices (per workload, SLA, target, target rate, GPU type and arm: "
        f"deployment, drafter, K, GPUs); capacity identical in {result.same_capacity:,} of "
        f"{result.compared_capacity:,}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("swept", type=Path)
    parser.add_argument("simulated", type=Path)
    args = parser.parse_args()
    result = agreement(args.swept, args.simulated)
    print(summary(result) + "".join(f"\n  {line}" for line in result.differ))
    sys.exit(1 if result.differ else 0)


if __name__ == "__main__":
    main()
