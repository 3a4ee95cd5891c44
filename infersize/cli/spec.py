"""`infersize spec`: will target + draft fit, and how much faster?"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from infersize.cli import options as opt
from infersize.cli.app import command_app, print_json
from infersize.cli.knob_options import with_engine_knobs
from infersize.defaults import DEFAULTS
from infersize.errors import InfersizeError

if TYPE_CHECKING:
    from infersize.service.request import SpecRequest

Units = Annotated[str, typer.Option("--units", help="gib (2^30 bytes) or gb (10^9 bytes).")]
Plot = Annotated[Path | None, typer.Option("--plot", help="Also draw speedup vs K (.png or .svg).")]


spec_app = command_app("spec")


@spec_app.command(
    epilog="Example: infersize spec --target llama-3.1-8b --draft llama-3.2-1b --gpu h100 "
    "--engine vllm --batch-size 8"
)
@with_engine_knobs
def spec(
    target: opt.Target,
    gpu: opt.Gpu,
    draft: opt.OptionalDraft = None,
    method: opt.Method = None,
    target_quant: opt.TargetQuant = DEFAULTS.target_quant,
    draft_quant: opt.DraftQuant = DEFAULTS.draft_quant,
    context_length: opt.SpecContextLength = None,
    input_tokens: opt.SpecInputTokens = None,
    output_tokens: opt.SpecOutputTokens = None,
    acceptance_rate: opt.AcceptanceRate = None,
    acceptance_rates: opt.AcceptanceRates = None,
    acceptance_length: opt.AcceptanceLength = None,
    acceptance_positions: opt.AcceptancePositions = None,
    workload_kind: opt.WorkloadKind = None,
    draft_k: opt.DraftK = DEFAULTS.draft_k,
    eagle_topk: opt.EagleTopk = DEFAULTS.eagle_topk,
    num_draft_tokens: opt.NumDraftTokens = None,
    batch_size: opt.BatchSize = DEFAULTS.batch_size,
    kv_dtype: opt.KvDtype = DEFAULTS.kv_dtype,
    tp: opt.Tp = DEFAULTS.tp,
    engine: opt.Engine = DEFAULTS.engine,
    speedup_model: opt.SpeedupModel = None,
    latency_ratio: opt.LatencyRatio = None,
    max_k: opt.MaxK = DEFAULTS.max_k,
    price_usd_per_hour: opt.Price = None,
    allow_cross_tokenizer: opt.AllowCrossTokenizer = False,
    units: Units = DEFAULTS.units,
    plot: Plot = None,
    catalog: opt.CatalogFiles = None,
    as_json: opt.Json = False,
    *,
    engine_knobs: dict[str, Any],
) -> None:
    """Joint GPU memory of target + draft and the speculative-decoding speedup."""
    from infersize.catalog.store import load_catalog
    from infersize.service.spec import run_spec, spec_json

    request = request_of(locals(), _check_flags(units, draft, method, plot))
    catalogs = load_catalog(tuple(catalog or ()))
    if draft is not None and draft.strip().lower() == "auto":
        _rank(request, catalogs, units, as_json)
        return
    result = run_spec(request, catalogs)
    if plot is not None:
        from infersize.cli.plot import draw_spec_k_curve

        draw_spec_k_curve(request, catalogs, result, plot)
    _show(spec_json(result) if as_json else result, units)


def _rank(request: SpecRequest, catalogs: Any, units: str, as_json: bool) -> None:
    """--draft auto: every drafter of the catalog for the target, the fastest first, then the
    winner's own answer at its best K."""
    from infersize.service.spec_drafters import rank_spec_drafters, ranking_json

    ranking = rank_spec_drafters(request, catalogs)
    data = ranking_json(ranking)
    if as_json:
        print_json(data)
        return
    from infersize.show.draft_ranking import render_candidates
    from infersize.show.terminal import console

    by = "speedup at the best K that fits"
    render_candidates(console(), data["candidates"], ranking.notes, by=by)
    if ranking.best is not None:
        _show(ranking.best, units)


def _show(result: Any, units: str) -> None:
    """The JSON object, or the panel."""
    if isinstance(result, dict):
        print_json(result)
        return
    from infersize.show.spec_panel import render_spec
    from infersize.show.terminal import console

    render_spec(console(), result, units.lower())


def request_of(options: dict[str, Any], no_draft: bool) -> SpecRequest:
    """The request of a command that takes spec's options (spec, schedule), its context from
    --context-length or --input-tokens/--output-tokens."""
    from infersize.service.context import decode_context

    lengths = (options["input_tokens"], options["output_tokens"])
    return opt.spec_request(
        options
        | {
            "draft": None if no_draft else options["draft"],
            "context_length": decode_context(options["context_length"], *lengths),
            "decode_lengths": None if None in lengths else lengths,
        }
    )


def draft_is_none(draft: str | None, method: str | None) -> bool:
    """Whether --draft none asks for the target alone; one of --draft and --method is needed."""
    if draft is None and method is None:
        raise InfersizeError(
            "missing option '--draft' (a draft model, a head, or none; or give --method)"
        )
    return draft is not None and draft.strip().lower() == "none"


def _check_flags(units: str, draft: str | None, method: str | None, plot: Path | None) -> bool:
    """The flag combinations spec refuses; True when the target runs alone (--draft none)."""
    if units.lower() not in ("gib", "gb"):
        raise InfersizeError(f"--units must be gib or gb, got '{units}'")
    no_draft = draft_is_none(draft, method)
    if plot is not None and no_draft:
        raise InfersizeError("--plot draws speedup vs K, which needs a draft")
    if plot is not None and draft is not None and draft.strip().lower() == "auto":
        raise InfersizeError("--plot draws speedup vs K of one drafter: name it, not auto")
    return no_draft
