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


def print_best(
    console: Console,
    out_dir: Path,
    gpu: str | None = None,
    target: str | None = None,
    alpha: float | None = None,
    context: int | None = None,
    batch: int | None = None,
    as_json: bool = False,
    rank: int = 1,
) -> None:
    from infersize.show.terminal import BEST_COLUMNS, best_rows, render_table
    from infersize.sweep.best import best_pairs

    frame, chosen = best_pairs(out_dir, gpu, target, alpha, context, batch, rank)
    if as_json:
        selection = {} if chosen is None else chosen.as_dict()
        typer.echo(json.dumps({"selection": selection, "rows": frame.to_dicts()}, indent=2))
        return
    if chosen is None or frame.is_empty():
        typer.echo("no fitting draft pair in this selection")
        return
    title = (
        f"Best draft pair per GPU at context {chosen.context_length}, batch "
        f"{chosen.batch_size}, α {chosen.acceptance_rate:g}"
    )
    rows = best_rows(frame.to_dicts())
    if rank > 1:
        rows = [[str(r), *row] for r, row in zip(frame["rank"], rows, strict=True)]
    render_table(console, title, BEST_COLUMNS if rank == 1 else ["rank", *BEST_COLUMNS], rows)


@app.command("best")
def best(
    output_dir: opt.OutputDir,
    gpu: Annotated[
        str | None, typer.Option("--gpu", help="Only this GPU (id as in the tables).")
    ] = None,
    target: Annotated[str | None, typer.Option("--target", help="Only this target model.")] = None,
    alpha: Annotated[
        float | None, typer.Option("--alpha", help="Acceptance rate (default: nearest 0.7).")
    ] = None,
    context: Annotated[
        int | None, typer.Option("--context-length", help="Default: the smallest swept.")
    ] = None,
    batch: Annotated[
        int | None, typer.Option("--batch-size", help="Default: the smallest swept.")
    ] = None,
    top: Annotated[int, typer.Option("--top", help="Show the top N ranks.")] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The best draft pair per GPU (and target), from a sweep's tables."""
    from infersize.show.terminal import console

    print_best(console(), output_dir, gpu, target, alpha, context, batch, as_json, top)
