"""How well a capacity sweep's screen stands in for the simulator: every case of a capacity
sweep (a deployment under a workload, an SLA and an α scenario) answered both ways, the screen
as the sweep screens (plain decoding simulated, speculation's capacity the mean-field ratio of
the arms times it) and the simulator as `infersize capacity --draft-k auto` answers. Prints the
error of the screened speculative capacity (median and 90th percentile of its absolute value,
and its median sign), how often the two pick the same K, and how often they agree on whether
speculation saves GPUs at each target rate.

Usage: python benchmarks/capacity_screen_gap.py [SWEEP] [--write]
SWEEP defaults to sweeps/capacity.yaml; --write puts the table into docs/capacity.md between
its screen-gap markers."""

from __future__ import annotations

import argparse
import re
import statistics
import time
from pathlib import Path

from infersize.catalog.store import load_catalog
from infersize.errors import InfersizeError
from infersize.service.capacity import prepare_capacity
from infersize.sweep.capacity_rows import (
    RowCache,
    capacity_request,
    gpus_needed,
    iter_cases,
    screen,
    simulate,
)
from infersize.sweep.config import load_sweep
from infersize.sweep.plan import build_plan

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "capacity.md"


def gaps(sweep: Path) -> dict[str, list[tuple[float, bool, bool]]]:
    """Per SLA: (relative error of the screened speculative capacity, same K, same saving
    verdict at every target rate) for every case with a speculative arm that meets the SLA."""
    plan = build_plan(*load_sweep(sweep))
    assert plan.capacity is not None, f"{sweep}: not a capacity sweep"
    catalog = load_catalog(tuple(plan.scoring.catalog_files))
    cache = RowCache()
    out: dict[str, list[tuple[float, bool, bool]]] = {}
    for case in iter_cases(plan.settings, plan.capacity, plan.scenarios):
        request = capacity_request(case, plan.scoring, max(plan.ks), plan.capacity)
        rates = case.workload.target_request_rates
        try:
            prepared = prepare_capacity(request, catalog)
            screened = screen(prepared, request, rates, cache)
        except InfersizeError:
            continue
        simulated = simulate(request, catalog, rates, cache)
        truth = simulated.max_request_rate[1]
        if truth <= 0:
            continue
        error = screened.max_request_rate[1] / truth - 1.0
        same_k = screened.draft_k == simulated.draft_k
        verdicts = [
            _saves(answer, rate, plan.capacity.headroom, case.setting.tp)
            for rate in rates
            for answer in (screened, simulated)
        ]
        same_verdict = verdicts[0::2] == verdicts[1::2]
        out.setdefault(case.sla_name, []).append((error, same_k, same_verdict))
    return out


def _saves(answer: object, rate: float, headroom: float, tp: int) -> int | None:
    plain, speculative = gpus_needed(answer, rate, headroom, tp)  # type: ignore[arg-type]
    return None if plain is None or speculative is None else plain - speculative


def table(sweep: Path) -> str:
    start = time.perf_counter()
    lines = [
        "| SLA | cases | speculative capacity: median abs. error | 90th percentile | median "
        "error | same K | same GPUs saved |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for sla, rows in sorted(gaps(sweep).items()):
        errors = [e for e, _, _ in rows]
        absolute = sorted(abs(e) for e in errors)
        p90 = absolute[min(len(absolute) - 1, int(0.9 * len(absolute)))]
        same_k = sum(k for _, k, _ in rows) / len(rows)
        same = sum(v for _, _, v in rows) / len(rows)
        lines.append(
            f"| {sla} | {len(rows)} | {statistics.median(absolute):.1%} | {p90:.1%} | "
            f"{statistics.median(errors):+.1%} | {same_k:.0%} | {same:.0%} |"
        )
    seconds = time.perf_counter() - start
    lines.append("")
    name = sweep.relative_to(ROOT) if sweep.is_relative_to(ROOT) else sweep
    lines.append(f"{name}, every case both ways in {seconds:.0f} s.")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("sweep", nargs="?", type=Path, default=ROOT / "sweeps" / "capacity.yaml")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    text = table(args.sweep.resolve())
    print(text)
    if args.write:
        block = f"<!-- screen-gap:start -->\n{text}<!-- screen-gap:end -->"
        pattern = r"<!-- screen-gap:start -->.*<!-- screen-gap:end -->"
        DOC.write_text(re.sub(pattern, block, DOC.read_text(), flags=re.S))


if __name__ == "__main__":
    main()
