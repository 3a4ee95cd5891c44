"""The mean-field model's gap to the simulator, over a grid of deployments and loads (a share of
the rate a saturated replica sustains): its mean and p99 TTFT and TPOT against the simulated.

Usage: python benchmarks/meanfield_gap.py [--write]
--write puts the table into docs/capacity.md between its meanfield-gap markers.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from infersize.catalog.store import load_catalog
from infersize.core.engines import EngineSettings
from infersize.core.serving.meanfield import mean_field
from infersize.service.capacity.arm import make_arm, saturation_rate, serve
from infersize.service.capacity.request import CapacityRequest, Traffic, prepare_capacity
from infersize.service.request import SpecRequest
from infersize.service.resolve import DeploymentRequest

DOC = Path(__file__).resolve().parent.parent / "docs" / "capacity.md"
GRID = [  # target, draft, gpu, tp
    ("llama-3.1-8b", "llama-3.2-1b", "h100", 1),
    ("qwen2.5-7b", "qwen2.5-0.5b", "a100", 1),
    ("llama-3.1-70b", "llama-3.2-1b", "h200", 2),
    ("qwen3-30b-a3b", "qwen3-0.6b", "h100", 1),
]
SHARES = (0.1, 0.3, 0.5, 0.7, 0.9)
TRAFFIC = Traffic(input_tokens=(512,), output_tokens=(128,), request_rate=1.0, requests=1000)


def rows() -> list[list[str]]:
    catalog = load_catalog()
    out = []
    for target, draft, gpu, tp in GRID:
        deployment = DeploymentRequest(target=target, draft=draft, gpu=gpu, tp=tp)
        spec = SpecRequest(
            deployment=deployment, engine=EngineSettings(engine="vllm"), acceptance_rate=0.7
        )
        prepared = prepare_capacity(CapacityRequest(spec=spec, traffic=TRAFFIC), catalog)
        for k in (0, 3):
            arm = make_arm(prepared, TRAFFIC, k)
            ceiling = saturation_rate(arm, TRAFFIC)
            for share in SHARES:
                simulated = serve(arm, TRAFFIC, share * ceiling)
                field = mean_field(arm.replica, arm.lengths, share * ceiling)
                gaps = []
                for metric in ("ttft", "tpot"):
                    for statistic in ("mean", "p99"):
                        estimate = getattr(field, f"{metric}_s")[statistic]
                        gaps.append(estimate / simulated.value(metric, statistic) - 1.0)
                setup = f"{target} + {draft} on {gpu} × {tp}, K {k}"
                out.append([setup, f"{share:.0%}", *(f"{g * 100:+.0f}%" for g in gaps)])
    return out


def table() -> str:
    lines = [
        "| deployment | load (of saturation) | TTFT mean | TTFT p99 | TPOT mean | TPOT p99 |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows()]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true")
    text = table()
    print(text)
    if parser.parse_args().write:
        doc = DOC.read_text()
        block = f"<!-- meanfield-gap:start -->\n{text}<!-- meanfield-gap:end -->"
        DOC.write_text(
            re.sub(
                r"<!-- meanfield-gap:start -->.*<!-- meanfield-gap:end -->", block, doc, flags=re.S
            )
        )


if __name__ == "__main__":
    main()
