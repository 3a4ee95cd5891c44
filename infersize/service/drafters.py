"""The drafters the catalog has for a target, as `--draft auto` ranks them: every separate draft
model the pairing rule allows (same tokenizer, smaller than the target) at each precision of
DEFAULTS.draft_auto_quants the GPU runs under the engine, the published head of every head
method (EAGLE, EAGLE-3, MTP, Medusa, MLP speculator), and n-gram lookup where the workload's kind
says how much its answers repeat their prompts. `spec` ranks them by speedup
(service/spec_drafters.py), `capacity` by GPUs and dollars at the load
(service/capacity/drafters.py)."""

from __future__ import annotations

import dataclasses

from infersize.catalog.sources import resolve_model
from infersize.catalog.store import Catalog
from infersize.core.deployment import draft_is_smaller, pairing_problem
from infersize.core.engines import configure_engine
from infersize.core.methods import METHODS
from infersize.defaults import DEFAULTS
from infersize.errors import InfersizeError
from infersize.record import record
from infersize.service.request import SpecRequest
from infersize.service.resolve import published_head

AUTO = "auto"  # the --draft value that asks for the ranking


@record
class Drafter:
    """One candidate: a speculative method, its drafter's catalog id and precision."""

    method: str
    drafter: str
    draft_quant: str


def asks_ranking(draft: str | None) -> bool:
    """Whether a --draft value asks for every drafter of the catalog, ranked."""
    return draft is not None and draft.strip().lower() == AUTO


def check_ranking_request(req: SpecRequest) -> None:
    """Each drafter is ranked at its own acceptance (published for the pair, else the prior):
    one α given for all of them would rank them on a number that belongs to none."""
    given = (req.acceptance_rate, req.acceptance_rates, req.acceptance_length)
    if any(value is not None for value in given) or req.deployment.method is not None:
        raise InfersizeError(
            "{draft} auto ranks every drafter at its own published acceptance: drop "
            "{acceptance_rate}, {acceptance_rates}, {acceptance_length} and {method} (or name "
            "one drafter)",
            settings=(
                "draft",
                "acceptance_rate",
                "acceptance_rates",
                "acceptance_length",
                "method",
            ),
        )


def catalog_drafters(req: SpecRequest, catalog: Catalog) -> tuple[list[Drafter], list[str]]:
    """The candidates for the request's target, and notes on those left out."""
    dep = req.deployment
    target = resolve_model(dep.target, catalog).model
    gpu = catalog.gpu(dep.gpu)
    family = configure_engine(req.engine).support_family
    drafters: list[Drafter] = []
    for model in sorted(catalog.models.records.values(), key=lambda m: m.id):
        if model.speculator is not None or not draft_is_smaller(target, model):
            continue
        if pairing_problem(target, model, dep.allow_cross_tokenizer):
            continue
        for quant in DEFAULTS.draft_auto_quants:
            if catalog.support(quant, gpu, family).level != "unsupported":
                drafters.append(Drafter(method="draft", drafter=model.id, draft_quant=quant))
    notes = []
    for method in METHODS.values():
        if method.speculator is None:
            continue
        if method.speculator == "ngram" and req.workload_kind is None:
            notes.append(
                "n-gram lookup left out: its acceptance is how much the answers repeat their "
                "prompts: give --workload-kind"
            )
            continue
        try:
            head = published_head(target, method, catalog)
        except InfersizeError:
            continue  # no head of this method for the target
        drafters.append(Drafter(method=method.name, drafter=head.id, draft_quant=dep.draft_quant))
    return drafters, notes


def with_drafter(req: SpecRequest, drafter: Drafter) -> SpecRequest:
    """The request with `drafter` as its draft."""
    deployment = dataclasses.replace(
        req.deployment, draft=drafter.drafter, draft_quant=drafter.draft_quant, method=None
    )
    return dataclasses.replace(req, deployment=deployment)
