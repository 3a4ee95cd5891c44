"""`infersize bench`: the sweep engine against a plain-Python per-cell loop."""

from __future__ import annotations

from typing import Annotated

import typer

from infersize.cli.app import command_app
from infersize.errors import InfersizeError

bench_app = command_app("bench")


@bench_app.command(epilog="Example: infersize bench --loop-cells 1000")
def bench(
    loop_cells: Annotated[
        int, typer.Option("--loop-cells", help="Cells timed in the Python loop.")
    ] = 3000,
) -> None:
    """Cells/s of a sweep end to end against a plain-Python loop over the same functions."""
    if loop_cells < 1:
        raise InfersizeError(f"--loop-cells must be at least 1, got {loop_cells}")
    from infersize.sweep.bench import run_bench

    result = run_bench(loop_cells)
    typer.echo(
        f"sweep end to end (plan, score, reduce, write tables; --jobs 1): "
        f"{result.engine_cells:,} cells in {result.engine_s:.3f} s (median) = "
        f"{result.engine_rate:,.0f} cells/s"
    )
    typer.echo(
        f"plain Python loop, the core functions once per cell (no tables): "
        f"{result.loop_cells:,} cells in {result.loop_s:.3f} s (its best run) = "
        f"{result.loop_rate:,.0f} cells/s"
    )
    typer.echo(f"ratio (end to end over the loop's best): {result.ratio:,.0f}x")
