"""`infersize capacity`: GPUs for a load at a latency SLA, with and without speculation."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from infersize.cli import options as opt
from infersize.cli import serving_options as serving
from infersize.cli.app import command_app, print_json
from infersize.cli.knob_options import with_engine_knobs
from infersize.defaults import DEFAULTS
from infersize.errors import InfersizeError

DraftKOrAuto = Annotated[
    str,
    typer.Option(
        "--draft-k",
        "--speculative-num-steps",
        help="K: draft tokens per step, or auto: the K that serves the load best (0: no "
        "speculation).",
    ),
]
Plot = Annotated[
    Path | None,
    typer.Option("--plot", help="Also draw p50/p99 TTFT and TPOT vs request rate (.png, .svg)."),
]


capacity_app = command_app("capacity")


@capacity_app.command(
    epilog="Example: infersize capacity --target llama-3.1-70b --target-quant fp8 --draft "
    "llama-3.2-1b --gpu h100 --tp 2 --engine vllm --input-tokens 1024 --output-tokens 256 "
    '--request-rate 2 --sla "ttft:p99<=2000ms;tpot:p99<=50ms" --target-request-rate 20'
)
@with_engine_knobs
def capacity(
    target: opt.Target,
    gpu: opt.Gpu,
    draft: opt.OptionalDraft = None,
    method: opt.Method = None,
    target_quant: opt.TargetQuant = DEFAULTS.target_quant,
    draft_quant: opt.DraftQuant = DEFAULTS.draft_quant,
    kv_dtype: opt.KvDtype = DEFAULTS.kv_dtype,
    tp: serving.TpOrAuto = str(DEFAULTS.tp),
    engine: serving.CapacityEngine = None,
    draft_k: DraftKOrAuto = str(DEFAULTS.draft_k),
    eagle_topk: opt.EagleTopk = DEFAULTS.eagle_topk,
    num_draft_tokens: opt.NumDraftTokens = None,
    acceptance_rate: opt.AcceptanceRate = None,
    acceptance_rates: opt.AcceptanceRates = None,
    acceptance_length: opt.AcceptanceLength = None,
    max_k: opt.MaxK = DEFAULTS.max_k,
    workload_kind: opt.WorkloadKind = None,
    input_tokens: serving.InputTokens = None,
    output_tokens: serving.OutputTokens = None,
    lengths: serving.LengthsFile = None,
    request_rate: serving.RequestRate = None,
    concurrency: serving.Concurrency = None,
    arrival: serving.Arrival = DEFAULTS.arrival,
    sla: serving.Sla = None,
    target_request_rate: serving.TargetRequestRate = None,
    headroom: serving.Headroom = DEFAULTS.headroom,
    requests: serving.Requests = DEFAULTS.capacity_requests,
    replications: serving.Replications = DEFAULTS.capacity_replications,
    seed: serving.Seed = DEFAULTS.seed,
    price_usd_per_hour: opt.Price = None,
    allow_cross_tokenizer: opt.AllowCrossTokenizer = False,
    k_schedule: serving.KSchedule = None,
    plot: Plot = None,
    catalog: opt.CatalogFiles = None,
    as_json: opt.Json = False,
    *,
    engine_knobs: dict[str, Any],
) -> None:
    """GPUs a load needs at a latency SLA, with and without speculative decoding: both arms
    served step by step as the engine schedules them (within its own token budget,
    running-sequence limit and KV pool), their p50/p99 TTFT and TPOT at the load, the highest
    request rate per replica that meets the SLA with its 95 % range, and the replicas for a
    target rate (alone, it is also the load: each replica's share of it)."""
    _answer(_capacity_request(locals()), catalog, plot, as_json)


def _answer(request: Any, catalog: list[Path] | None, plot: Path | None, as_json: bool) -> None:
    """Serve the request and show the answer: a panel, or JSON, and the figure if asked."""
    from infersize.catalog.store import load_catalog
    from infersize.service.capacity.layouts import run_capacity_tp_auto
    from infersize.service.capacity.result import capacity_json, run_capacity

    catalogs = load_catalog(tuple(catalog or ()))
    if _ranks(request):
        _answer_ranking(request, catalogs, plot, as_json)
        return
    if request.k_schedule is not None:
        from infersize.service.capacity.kschedule import run_capacity_k_schedule

        result = run_capacity_k_schedule(request, request.k_schedule, catalogs)
    else:
        serve = run_capacity_tp_auto if request.tp_auto else run_capacity
        result = serve(request, catalogs)
    if plot is not None:
        _draw(request, catalogs, result, plot)
    if as_json:
        print_json(capacity_json(result))
        return
    from infersize.show.capacity_panel import render_capacity
    from infersize.show.terminal import console

    render_capacity(console(), result)


def _ranks(request: Any) -> bool:
    from infersize.service.drafters import asks_ranking

    return asks_ranking(request.spec.deployment.draft)


def _answer_ranking(request: Any, catalogs: Any, plot: Path | None, as_json: bool) -> None:
    """--draft auto: every drafter ranked, then the winner's own answer."""
    from infersize.service.capacity.drafters import candidate_json, rank_capacity_drafters
    from infersize.service.capacity.result import capacity_json

    ranking = rank_capacity_drafters(request, catalogs)
    best = ranking.candidates[0]
    assert best.result is not None  # rank_capacity_drafters refuses a load none can serve
    rows = [candidate_json(c, why) for c, why in zip(ranking.candidates, ranking.why, strict=True)]
    if plot is not None:
        from infersize.service.capacity.drafters import drafter_request

        _draw(drafter_request(request, best.drafter), catalogs, best.result, plot)
    if as_json:
        data = capacity_json(best.result)
        data["candidates"] = rows
        data["notes"] = data["notes"] + list(ranking.notes)
        print_json(data)
        return
    from infersize.show.capacity_panel import render_capacity
    from infersize.show.draft_ranking import render_candidates
    from infersize.show.terminal import console

    render_candidates(console(), rows, ranking.notes, by="GPUs, $/hour, requests/s")
    render_capacity(console(), best.result)


def _draw(request: Any, catalogs: Any, result: Any, plot: Path) -> None:
    """The capacity figure of `result` (both arms' curves over the request rate) to `plot`."""
    from infersize.service.capacity.curves import capacity_curves
    from infersize.show.capacity_figure import capacity_figure
    from infersize.show.figures import save

    k = None if result.speculative is None else result.speculative.draft_k
    save(capacity_figure(capacity_curves(request, catalogs, k), result), plot)


def _capacity_request(options: dict[str, Any]) -> Any:
    """The CapacityRequest the options describe (one-line errors for what does not go)."""
    from infersize.core.serving.sla import parse_sla
    from infersize.core.serving.traffic import parse_arrival
    from infersize.service.capacity.request import CapacityRequest, Traffic

    if options["draft"] is None and options["method"] is None:
        raise InfersizeError(
            "missing option '--draft' (a draft model, a head, or none; or give --method)"
        )
    no_draft = options["draft"] is not None and options["draft"].strip().lower() == "none"
    auto, draft_k = _draft_k(options["draft_k"])
    # --draft auto: each drafter at the K that serves the load best
    auto = auto or (options["draft"] is not None and options["draft"].strip().lower() == "auto")
    tp_auto, tp = _tp(options["tp"])
    if options["target_request_rate"] is not None and options["sla"] is None:
        raise InfersizeError(
            "--target-request-rate needs --sla: the latency target decides what one replica "
            "serves, and so how many it takes"
        )
    inputs, outputs = _lengths(options)
    if options["acceptance_length"] is not None and auto:
        raise InfersizeError(
            "--acceptance-length is measured at one K: give that K with --draft-k, or turn "
            "it into α with 'infersize alpha --mean-accepted-tokens E --draft-k K'"
        )
    spec = opt.spec_request(
        options
        | {
            "draft": None if no_draft else options["draft"],
            "tp": tp,
            "engine": options["engine"] or DEFAULTS.capacity_engine,
            # auto: K is chosen in 1..--max-k; a K given raises --max-k to itself
            "draft_k": max(min(draft_k, options["max_k"]) if auto else draft_k, 1),
            "max_k": options["max_k"] if auto else max(options["max_k"], draft_k),
            "context_length": max(i + o for i, o in zip(inputs, outputs, strict=True)),
        }
    )
    traffic = Traffic(
        input_tokens=inputs,
        output_tokens=outputs,
        lengths_file=_name(options["lengths"]),
        request_rate=options["request_rate"],
        concurrency=options["concurrency"],
        arrival=parse_arrival(options["arrival"]),
        requests=options["requests"],
        seed=options["seed"],
    )
    return CapacityRequest(
        spec=spec,
        draft_k_auto=auto,
        traffic=traffic,
        sla=None if options["sla"] is None else parse_sla(options["sla"]),
        target_request_rate=options["target_request_rate"],
        headroom=options["headroom"],
        replications=options["replications"],
        tp_auto=tp_auto,
        engine_by_default=options["engine"] is None,
        k_schedule=_k_schedule(options, tp_auto),
    )


def _k_schedule(options: dict[str, Any], tp_auto: bool) -> str | None:
    """--k-schedule, where it goes with the rest."""
    given = options["k_schedule"]
    if given is None:
        return None
    if options["draft"] is not None and options["draft"].strip().lower() == "auto":
        raise InfersizeError("--k-schedule serves one drafter: name it, not --draft auto")
    if tp_auto:
        raise InfersizeError("--k-schedule serves one layout: give --tp N, not auto")
    return str(given)


def _name(path: Path | None) -> str | None:
    return None if path is None else str(path)


def _draft_k(text: str) -> tuple[bool, int]:
    """(auto, K) from --draft-k."""
    if text.strip().lower() == "auto":
        return True, DEFAULTS.draft_k
    try:
        k = int(text)
    except ValueError:
        raise InfersizeError(
            f"--draft-k takes a number of draft tokens or auto, got '{text}'"
        ) from None
    if k < 1:
        raise InfersizeError(f"--draft-k must be at least 1 (or auto), got {k}")
    return False, k


def _tp(text: str) -> tuple[bool, int]:
    """(auto, TP) from --tp."""
    if text.strip().lower() == "auto":
        return True, DEFAULTS.tp
    try:
        tp = int(text)
    except ValueError:
        raise InfersizeError(f"--tp takes a number of GPUs or auto, got '{text}'") from None
    if tp < 1:
        raise InfersizeError(f"--tp must be at least 1 (or auto), got {tp}")
    return False, tp


def _lengths(options: dict[str, Any]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    given = options["input_tokens"] is not None or options["output_tokens"] is not None
    if options["lengths"] is not None:
        if given:
            raise InfersizeError("give --lengths or --input-tokens/--output-tokens, not both")
        from infersize.sweep.lengths import read_lengths

        return read_lengths(options["lengths"])
    if options["input_tokens"] is None or options["output_tokens"] is None:
        raise InfersizeError(
            "the workload needs --input-tokens and --output-tokens (or --lengths FILE)"
        )
    for name in ("input_tokens", "output_tokens"):
        if options[name] < 1:
            raise InfersizeError(
                f"--{name.replace('_', '-')} must be at least 1, got {options[name]}"
            )
    return (options["input_tokens"],), (options["output_tokens"],)
