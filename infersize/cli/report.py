"""`infersize report`: one self-contained HTML file of a sweep's answers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from infersize.cli import options as opt
from infersize.cli.app import app
from infersize.errors import InfersizeError


@app.command("report", epilog="Example: infersize report outputs/quickstart")
def report(
    output_dir: opt.OutputDir,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="HTML file (default OUTPUT_DIR/report.html)."),
    ] = None,
) -> None:
    """One self-contained HTML report (best pairs per GPU, frontier figures inline)."""
    from infersize.files import atomic_write
    from infersize.show.html import GpuSection, render_report
    from infersize.sweep.best import Filters, best_pairs, frontier_rows, read_manifest, read_table

    manifest = read_manifest(output_dir)
    answer = best_pairs(output_dir, Filters())
    selection = answer.selection
    sections = []
    if selection is not None:
        table = read_table(output_dir, "frontier")  # once, for every GPU's section
        for (gpu,), rows in answer.rows.group_by(["gpu"], maintain_order=True):
            frontier = frontier_rows(output_dir, str(gpu), selection, table)
            sections.append(GpuSection(str(gpu), rows, frontier))
    chosen = "no fitting pair" if selection is None else selection.describe()
    target = out or output_dir / "report.html"
    try:
        atomic_write(target, render_report(manifest, sections, chosen))
    except OSError as exc:
        raise InfersizeError(f"{target}: cannot write ({exc.strerror})") from None
    typer.echo(str(target))
