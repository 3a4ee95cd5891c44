"""Published acceptance figures and the prior fitted to them (configs/acceptance.yaml)."""

from __future__ import annotations

from dataclasses import field
from typing import Annotated

from infersize.catalog.records import Check, Fraction, PositiveFloat, Record
from infersize.catalog.workload_kinds import WorkloadKind
from infersize.record import record


@record
class PublishedAcceptance(Record):
    """One published acceptance figure for a (target, draft) pair, converted to α."""

    target: str
    target_params_b: PositiveFloat
    draft: str
    draft_params_b: PositiveFloat | None  # None: no weights (n-gram lookup), or not published
    dataset: str
    temperature: str
    draft_k: str
    engine: str
    metric: str  # the figure as published (α, mean accepted tokens, accept ratio, speedup)
    value: str
    method: str = "draft"  # the speculative method (core/methods.py); draft models feed the prior
    # vLLM's per-position acceptance rate, where published
    per_position: list[float] = field(default_factory=list)
    # a draft tree's shape (SGLang's --speculative-eagle-topk, --speculative-num-draft-tokens;
    # draft_k is its depth, --speculative-num-steps); None: a chain
    eagle_topk: int | None = None
    num_draft_tokens: int | None = None
    alpha: Fraction
    alpha_low: Fraction | None = None
    alpha_high: Fraction | None = None
    conversion: str  # how the published figure became α
    trust: str
    use_for_fit: bool  # the prior is fitted to these rows
    why_not_fitted: str | None = None
    target_id: str | None = None  # catalog ids, where the pair is in the catalog
    draft_id: str | None = None
    source: str
    notes: str | None = None
    # the kind of traffic it was measured on (its dataset's); None: several, or not stated
    workload_kind: WorkloadKind | None = None

    @property
    def measured_k(self) -> int | None:
        """The draft length the figure was measured at (the profile's positions where one
        is published); None where the source does not fix it (dynamic K, not stated)."""
        if self.per_position:
            return len(self.per_position)
        return int(self.draft_k) if self.draft_k.strip().isdigit() else None


@record
class AcceptancePrior(Record):
    """α for pairs nobody measured: a line in log10(draft / target parameters), clipped."""

    formula: str
    intercept: float
    slope: float
    alpha_min: Fraction
    alpha_max: Fraction
    rmse: Annotated[float, Check(ge=0)]  # over the fitted published pairs
    max_abs_error: Annotated[float, Check(ge=0)]
    pairs_fitted: Annotated[int, Check(ge=2)]
    fitted_by: str
