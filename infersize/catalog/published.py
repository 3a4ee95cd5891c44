"""Published acceptance figures and the prior fitted to them (configs/acceptance.yaml)."""

from __future__ import annotations

from pydantic import Field

from infersize.catalog.records import Record


class PublishedAcceptance(Record):
    """One published acceptance figure for a (target, draft) pair, converted to α."""

    target: str
    target_params_b: float = Field(gt=0)
    draft: str
    draft_params_b: float = Field(gt=0)
    dataset: str
    temperature: str
    draft_k: str
    engine: str
    metric: str  # the figure as published (α, mean accepted tokens, accept ratio, speedup)
    value: str
    method: str = "draft"  # the speculative method (core/methods.py); draft models feed the prior
    # vLLM's per-position acceptance rate, where published
    per_position: list[float] = Field(default_factory=list)
    alpha: float = Field(ge=0, le=1)
    alpha_low: float | None = Field(default=None, ge=0, le=1)
    alpha_high: float | None = Field(default=None, ge=0, le=1)
    conversion: str  # how the published figure became α
    trust: str
    use_for_fit: bool  # the prior is fitted to these rows
    why_not_fitted: str | None = None
    target_id: str | None = None  # catalog ids, where the pair is in the catalog
    draft_id: str | None = None
    source: str
    notes: str | None = None


class AcceptancePrior(Record):
    """α for pairs nobody measured: a line in log10(draft / target parameters), clipped."""

    formula: str
    intercept: float
    slope: float
    alpha_min: float = Field(ge=0, le=1)
    alpha_max: float = Field(ge=0, le=1)
    rmse: float = Field(ge=0)  # over the fitted published pairs
    max_abs_error: float = Field(ge=0)
    pairs_fitted: int = Field(ge=2)
    fitted_by: str
