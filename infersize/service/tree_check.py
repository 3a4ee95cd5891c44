"""The draft-tree model (core/tree.py) against SGLang's published accept lengths: each head's
chain runs (topk 1 at depths 3, 5 and 7) give its per-position acceptance, from which the
model predicts the same head's tree runs on the same dataset. Used by tests/test_tree.py,
benchmarks/fit_tree_constants.py and the table in docs/modelling.md.

tests/data/sglang_tree_acceptance.csv holds the runs (SpecForge's SpecBundle dashboard data, one
SGLang benchmark per head, dataset and configuration); tree rows are `split: fit` (the
Llama-3.1-8B-Instruct heads, which the tree constants are fitted to) or `check`.
"""

from __future__ import annotations

import csv
import itertools
from pathlib import Path

import numpy as np

from infersize.core.arrays import FloatArray, floats
from infersize.core.speculative import alpha_for_expected_tokens, bisect_increasing
from infersize.core.tree import DRAFT_CONFIDENCE, SIBLING_ACCEPTANCE, Tree, tree_rates
from infersize.record import record

CHAIN_DEPTHS = (3, 5, 7)  # the chain runs each head was measured at (topk 1, depth + 1 tokens)


@record
class TreeRun:
    id: str
    group: tuple[str, str, str, str]  # target, head, dataset, batch size
    steps: int
    topk: int
    num_draft_tokens: int
    accept_length: float
    split: str  # fit | check (tree runs); empty for chain runs


def load_runs(path: Path) -> list[TreeRun]:
    with path.open(newline="") as handle:
        return [
            TreeRun(
                id=row["id"],
                group=(row["target"], row["head"], row["dataset"], row["batch_size"]),
                steps=int(row["steps"]),
                topk=int(row["topk"]),
                num_draft_tokens=int(row["num_draft_tokens"]),
                accept_length=float(row["accept_length"]),
                split=row["split"],
            )
            for row in csv.DictReader(handle)
        ]


def _segment(start: float, gained: float, positions: int) -> float:
    """The conditional acceptance c that carries a profile from r = `start` through
    `positions` more positions adding `gained` tokens: Σ_{i=1..positions} start · c^i."""
    target = floats(min(max(gained, 0.0), start * positions))
    powers = np.arange(1, positions + 1, dtype=np.float64)
    return float(bisect_increasing(lambda c: start * (c[..., None] ** powers).sum(-1), target))


def chain_conditional(lengths: dict[int, float]) -> FloatArray:
    """c_1 … c_7 from the chain's accept lengths at depths 3, 5 and 7: one c over positions
    1-3 (the i.i.d. α of E(3)), then one over 4-5 and one over 6-7."""
    alpha = float(alpha_for_expected_tokens(lengths[3], 3))
    conditional = [alpha] * 3
    reached = alpha**3
    for low, high in itertools.pairwise(CHAIN_DEPTHS):
        c = _segment(reached, lengths[high] - lengths[low], high - low)
        conditional += [c] * (high - low)
        reached *= c ** (high - low)
    return floats(conditional)


def profiles(runs: list[TreeRun]) -> dict[tuple[str, str, str, str], FloatArray]:
    """Each group's top-1 conditional acceptance, where all three chain runs were published."""
    chains: dict[tuple[str, str, str, str], dict[int, float]] = {}
    for run in runs:
        if run.topk == 1 and run.steps in CHAIN_DEPTHS:
            chains.setdefault(run.group, {})[run.steps] = run.accept_length
    return {g: chain_conditional(c) for g, c in chains.items() if set(c) == set(CHAIN_DEPTHS)}


def predict(
    conditional: FloatArray,
    run: TreeRun,
    sibling: float = SIBLING_ACCEPTANCE,
    confidence: float = DRAFT_CONFIDENCE,
) -> float:
    """The model's accept length for one run's (steps, topk, num_draft_tokens)."""
    tree = Tree(run.topk, run.num_draft_tokens)
    rates = tree_rates(conditional, tree, run.steps, sibling, confidence)
    return float(1.0 + rates.sum())


def tree_errors(
    runs: list[TreeRun],
    split: str,
    sibling: float = SIBLING_ACCEPTANCE,
    confidence: float = DRAFT_CONFIDENCE,
    known: dict[tuple[str, str, str, str], FloatArray] | None = None,
) -> list[tuple[TreeRun, float, float]]:
    """(run, predicted, relative error) for the tree runs of `split` whose head has a profile
    (`known`: the profiles, when already computed)."""
    known = profiles(runs) if known is None else known
    return [
        (run, p, p / run.accept_length - 1.0)
        for run in runs
        if run.topk > 1 and run.split == split and run.group in known
        for p in [predict(known[run.group], run, sibling, confidence)]
    ]
