"""Fit the draft-tree constants of infersize/core/tree.py (β, the draft's top-1 confidence as its
tree builder scores it, and σ, the share of a rejected position its next candidates take) to the
`fit` tree runs of tests/data/sglang_tree_acceptance.csv, and print every run's error under the
refit and under the constants in core/tree.py.

    python benchmarks/fit_tree_constants.py [--table | --write]

The refit minimises the worst relative error over the fit runs, then the mean (a grid of 0.05);
tests/test_tree.py checks that core/tree.py holds it. --table prints the Markdown table of
docs/modelling.md (errors of the fit and check runs by head), --write puts it there
(tests/test_docs.py checks that it is current).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from infersize.core.tree import DRAFT_CONFIDENCE, SIBLING_ACCEPTANCE
from infersize.service.tree_check import load_runs, profiles, tree_errors

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "sglang_tree_acceptance.csv"
PAGE = ROOT / "docs" / "modelling.md"
START, END = "<!-- tree table: start -->\n", "<!-- tree table: end -->\n"
CONFIDENCES = tuple(round(x, 2) for x in np.arange(0.30, 0.951, 0.05))
SIBLINGS = tuple(round(x, 2) for x in np.arange(0.0, 0.801, 0.05))


def refit(path: Path = DATA) -> tuple[float, float]:
    """(β, σ) of least worst error over the fit runs, ties broken by the mean error."""
    runs = load_runs(path)
    known = profiles(runs)
    best: tuple[tuple[float, float], float, float] | None = None
    for confidence in CONFIDENCES:
        for sibling in SIBLINGS:
            errors = [abs(e) for _, _, e in tree_errors(runs, "fit", sibling, confidence, known)]
            score = (round(max(errors), 6), round(float(np.mean(errors)), 6))
            if best is None or score < best[0]:
                best = (score, confidence, sibling)
    assert best is not None
    return best[1], best[2]


def table(path: Path = DATA) -> str:
    """Per head and split: tree runs, mean |error|, worst error, runs within 10 %."""
    runs = load_runs(path)
    lines = [
        "| split | target | head | tree runs | mean \\|error\\| | worst | within 10 % |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for split in ("fit", "check"):
        by_head: dict[tuple[str, str], list[float]] = {}
        for run, _, error in tree_errors(runs, split):
            by_head.setdefault(run.group[:2], []).append(error)
        for (target, head), errors in by_head.items():
            worst = max(errors, key=abs)
            inside = sum(abs(e) <= 0.10 for e in errors)
            lines.append(
                f"| {split} | {target} | {head} | {len(errors)} | "
                f"{np.mean(np.abs(errors)) * 100:.1f}% | {worst * 100:+.1f}% | {inside} |"
            )
    return "\n".join(lines) + "\n"


def write(page: Path = PAGE) -> None:
    """The table into its place in docs/modelling.md."""
    text = page.read_text()
    before, rest = text.split(START, 1)
    after = rest.split(END, 1)[1]
    page.write_text(before + START + table() + END + after)


def main() -> None:
    if "--table" in sys.argv[1:]:
        print(table(), end="")
        return
    if "--write" in sys.argv[1:]:
        write()
        return
    confidence, sibling = refit()
    print(f"refit: DRAFT_CONFIDENCE = {confidence}, SIBLING_ACCEPTANCE = {sibling}")
    shipped = f"DRAFT_CONFIDENCE = {DRAFT_CONFIDENCE}, SIBLING_ACCEPTANCE = {SIBLING_ACCEPTANCE}"
    print(f"core/tree.py: {shipped}")
    runs = load_runs(DATA)
    for split in ("fit", "check"):
        errors = [e for _, _, e in tree_errors(runs, split)]
        inside = sum(abs(e) <= 0.10 for e in errors)
        print(
            f"{split}: {len(errors)} tree runs, mean |error| {np.mean(np.abs(errors)) * 100:.1f}%, "
            f"worst {max(errors, key=abs) * 100:+.1f}%, {inside} within 10%"
        )


if __name__ == "__main__":
    main()
