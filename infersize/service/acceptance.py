"""α as a property of the (target, draft) pair and the kind of traffic: the published figures for
the pair when the catalog has them (those on the workload's kind where there are any), a head's
method's figures, n-gram lookup's on the workload's kind only, else the prior fitted to published
pairs (configs/acceptance.yaml). Three scenarios: low, expected, high."""

from __future__ import annotations

from infersize.catalog.published import PublishedAcceptance
from infersize.catalog.records import Model
from infersize.catalog.store import Catalog
from infersize.core.acceptance import prior_alpha
from infersize.core.methods import method_of
from infersize.core.params import param_counts
from infersize.core.profile import conditional_rates
from infersize.errors import InfersizeError
from infersize.record import record
from infersize.service.resolve import Deployment


@record
class PairAcceptance:
    low: float
    expected: float
    high: float
    source: str  # "published" or "prior"
    detail: str  # where the numbers come from, for notes and the report
    # a head's figures hold up to the K they were measured at (core/profile.py
    # limit_positions); None: extrapolated as Leviathan's i.i.d. α
    positions: int | None = None
    # r_1 .. r_positions where a head's acceptance is published per position (head_profile):
    # priced as measured, position by position, instead of α^i
    profile: tuple[float, ...] | None = None

    @property
    def scenarios(self) -> tuple[float, float, float]:
        return (self.low, self.expected, self.high)


def _of_kind(
    rows: list[PublishedAcceptance], kind: str | None
) -> tuple[list[PublishedAcceptance], str]:
    """The rows measured on `kind` of traffic where there are any (and a phrase saying so),
    else all of them (and a phrase saying that)."""
    if kind is None:
        return rows, ""
    matching = [r for r in rows if r.workload_kind == kind]
    if matching:
        return matching, f" on {kind} traffic"
    return rows, f" (none on {kind} traffic: every kind's)"


def _sources(rows: list[PublishedAcceptance]) -> str:
    return "; ".join(sorted({r.source.split(",")[0].split(" @")[0] for r in rows}))


def _from_rows(
    rows: list[PublishedAcceptance],
    draft: Model,
    detail: str,
    source: str,
    published: list[PublishedAcceptance] | None = None,
) -> PairAcceptance:
    """The rows' mean α, with their lowest and highest as the low and high scenarios; given
    the `published` rows to look for profiles in, a head's rows with a per-position profile
    give it (head_profile), its α the mean of theirs."""
    alphas = [r.alpha for r in rows]
    profile = None if published is None else head_profile(draft, rows, published)
    if profile is not None:
        shown = ", ".join(f"{r:.3g}" for r in profile)
        detail = f"{detail}; per position r_1..r_{len(profile)} = {shown}"
        carried = sorted({r.target for r in rows if not r.per_position})
        if carried:
            detail += (
                f" (past the K measured on {', '.join(carried)}: the head's published "
                "per-position decay on another target)"
            )
    else:
        detail = f"{detail}; lowest {min(alphas):g}, highest {max(alphas):g}"
    return PairAcceptance(
        low=min(alphas),
        expected=round(sum(alphas) / len(alphas), 4),
        high=max(alphas),
        source=source,
        detail=f"{detail}; lowest {min(alphas):g}, highest {max(alphas):g}",
        positions=head_positions(draft, rows) if profile is None else len(profile),
        profile=profile,
    )


def pair_acceptance(
    target: Model, draft: Model, catalog: Catalog, kind: str | None = None
) -> PairAcceptance:
    """Published rows of this exact pair (use_for_fit), those on `kind` of traffic where there
    are any; otherwise its method's figures (heads, n-gram), or the prior at the pair's size
    ratio, ∓ its RMSE."""
    rows = [
        r
        for r in catalog.published_acceptance
        if r.use_for_fit and r.target_id == target.id and r.draft_id == draft.id
    ]
    if rows:
        rows, on = _of_kind(rows, kind)
        detail = f"the mean of {len(rows)} published figure(s) for this pair{on} ({_sources(rows)})"
        return _from_rows(rows, draft, detail, "published", catalog.published_acceptance)
    if draft.is_speculator_head:
        return _method_acceptance(target, draft, catalog, kind)
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


def _ngram_acceptance(
    target: Model, draft: Model, catalog: Catalog, kind: str | None
) -> PairAcceptance:
    """n-gram lookup accepts what the answer repeats of its prompt: a property of the traffic,
    so only figures measured on the workload's kind of traffic speak for it."""
    rows = [r for r in catalog.published_acceptance if r.method == "ngram"]
    measured = ", ".join(sorted({r.workload_kind for r in rows if r.workload_kind}))
    if kind is None:
        published = f" (published for {measured})" if measured else ""
        raise InfersizeError(
            "n-gram acceptance depends on how much the output repeats the prompt: give "
            f"{{workload_kind}}{published} or {{acceptance_rate}} for {target.id} with ngram",
            settings=("workload_kind", "acceptance_rate", "acceptance_rates"),
        )
    matching = [r for r in rows if r.workload_kind == kind]
    if not matching:
        raise InfersizeError(
            f"no published n-gram acceptance on {kind} traffic in the catalog"
            + (f" (only on {measured})" if measured else "")
            + f": give {{acceptance_rate}} for {target.id} with ngram",
            settings=("acceptance_rate", "acceptance_rates"),
        )
    detail = (
        f"the mean of {len(matching)} published n-gram figure(s) on {kind} traffic "
        f"({_sources(matching)})"
    )
    return _from_rows(matching, draft, detail, "method")


def _method_acceptance(
    target: Model, draft: Model, catalog: Catalog, kind: str | None
) -> PairAcceptance:
    """A head nobody published for this target: the published figures of its method for other
    targets (a head's acceptance has nothing to do with its size, so the size prior does not
    apply), those on `kind` of traffic where there are any; n-gram lookup on its kind of
    traffic only."""
    method = method_of(draft).name
    if method == "ngram":
        return _ngram_acceptance(target, draft, catalog, kind)
    rows = [r for r in catalog.published_acceptance if r.method == method and r.use_for_fit]
    if not rows:
        raise InfersizeError(
            f"no published acceptance for {draft.id} ({method}) in the catalog: give "
            "{acceptance_rate} (or {acceptance_rates}, as vLLM logs them)",
            settings=("acceptance_rate", "acceptance_rates"),
        )
    rows, on = _of_kind(rows, kind)
    detail = (
        f"the mean of {len(rows)} published {method} figure(s) for other heads or targets{on} "
        f"(none for {draft.id} on {target.id})"
    )
    return _from_rows(rows, draft, detail, "method", catalog.published_acceptance)


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


def _row_profile(
    row: PublishedAcceptance, published: list[PublishedAcceptance]
) -> list[float] | None:
    """A head row's acceptance per position: its published profile; else, measured at K = m,
    α^i up to m carried on by the conditional acceptance of the same head's published profile
    on another target, past m to that profile's end (the head's own measured decay, where one
    is published); None where neither is."""
    if row.per_position:
        return list(row.per_position)
    m = row.measured_k
    longer = [
        p.per_position
        for p in published
        if p.draft_id is not None
        and p.draft_id == row.draft_id
        and m is not None
        and len(p.per_position) > m
        and p.use_for_fit
    ]
    if m is None or not longer:
        return None
    reference = max(longer, key=len)  # ties: the first listed
    rates = [row.alpha**i for i in range(1, m + 1)]
    for c in conditional_rates(reference)[m:]:
        rates.append(rates[-1] * float(c))
    return rates


def head_profile(
    draft: Model, rows: list[PublishedAcceptance], published: list[PublishedAcceptance]
) -> tuple[float, ...] | None:
    """A head's acceptance per position where any of its rows is published per position (or
    carried on by its head's published profile, `_row_profile`): the rows' mean at each
    position, a row counting nothing past the positions it speaks for (a row of α measured at
    K = m as α^i up to m). None where no row has a profile: α alone, as before. Draft models
    keep Leviathan's i.i.d. α (None)."""
    if not draft.is_speculator_head:
        return None
    profiles = [_row_profile(r, published) for r in rows]
    if all(p is None for p in profiles):
        return None
    filled = []
    for row, profile in zip(rows, profiles, strict=True):
        if profile is None:
            m = row.measured_k
            if m is None:
                return None  # a row of unknown K: no profile can say how far it holds
            profile = [row.alpha**i for i in range(1, m + 1)]
        filled.append(profile)
    length = max(len(p) for p in filled)
    return tuple(
        round(sum(p[i] if i < len(p) else 0.0 for p in filled) / len(filled), 4)
        for i in range(length)
    )


def resolve_alpha(
    asked: float | None, dep: Deployment, catalog: Catalog, kind: str | None = None
) -> tuple[float, PairAcceptance | None]:
    """The α the user asked, else the pair's expected α from the acceptance catalog on `kind`
    of traffic (with where it comes from). A deployment without a draft has no α to find."""
    if asked is not None:
        return asked, None
    if dep.draft is None:
        return 0.0, None
    known = pair_acceptance(dep.target.model, dep.draft.model, catalog, kind)
    return known.expected, known
