"""`infersize schedule`: which draft length K at each batch size, as the engine's configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from infersize.cli import options as opt
from infersize.cli.app import command_app, print_json
from infersize.cli.knob_options import with_engine_knobs
from infersize.cli.spec import draft_is_none, request_of
from infersize.defaults import DEFAULTS
from infersize.errors import InfersizeError

MaxBatch = Annotated[
    int | None,
    typer.Option(
        "--max-batch",
        help="The largest batch the table covers (default: the most sequences the engine runs "
        "at once: vLLM's max_num_seqs, TensorRT-LLM's max_batch_size, SGLang's "
        "max_running_requests, as infersize's engine presets give them).",
    ),
]
ConfigOut = Annotated[
    Path | None,
    typer.Option(
        "--out",
        "-o",
        help="Write the engine's configuration to FILE: JSON for vLLM, YAML for TensorRT-LLM, "
        "the flags for SGLang (a file that is not one infersize wrote is never replaced).",
    ),
]
Plot = Annotated[
    Path | None,
    typer.Option("--plot", help="Also draw K and speedup against batch size (.png or .svg)."),
]


schedule_app = command_app("schedule")


@schedule_app.command(
    epilog="Example: infersize schedule --target llama-3.1-70b --target-quant fp8 --draft "
    "llama-3.2-1b --gpu h100 --tp 2 --engine trtllm --context-length 1024"
)
@with_engine_knobs
def schedule(
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
    acceptance_positions: opt.AcceptancePositions = None,
    workload_kind: opt.WorkloadKind = None,
    kv_dtype: opt.KvDtype = DEFAULTS.kv_dtype,
    tp: opt.Tp = DEFAULTS.tp,
    engine: opt.Engine = DEFAULTS.schedule_engine,
    max_k: opt.MaxK = DEFAULTS.max_k,
    max_batch: MaxBatch = None,
    allow_cross_tokenizer: opt.AllowCrossTokenizer = False,
    catalog: opt.CatalogFiles = None,
    out: ConfigOut = None,
    plot: Plot = None,
    as_json: opt.Json = False,
    *,
    engine_knobs: dict[str, Any],
) -> None:
    """The draft length K for each batch size, as vLLM (num_speculative_tokens_per_batch_size)
    and TensorRT-LLM (draft_len_schedule) switch it at run time: ranges of batch sizes and
    their K, each with its TPOT, output tokens/s and speedup beside the one best static K,
    and the engine's configuration to paste. A schedule that beats the static K by less than
    running with one costs the engine is not emitted (config holds the static K); SGLang has
    no such switch and gets the static K's flags."""
    from infersize.catalog.store import load_catalog
    from infersize.service.schedule import run_schedule

    result = run_schedule(_request(locals()), load_catalog(tuple(catalog or ())))
    _answer(result, out, plot, as_json)


def _answer(result: Any, out: Path | None, plot: Path | None, as_json: bool) -> None:
    """The configuration to --out, the figure to --plot, then the JSON or the panel."""
    if out is not None:
        _write(result, out)
    if plot is not None:
        from infersize.show.figures import save
        from infersize.show.schedule_figure import schedule_figure

        if result.curve is None:
            raise InfersizeError("--plot draws the schedule, and nothing fits to schedule")
        save(schedule_figure(result), plot)
    if as_json:
        from infersize.service.schedule import schedule_json

        print_json(schedule_json(result))
        return
    from infersize.show.schedule_panel import render_schedule
    from infersize.show.terminal import console

    render_schedule(console(), result)


def _request(options: dict[str, Any]) -> Any:
    """The ScheduleRequest: spec's request at K = 1 (the schedule searches K itself)."""
    from infersize.service.schedule import ScheduleRequest

    no_draft = draft_is_none(options["draft"], options["method"])
    spec = request_of(options | {"draft_k": 1}, no_draft)
    return ScheduleRequest(spec=spec, max_batch=options["max_batch"])


def _write(result: Any, out: Path) -> None:
    """The engine's configuration to `out` (none to write where no K pays)."""
    from infersize.show.engine_config import save_config

    if result.config is None:
        why = "no K pays at any batch" if result.buckets else "nothing fits to schedule"
        raise InfersizeError(f"{out}: nothing written, {why}")
    save_config(result.engine, result.config, out)
