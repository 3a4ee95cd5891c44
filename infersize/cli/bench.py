"""`infersize bench`: the sweep engine against a plain-Python per-cell loop."""

from __future__ import annotations

from typing import Annotated

import typer

from infersize.cli.app import app
from infersize.errors import InfersizeError


@app.command()
def bench(
    loop_cells: Annotated[
        int, typer.Option("--loop-cells", help="Cells timed in the Python loop.")
    ] = 3000,
) -> None:
    """Cells/s of the sweep engine against a plain-Python per-cell loop (same formulas)."""
    if loop_cells < 1:
        raise InfersizeError(f"--loop-cells must be at least 1, got {loop_cells}")
    from infersize.sweep.bench import run_bench

    result = run_bench(loop_cells)
    typer.echo(
        f"engine (numpy, chunked, with frontier/best reduction): {result.engine_cells:,} "
        f"cells in {result.engine_s:.3f} s = {result.engine_rate:,.0f} cells/s"
    )
    typer.echo(
        f"plain Python loop over the same core functions: {result.loop_cells:,} cells "
        f"in {result.loop_s:.3f} s = {result.loop_rate:,.0f} cells/s"
    )
    typer.echo(f"ratio: {result.ratio:,.0f}x")
