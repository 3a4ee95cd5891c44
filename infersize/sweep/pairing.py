"""Resolving a sweep's names: models, precisions and GPUs by catalog id (errors name the YAML
line), the (target, draft) pairs the pairing rules keep, and each pair's α per scenario."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import product
from typing import Any

import numpy as np

from infersize.catalog.records import Model
from infersize.catalog.sources import resolve_model
from infersize.catalog.store import Catalog
from infersize.catalog.yamlfile import YamlDocument
from infersize.core.arrays import FloatArray
from infersize.core.deployment import draft_is_smaller, pairing_problem
from infersize.core.methods import get_method, method_of
from infersize.core.profile import expected_tokens_profile
from infersize.core.speculative import alpha_for_expected_tokens
from infersize.errors import InfersizeError, SweepConfigError
from infersize.record import record
from infersize.service.acceptance import PairAcceptance, pair_acceptance
from infersize.service.resolve import published_head
from infersize.sweep.config import MAX_AXIS_INT, SweepConfig, axis_values


def resolve_name(
    doc: YamlDocument, lookup: Callable[[str], Any], name: str, *loc: int | str
) -> str:
    try:
        record_id: str = lookup(name).id
    except InfersizeError as exc:
        raise exc.inside(SweepConfigError, f"{doc.where(*loc)}: ") from None
    return record_id


def model_key(doc: YamlDocument, catalog: Catalog, name: str, *loc: int | str) -> str:
    """A catalog model by its id; a local folder, GGUF file or hf: id by the name given (the
    workers load it again from there)."""
    try:
        source = resolve_model(name, catalog)
    except InfersizeError as exc:
        raise exc.inside(SweepConfigError, f"{doc.where(*loc)}: ") from None
    return source.model.id if source.checkpoint is None else name


def model_of(catalog: Catalog, key: str) -> Model:
    return resolve_model(key, catalog).model


def int_axis(doc: YamlDocument, values: FloatArray, key: str, low: int) -> tuple[int, ...]:
    """An axis of counts: whole numbers from `low` to MAX_AXIS_INT (a larger one would overflow
    the 64-bit integers the tables hold, or their products)."""
    if np.any(values != np.round(values)) or np.any(values < low):
        raise SweepConfigError(f"{doc.where(key)}: values must be whole numbers >= {low}")
    if np.any(values > MAX_AXIS_INT):
        raise SweepConfigError(f"{doc.where(key)}: values must be at most {MAX_AXIS_INT:,}")
    if len(set(values.tolist())) != len(values):
        raise SweepConfigError(f"{doc.where(key)}: values repeat")
    return tuple(sorted(int(v) for v in values))


def alpha_axis(doc: YamlDocument, values: FloatArray, *loc: int | str) -> tuple[float, ...]:
    if not np.all(np.isfinite(values)) or np.any((values < 0) | (values > 1)):
        raise SweepConfigError(f"{doc.where(*loc)}: acceptance rates must be in [0, 1]")
    return tuple(sorted({float(v) for v in values}))


@record
class Pair:
    target: str
    draft: str
    alphas: tuple[float, ...]
    alpha_source: str
    profile: tuple[float, ...] | None = None  # per-position acceptance, when the pair has one
    positions: int | None = None  # a head's published figure holds to its measured K
    # α from the catalog on each capacity workload's own kind of traffic, where it differs
    kind_alphas: tuple[tuple[str, tuple[float, ...]], ...] = ()


def first_occurrences(names: list[str]) -> list[tuple[int, str]]:
    """(index, name) of each name's first occurrence: a name listed twice is resolved once."""
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        seen.setdefault(name, i)
    return [(i, name) for name, i in seen.items()]


def unique(keys: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(keys))


def _explicit_pairs(
    cfg: SweepConfig,
    doc: YamlDocument,
    catalog: Catalog,
    notes: list[str],
    profiles: dict[tuple[str, str], tuple[float, ...]],
) -> dict[tuple[str, str], tuple[float, ...] | None]:
    """The pairs listed, with their own α (None: from the sweep or the catalog); their
    per-position profiles go into `profiles`."""
    pairs: dict[tuple[str, str], tuple[float, ...] | None] = {}
    for i, pair in enumerate(cfg.pairs):
        target = model_key(doc, catalog, pair.target, "pairs", i, "target")
        draft = model_key(doc, catalog, pair.draft, "pairs", i, "draft")
        t, d = model_of(catalog, target), model_of(catalog, draft)
        problem = pairing_problem(t, d, cfg.allow_cross_tokenizer)
        if problem:
            raise SweepConfigError(
                f"{doc.where('pairs', i)}: {problem}; set allow_cross_tokenizer: true to pair them"
            )
        if not draft_is_smaller(t, d):
            notes.append(
                f"{doc.where('pairs', i)}: draft {draft} is not smaller than {target}; kept, "
                "as listed"
            )
        alphas = None
        if pair.acceptance_rates is not None:
            alphas = alpha_axis(
                doc, axis_values(pair.acceptance_rates), "pairs", i, "acceptance_rates"
            )
        if pair.acceptance_profile is not None:
            profiles[(target, draft)] = tuple(pair.acceptance_profile)
        pairs[(target, draft)] = alphas
    return pairs


def _paired_names(
    cfg: SweepConfig,
    doc: YamlDocument,
    catalog: Catalog,
    skipped: dict[str, int],
    notes: list[str],
    profiles: dict[tuple[str, str], tuple[float, ...]],
) -> dict[tuple[str, str], tuple[float, ...] | None]:
    pairs = _explicit_pairs(cfg, doc, catalog, notes, profiles)
    targets = unique(
        model_key(doc, catalog, n, "targets", i) for i, n in first_occurrences(cfg.targets)
    )
    drafts = unique(
        model_key(doc, catalog, n, "drafts", i) for i, n in first_occurrences(cfg.drafts)
    )
    for target, draft in product(targets, drafts):
        t, d = model_of(catalog, target), model_of(catalog, draft)
        if pairing_problem(t, d, cfg.allow_cross_tokenizer):
            count_skipped(skipped, "pairs with another tokenizer")
        elif not draft_is_smaller(t, d):
            count_skipped(skipped, "drafts not smaller than their target")
        else:
            pairs.setdefault((target, draft), None)
    if cfg.methods is not None:
        pairs = _by_method(cfg.methods, targets, pairs, catalog, skipped)
    if not pairs:
        raise SweepConfigError(
            f"{doc.path}: no (target, draft) pair is left after the pairing "
            "rule (same tokenizer family, draft smaller than target)"
        )
    return pairs


def _by_method(
    methods: list[str],
    targets: list[str],
    pairs: dict[tuple[str, str], tuple[float, ...] | None],
    catalog: Catalog,
    skipped: dict[str, int],
) -> dict[tuple[str, str], tuple[float, ...] | None]:
    """The pairs of the methods asked: each target gains the catalog's published drafter of
    every head method (n-gram: the lookup), and pairs of other methods are dropped."""
    out = dict(pairs)
    for target in targets:
        for name in methods:
            method = get_method(name)
            if method.speculator is None:
                continue
            try:
                head = published_head(model_of(catalog, target), method, catalog)
            except InfersizeError:
                count_skipped(skipped, f"targets without a published {name} drafter")
                continue
            out.setdefault((target, head.id), None)
    kept = {
        pair: alphas
        for pair, alphas in out.items()
        if method_of(model_of(catalog, pair[1])).name in methods
    }
    count_skipped(skipped, "pairs of methods not asked", len(out) - len(kept))
    return kept


def resolve_pairs(
    cfg: SweepConfig,
    doc: YamlDocument,
    catalog: Catalog,
    skipped: dict[str, int],
    notes: list[str],
) -> list[Pair]:
    """Every pair with its α in each scenario: its own list, else the sweep's what-if list,
    else the acceptance catalog (published figures or the prior: low, expected, high). Every
    pair must have the same number of scenarios: rows are compared scenario by scenario."""
    uniform = None
    if cfg.acceptance_rates is not None:
        uniform = alpha_axis(doc, axis_values(cfg.acceptance_rates), "acceptance_rates")
    pairs = []
    profiles: dict[tuple[str, str], tuple[float, ...]] = {}
    for (target, draft), own in _paired_names(cfg, doc, catalog, skipped, notes, profiles).items():
        if (target, draft) in profiles:
            pairs.append(
                Pair(
                    target=target,
                    draft=draft,
                    alphas=(),
                    alpha_source="profile",
                    profile=profiles[(target, draft)],
                )
            )
        elif own is not None:
            pairs.append(Pair(target=target, draft=draft, alphas=own, alpha_source="pair"))
        elif uniform is not None:
            pairs.append(Pair(target=target, draft=draft, alphas=uniform, alpha_source="sweep"))
        else:
            known = _catalog_acceptance(cfg, doc, catalog, target, draft, cfg.workload_kind)
            by_kind = tuple(
                (kind, _catalog_acceptance(cfg, doc, catalog, target, draft, kind).scenarios)
                for kind in _workload_kinds(cfg)
            )
            pairs.append(
                Pair(
                    target=target,
                    draft=draft,
                    alphas=known.scenarios,
                    alpha_source=known.source,
                    profile=known.profile,
                    positions=known.positions,
                    kind_alphas=by_kind,
                )
            )
    pairs = _fill_profile_scenarios(pairs)
    counts = {len(p.alphas) for p in pairs}
    if len(counts) > 1:
        raise SweepConfigError(
            f"{doc.path}: pairs have {' and '.join(str(n) for n in sorted(counts))} acceptance "
            "rates: every pair needs the same number of scenarios, compared position by position"
        )
    return pairs


def _workload_kinds(cfg: SweepConfig) -> list[str]:
    """The kinds of traffic the capacity workloads declare beyond the sweep's own."""
    kinds = [w.kind for w in cfg.workloads or () if w.kind and w.kind != cfg.workload_kind]
    return unique(kinds)


def _catalog_acceptance(
    cfg: SweepConfig,
    doc: YamlDocument,
    catalog: Catalog,
    target: str,
    draft: str,
    kind: str | None,
) -> PairAcceptance:
    """The pair's α from the acceptance catalog on `kind` of traffic, or a one-line error
    naming the pair and what would settle it."""
    try:
        return pair_acceptance(model_of(catalog, target), model_of(catalog, draft), catalog, kind)
    except InfersizeError as exc:
        raise exc.inside(
            SweepConfigError,
            f"{doc.path}: ({target}, {draft}): ",
            "; in a sweep, give the pair its acceptance_rates under pairs, or acceptance_rates "
            "for every pair",
        ) from None


def _fill_profile_scenarios(pairs: list[Pair]) -> list[Pair]:
    """A measured profile is one answer, the same in every acceptance scenario; its α is the
    i.i.d. rate with the same mean acceptance length at the profile's K (for the tables)."""
    scenarios = max((len(p.alphas) for p in pairs if p.profile is None), default=1)
    out = []
    for p in pairs:
        if p.profile is not None:
            k = len(p.profile)
            e = expected_tokens_profile(p.profile, [k])[0]
            alpha = round(float(alpha_for_expected_tokens(e, k)), 4)
            p = Pair(
                target=p.target,
                draft=p.draft,
                alphas=(alpha,) * scenarios,
                alpha_source=p.alpha_source,
                profile=p.profile,
                positions=p.positions,
            )
        out.append(p)
    return out


def count_skipped(skipped: dict[str, int], reason: str, n: int = 1) -> None:
    if n:
        skipped[reason] = skipped.get(reason, 0) + n
