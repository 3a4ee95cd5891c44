"""Draft trees: the expected acceptance length of a tree of width k (top-k), depth d and n draft
tokens, from the per-position acceptance of the draft's top-1 token.

How the engines build the tree (EAGLE-2's dynamic tree, Li et al. 2024, arXiv 2406.16858, as
SGLang implements it: sgl-project/sglang@5c8bd8b51b53b9b39eb1edec582ee43b21002106:
python/sglang/srt/speculative/eagle_utils.py `organize_draft_results`, eagle_worker.py
`draft_forward`, `select_top_k_tokens`): the draft proposes its k best tokens at depth 1; at each
further depth each of the k best nodes so far proposes k children and the k children of highest
score (the product of the draft's probabilities along the path) are expanded next; after d depths
the n − 1 nodes of highest score, with the root, are verified in one target pass.

At most one node per depth is accepted (the nodes of one depth are different tokens after
different prefixes), so the share of steps that accept at least m drafts is

    r_m = Σ over the selected nodes v at depth m of P(the path to v is accepted)

and the tree's tokens per step are E = 1 + Σ_m r_m, the chain's formula over these r_m (vLLM's
"Per-position acceptance rate", core/profile.py). A path's acceptance is the product over its
positions i of a_i(j), the chance that the target's token at position i is the draft's j-th
candidate there, given the path so far was accepted:

    a_i(1) = c_i                       the top-1 conditional acceptance (a chain's r_i / r_(i-1))
    a_i(j) = (1 − c_i) σ (1 − σ)^(j−2)  j ≥ 2: the rest falls on the lower ranks geometrically

The draft ranks nodes by its own confidence, not by these: we score a rank-j candidate
β (1 − β)^(j−1) at every position (β: the draft's typical top-1 probability), so which nodes a
(k, d, n) tree verifies does not depend on the acceptance. β and σ are fitted
(benchmarks/fit_tree_constants.py) to SGLang's published accept lengths of the Llama-3.1-8B
EAGLE-3 heads in SpecBundle and checked on every other head there (tests/test_tree.py,
docs/modelling.md). A chain (k = 1, n = d + 1) selects the top-1 path: r_m is the chain's own
profile and E is Leviathan's (1 − α^(d+1)) / (1 − α) for i.i.d. α, whatever β and σ.
"""

from __future__ import annotations

import functools

import numpy as np
from numpy.typing import ArrayLike

from infersize.core.arrays import FloatArray, floats
from infersize.core.speculative import bisect_increasing
from infersize.record import record

# fitted: benchmarks/fit_tree_constants.py (the worst error on the fit rows, then the mean)
DRAFT_CONFIDENCE = 0.55  # β: the draft's top-1 probability as its tree builder scores it
SIBLING_ACCEPTANCE = 0.2  # σ: share of a rejected top-1 position the next candidate takes

RankPath = tuple[int, ...]  # the draft's rank (1 = its best) of each token from the root


@record(kw_only=False)
class Tree:
    """The shape of what one speculative step drafts: a chain (topk 1, depth + 1 verified
    tokens) or a tree of width topk verifying num_draft_tokens tokens (the root included), as
    SGLang's --speculative-eagle-topk and --speculative-num-draft-tokens set it."""

    topk: int = 1
    num_draft_tokens: int | None = None  # None: a chain, depth + 1

    @property
    def is_chain(self) -> bool:
        return self.topk == 1

    def verify_tokens(self, depth: ArrayLike) -> FloatArray:
        """Tokens per sequence the target verifies: the root and the drafts."""
        if self.is_chain or self.num_draft_tokens is None:
            return floats(floats(depth) + 1.0)
        return np.full_like(floats(depth), float(self.num_draft_tokens))

    def draft_width(self) -> float:
        """Tokens per sequence in each draft pass after the first."""
        return float(self.topk)


CHAIN = Tree()


def _score(path: RankPath, confidence: float) -> float:
    """The draft's score of a node: the product of its candidates' confidences."""
    score = 1.0
    for rank in path:
        score *= confidence * (1.0 - confidence) ** (rank - 1)
    return score


@functools.lru_cache(maxsize=4096)
def selected_paths(
    topk: int, depth: int, draft_tokens: int, confidence: float = DRAFT_CONFIDENCE
) -> tuple[RankPath, ...]:
    """The nodes a (topk, depth, draft_tokens) tree verifies, as rank paths: the beam of topk
    nodes per depth, each expanding topk children, then the draft_tokens − 1 best of every
    expanded node (ties: the shallower, then the lower ranks, so a node's parent comes first)."""
    frontier: list[RankPath] = [()]
    expanded: list[RankPath] = []
    for _ in range(depth):
        children = [(*parent, j) for parent in frontier for j in range(1, topk + 1)]
        children.sort(key=lambda p: (-_score(p, confidence), p))
        expanded.extend(children)
        frontier = children[:topk]
    expanded.sort(key=lambda p: (-_score(p, confidence), len(p), p))
    return tuple(expanded[: max(draft_tokens - 1, 0)])


def rank_acceptance(conditional: FloatArray, rank: int, sibling: float) -> FloatArray:
    """a_i(j) at every position i (last axis): c_i for the top-1 candidate, the geometric share
    σ (1 − σ)^(j−2) of the rest for a lower one."""
    if rank == 1:
        return conditional
    return floats((1.0 - conditional) * sibling * (1.0 - sibling) ** (rank - 2))


def tree_rates(
    conditional: ArrayLike,
    tree: Tree,
    depth: int,
    sibling: float = SIBLING_ACCEPTANCE,
    confidence: float = DRAFT_CONFIDENCE,
) -> FloatArray:
    """r_1 … r_depth of the tree (a new last axis): the share of steps accepting at least m
    drafts. `conditional` holds the top-1 conditional acceptance c_1 … c_P (P ≥ depth) on its
    last axis (core/profile.conditional_rates of a profile; α at every position for i.i.d.)."""
    c = floats(conditional)[..., :depth]
    n = depth + 1 if tree.num_draft_tokens is None or tree.is_chain else tree.num_draft_tokens
    ranks = [rank_acceptance(c, j, sibling) for j in range(1, tree.topk + 1)]
    rates = np.zeros((*c.shape[:-1], depth))
    for path in selected_paths(tree.topk, depth, n, confidence):
        probability = np.ones(c.shape[:-1])
        for position, rank in enumerate(path):
            probability = probability * ranks[rank - 1][..., position]
        rates[..., len(path) - 1] += probability
    return floats(rates)


def tree_expected_tokens(
    conditional: ArrayLike, tree: Tree, ks: ArrayLike, sibling: float = SIBLING_ACCEPTANCE
) -> FloatArray:
    """E = 1 + Σ_m r_m of the tree at each depth of `ks` (a new last axis over `ks`)."""
    depths = [int(k) for k in np.atleast_1d(np.asarray(ks))]
    values = [1.0 + tree_rates(conditional, tree, d, sibling).sum(axis=-1) for d in depths]
    return floats(np.stack(values, axis=-1))


def alpha_for_tree_length(length: ArrayLike, tree: Tree, depth: int) -> FloatArray:
    """The i.i.d. α at which the tree of this depth accepts `length` tokens per step (an
    engine's logged accept length); NaN outside [1, the tree's E at α = 1]."""

    def expected(a: FloatArray) -> FloatArray:
        conditional = np.repeat(floats(a)[..., None], depth, axis=-1)
        return tree_expected_tokens(conditional, tree, [depth])[..., 0]

    return bisect_increasing(expected, floats(length))


def most_tokens(tree: Tree, depth: int) -> float:
    """E when every top-1 draft is accepted (α = 1): 1 + the deepest top-1 node verified."""
    return float(tree_expected_tokens(np.ones(depth), tree, [depth])[0])
