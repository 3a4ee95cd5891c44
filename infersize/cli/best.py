"""`infersize best`: the best draft pair per GPU (and target), from a sweep's tables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from infersize.cli import options as opt
from infersize.cli.app import app

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
        return
    title = f"Best draft pair per GPU at {chosen.describe()}"
    rows = best_rows(frame.to_dicts())
    if rank > 1:
        rows = [[str(r), *row] for r, row in zip(frame["rank"], rows, strict=True)]
    render_table(console, title, BEST_COLUMNS if rank == 1 else ["rank", *BEST_COLUMNS], rows)
    for note in answer.notes:
        typer.echo(f"note: {note}")


@app.command("best", epilog="Example: infersize best outputs/quickstart --gpu h100 --top 3")
def best(
    output_dir: opt.OutputDir,
    gpu: opt.GpuFilter = None,
    target: Annotated[str | None, typer.Option("--target", help="Only this target model.")] = None,
    tp: Annotated[int | None, typer.Option("--tp", help="Only this tensor-parallel size.")] = None,
    target_quant: Annotated[
        str | None, typer.Option("--target-quant", help="Only this target precision.")
    ] = None,
    draft_quant: Annotated[
        str | None, typer.Option("--draft-quant", help="Only this draft precision.")
    ] = None,
    engine: Annotated[str | None, typer.Option("--engine", help="Only this engine.")] = None,
    context: opt.SliceContext = None,
    batch: opt.SliceBatch = None,
    alpha: opt.SliceAlpha = None,
    scenario: opt.SliceScenario = None,
    top: Annotated[
        int, typer.Option("--top", help="Show the top N ranks (at most 100).", min=1, max=100)
    ] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The best draft pair per GPU (and target), from a sweep's tables."""
    from infersize.show.terminal import console
    from infersize.sweep.best import Filters

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
