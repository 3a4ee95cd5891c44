"""α as a property of the (target, draft) pair: the published figures for the pair when the
catalog has them, else the prior fitted to published pairs (configs/acceptance.yaml). Three
scenarios: low, expected, high."""

from __future__ import annotations

from dataclasses import dataclass

from infersize.catalog.published import PublishedAcceptance
from infersize.catalog.records import Model
from infersize.catalog.store import Catalog
from infersize.core.acceptance import prior_alpha
from infersize.core.methods import method_of
from infersize.core.params import param_counts
from infersize.errors import InfersizeError
from infersize.service.resolve import Deployment


@dataclass(frozen=True, kw_only=True)
class PairAcceptance:
    low: float
    expected: float
    high: float
    source: str  # "published" or "prior"
    detail: str  # where the numbers come from, for notes and the report
    # a head's figures hold up to the K they were measured at (core/profile.py
    # limit_positions); None: extrapolated as Leviathan's i.i.d. α
    positions: int | None = None

    @property
    def scenarios(self) -> tuple[float, float, float]:
        return (self.low, self.expected, self.high)


def pair_acceptance(target: Model, draft: Model, catalog: Catalog) -> PairAcceptance:
    """Published rows of this exact pair (use_for_fit): their mean, lowest and highest α;
    otherwise the prior at the pair's size ratio, ∓ its RMSE."""
    rows = [
        r
        for r in catalog.published_acceptance
        if r.use_for_fit and r.target_id == target.id and r.draft_id == draft.id
    ]
    if rows:
        alphas = [r.alpha for r in rows]
        mean = round(sum(alphas) / len(alphas), 4)
        sources = sorted({r.source.split(",")[0].split(" @")[0] for r in rows})
        detail = (
            f"the mean of {len(rows)} published figure(s) for this pair "
            f"({'; '.join(sources)}); lowest {min(alphas):g}, highest {max(alphas):g}"
        )
        return PairAcceptance(
            low=min(alphas), expected=mean, high=max(alphas), source="published", detail=detail,
            positions=head_positions(draft, rows),
        )  # fmt: skip
    if draft.is_speculator_head:
        return _method_acceptance(target, draft, catalog)
    prior = catalog.prior
    ratio = param_counts(draft).total / param_counts(target).total
    expected = round(prior_alpha(prior, ratio, 1.0), 4)
    detail = (
        f"the prior for a draft {ratio:.3g} the size of its target: {prior.intercept:.3f} + "
        f"{prior.slope:.4f} · log10(draft/target), fitted to {prior.pairs_fitted} published "
        f"pairs (RMSE {prior.rmse:.3f})"
    )
    low = round(max(expected - prior.rmse, 0.0), 4)
    high = round(min(expected + prior.rmse, 1.0), 4)
    return PairAcceptance(low=low, expected=expected, high=high, source="prior", detail=detail)


def _method_acceptance(target: Model, draft: Model, catalog: Catalog) -> PairAcceptance:
    """A head nobody published for this target: the published figures of its method for other
    targets (a head's acceptance has nothing to do with its size, so the size prior does not
    apply); n-gram lookup and methods without figures need the user's α."""
    method = method_of(draft).name
    if method == "ngram":
        raise InfersizeError(
            f"n-gram acceptance depends on how much the output repeats the prompt: give "
            f"{{acceptance_rate}} (or {{acceptance_rates}}) for {target.id} with ngram",
            settings=("acceptance_rate", "acceptance_rates"),
        )
    rows = [r for r in catalog.published_acceptance if r.method == method and r.use_for_fit]
    if not rows:
        raise InfersizeError(
            f"no published acceptance for {draft.id} ({method}) in the catalog: give "
            "{acceptance_rate} (or {acceptance_rates}, as vLLM logs them)",
            settings=("acceptance_rate", "acceptance_rates"),
        )
    alphas = [r.alpha for r in rows]
    mean = round(sum(alphas) / len(alphas), 4)
    detail = (
        f"the mean of {len(rows)} published {method} figure(s) for other heads or targets "
        f"(none for {draft.id} on {target.id}); lowest {min(alphas):g}, highest {max(alphas):g}"
    )
    return PairAcceptance(
        low=min(alphas), expected=mean, high=max(alphas), source="method", detail=detail,
        positions=head_positions(draft, rows),
    )  # fmt: skip


def head_positions(draft: Model, rows: list[PublishedAcceptance]) -> int | None:
    """How many positions a head's published figures speak for: the largest K they were
    measured at. A head's acceptance falls with position faster than any one α says (each
    position is one more pass of a layer trained for the first), and no per-position profile
    of these heads is published to extrapolate with, so the K search stops there. Draft
    models keep Leviathan's i.i.d. α (None), as the prior they are fitted to does."""
    if not draft.is_speculator_head:
        return None
    measured = [r.measured_k for r in rows]
    if not measured or any(k is None for k in measured):
        return None
    return max(k for k in measured if k is not None)


def resolve_alpha(
    asked: float | None, dep: Deployment, catalog: Catalog
) -> tuple[float, PairAcceptance | None]:
    """The α the user asked, else the pair's expected α from the acceptance catalog (with
    where it comes from). A deployment without a draft has no α to find."""
    if asked is not None:
        return asked, None
    if dep.draft is None:
        return 0.0, None
    known = pair_acceptance(dep.target.model, dep.draft.model, catalog)
    return known.expected, known
