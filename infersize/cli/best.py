"""`infersize best`: the best draft pair per GPU (and target), from a sweep's tables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer

from infersize.bounds import BEST_TOP_N
from infersize.cli import options as opt
from infersize.cli.app import command_app
from infersize.errors import InfersizeError

if TYPE_CHECKING:
    from rich.console import Console

    from infersize.sweep.best import Filters


def print_best(
    console: Console, out_dir: Path, filters: Filters, as_json: bool = False, rank: int = 1
) -> None:
    from infersize.show.terminal import BEST_COLUMNS, best_rows, render_table
    from infersize.sweep.best import best_pairs

    answer = best_pairs(out_dir, filters, rank)
    frame, chosen = answer.rows, answer.selection
    if as_json:
        selection = {} if chosen is None else chosen.as_dict()
        typer.echo(
            json.dumps(
                {"selection": selection, "rows": frame.to_dicts(), "notes": answer.notes},
                indent=2,
            )
        )
        return
    if chosen is None or frame.is_empty():
        typer.echo("no fitting draft pair in this selection")
        for note in answer.notes:
            typer.echo(f"note: {note}")
        return
    title = f"Best draft pair per GPU at {chosen.describe()}"
    rows = best_rows(frame.to_dicts())
    if rank > 1:
        rows = [[str(r), *row] for r, row in zip(frame["rank"], rows, strict=True)]
    render_table(console, title, BEST_COLUMNS if rank == 1 else ["rank", *BEST_COLUMNS], rows)
    for note in answer.notes:
        typer.echo(f"note: {note}")


Top = Annotated[
    int,
    typer.Option(
        "--top",
        help=f"Show the top N ranks ({BEST_TOP_N.range_text()}).",
        **BEST_TOP_N.cli_bounds(),
    ),
]


best_app = command_app("best")


@best_app.command("best", epilog="Example: infersize best outputs/quickstart --gpu h100 --top 3")
def best(
    output_dir: opt.OutputDir,
    gpu: opt.GpuFilter = None,
    target: opt.TargetFilter = None,
    tp: Annotated[int | None, typer.Option("--tp", help="Only this tensor-parallel size.")] = None,
    target_quant: Annotated[
        str | None, typer.Option("--target-quant", help="Only this target precision.")
    ] = None,
    draft_quant: Annotated[
        str | None, typer.Option("--draft-quant", help="Only this draft precision.")
    ] = None,
    engine: opt.EngineFilter = None,
    context: opt.SliceContext = None,
    batch: opt.SliceBatch = None,
    alpha: opt.SliceAlpha = None,
    scenario: opt.SliceScenario = None,
    top: Top = 1,
    request_rate: Annotated[
        float | None,
        typer.Option(
            "--request-rate",
            help="A load in requests/s: per GPU type, the fewest GPUs that serve it at --sla, "
            "with and without speculation (a sweep with workloads and slas).",
        ),
    ] = None,
    sla: Annotated[
        str | None, typer.Option("--sla", help="With --request-rate: the SLA's name in the sweep.")
    ] = None,
    workload: Annotated[
        str | None,
        typer.Option("--workload", help="With --request-rate: the workload's name in the sweep."),
    ] = None,
    by: Annotated[
        str, typer.Option("--by", help="With --request-rate: rank by gpus or by cost ($/hour).")
    ] = "gpus",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The best draft pair per GPU (and target), from a sweep's tables; with --request-rate,
    the fewest GPUs (or dollars) per GPU type that serve the load at an SLA."""
    from infersize.show.terminal import console
    from infersize.sweep.best import Filters

    if request_rate is not None or sla is not None or workload is not None:
        _print_fleet(output_dir, locals(), as_json)
        return
    filters = Filters(
        gpu=gpu,
        target=target,
        tp=tp,
        target_quant=target_quant,
        draft_quant=draft_quant,
        engine=engine,
        context_length=context,
        batch_size=batch,
        alpha=alpha,
        scenario=scenario,
    )
    print_best(console(), output_dir, filters, as_json, top)


def _print_fleet(out_dir: Path, options: dict[str, object], as_json: bool) -> None:
    """`best --request-rate R --sla NAME`: the fewest GPUs per GPU type for the load."""
    from infersize.show.capacity_panel import FLEET_COLUMNS, fleet_rows
    from infersize.show.terminal import console, render_table
    from infersize.sweep.capacity.best import FleetAsk, fewest_gpus

    decode_only = ("tp", "target_quant", "draft_quant", "engine", "context", "batch", "alpha")
    given = [name for name in decode_only if options[name] is not None]
    if given:
        flags = ", ".join(
            "--" + {"context": "context-length", "batch": "batch-size"}.get(n, n).replace("_", "-")
            for n in given
        )
        raise InfersizeError(f"{flags} selects decode tables, not --request-rate")
    rate, sla = options["request_rate"], options["sla"]
    if not isinstance(rate, float) or not isinstance(sla, str):
        raise InfersizeError("--request-rate and --sla go together (and --workload)")
    ask = FleetAsk(
        request_rate=rate,
        sla=sla,
        workload=cast("str | None", options["workload"]),
        by=cast(str, options["by"]),
        scenario=cast("int | None", options["scenario"]),
        gpu=cast("str | None", options["gpu"]),
        target=cast("str | None", options["target"]),
    )
    answer = fewest_gpus(out_dir, ask)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "request_rate": rate,
                    "sla": sla,
                    "workload": answer.workload,
                    "target": answer.target,
                    "by": ask.by,
                    "acceptance_scenario": answer.scenario,
                    "rows": answer.rows,
                    "notes": answer.notes,
                },
                indent=2,
            )
        )
        return
    fewest = "GPUs" if ask.by == "gpus" else "dollars"
    title = f"Fewest {fewest} per GPU type for {answer.target}: {answer.notes[0]}"
    render_table(console(), title, FLEET_COLUMNS, fleet_rows(answer.rows))
    for note in answer.notes[1:]:
        typer.echo(f"note: {note}")
