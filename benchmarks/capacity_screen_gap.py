"""How well a capacity sweep's screen stands in for the simulator: every case of a capacity
sweep (a deployment under a workload, an SLA and an α scenario) answered both ways, the screen
as the sweep screens (plain decoding simulated, speculation's capacity the mean-field ratio of
the arms times it, checked by one simulated probe) and the simulator as `infersize capacity
--draft-k auto` answers. Prints the error of the screened speculative capacity (median and 90th
percentile of its absolute value, its median sign, its largest over the rows the sweep leaves
screened), how often the two agree on whether a row can be served at all, how often the
simulator's GPUs lie within the screen's stated error, and the share the sweep simulates.

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
from infersize.service.capacity.fleet import fleet
from infersize.service.capacity.request import prepare_capacity
from infersize.service.capacity.screen import (
    RowAnswer,
    RowCache,
    near_edge,
    screen_row,
    simulate_row,
)
from infersize.sweep.capacity.rows import capacity_request, iter_cases
from infersize.sweep.config import load_sweep
from infersize.sweep.plan import build_plan

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "capacity.md"


Case = dict[str, float | bool]


def gaps(sweep: Path) -> dict[str, list[Case]]:
    """Per SLA, every case both ways: the screened speculative capacity's error, whether both
    serve (or neither), whether the sweep leaves it screened, and whether the simulator's GPUs
    lie within the screen's stated error at every target rate."""
    plan = build_plan(*load_sweep(sweep))
    assert plan.capacity is not None, f"{sweep}: not a capacity sweep"
    catalog = load_catalog(tuple(plan.scoring.catalog_files))
    cache = RowCache()
    out: dict[str, list[Case]] = {}
    for case in iter_cases(plan.settings, plan.capacity, plan.scenarios):
        request = capacity_request(case, plan.scoring, max(plan.ks), plan.capacity)
        rates = case.workload.target_request_rates
        try:
            prepared = prepare_capacity(request, catalog)
            screened = screen_row(prepared, request, rates, cache)
        except InfersizeError:
            continue
        simulated = simulate_row(request, catalog, rates, cache)
        truth = simulated.speculative.max_request_rate
        guess = screened.speculative.max_request_rate
        kept = not (screened.unsure or near_edge(screened, rates, plan.capacity.headroom))
        out.setdefault(case.sla_name, []).append(
            {
                "case": f"{case.setting.gpu} tp{case.setting.tp} {case.setting.target} + "
                f"{case.setting.draft} {case.workload.name} α#{case.scenario}: K "
                f"{screened.draft_k}/{simulated.draft_k}, {guess:.3g} vs {truth:.3g}",
                "error": guess / truth - 1.0 if truth > 0 and guess > 0 else 0.0,
                "servable": (truth > 0) == (guess > 0),
                "kept": kept,
                "within": all(
                    _within(screened, simulated, rate, case.setting.tp, plan.capacity.headroom)
                    for rate in rates
                ),
            }
        )
    return out


def _within(
    screened: RowAnswer, simulated: RowAnswer, rate: float, tp: int, headroom: float
) -> bool:
    """The simulator's speculative GPUs lie between those at the two ends of the screened
    row's range (its stated error)."""
    interval = screened.speculative.interval
    truth = fleet(
        rate, simulated.speculative.max_request_rate, None, headroom=headroom, tp=tp, price=None
    ).gpus
    if interval is None or interval[1] <= 0:
        return truth is None
    fewest, most = (-(-headroom * rate // end) * tp for end in (interval[1], interval[0]))
    return truth is not None and fewest <= truth <= most


def table(sweep: Path, show_misses: bool = False) -> str:
    start = time.perf_counter()
    lines = [
        "| SLA | cases | screened capacity: median abs. error | 90th percentile | largest "
        "where kept | same servable | GPUs within the stated error | kept screened |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    found = gaps(sweep)
    for sla, rows in sorted(found.items()):
        absolute = sorted(abs(float(r["error"])) for r in rows)
        p90 = absolute[min(len(absolute) - 1, int(0.9 * len(absolute)))]
        kept = [r for r in rows if r["kept"]]
        worst = max((abs(float(r["error"])) for r in kept), default=0.0)
        lines.append(
            f"| {sla} | {len(rows)} | {statistics.median(absolute):.1%} | {p90:.1%} | "
            f"{worst:.1%} | {_share(rows, 'servable')} | {_share(kept, 'within')} | "
            f"{len(kept) / len(rows):.0%} |"
        )
    seconds = time.perf_counter() - start
    if show_misses:
        misses = [r for rows in found.values() for r in rows if r["kept"] and not r["within"]]
        print("\n".join(str(r["case"]) for r in misses))
    lines.append("")
    name = sweep.relative_to(ROOT) if sweep.is_relative_to(ROOT) else sweep
    lines.append(f"{name}, every case both ways in {seconds:.0f} s.")
    return "\n".join(lines) + "\n"


def _share(rows: list[Case], key: str) -> str:
    return f"{sum(bool(r[key]) for r in rows)} of {len(rows)}" if rows else "-"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("sweep", nargs="?", type=Path, default=ROOT / "sweeps" / "capacity.yaml")
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--show-misses", action="store_true", help="kept rows off by more")
    args = parser.parse_args()
    text = table(args.sweep.resolve(), args.show_misses)
    print(text)
    if args.write:
        block = f"<!-- screen-gap:start -->\n{text}<!-- screen-gap:end -->"
        pattern = r"<!-- screen-gap:start -->.*<!-- screen-gap:end -->"
        DOC.write_text(re.sub(pattern, block, DOC.read_text(), flags=re.S))


if __name__ == "__main__":
    main()
