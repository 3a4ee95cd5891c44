"""`infersize report`: one self-contained HTML file of a sweep's answers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from infersize.cli import options as opt
from infersize.cli.app import command_app
from infersize.errors import InfersizeError

report_app = command_app("report")


@report_app.command(
    "report",
    epilog="Example: infersize report outputs/quickstart --context-length 4096 --batch-size 1",
)
def report(
    output_dir: opt.OutputDir,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="HTML file (default OUTPUT_DIR/report.html)."),
    ] = None,
    gpu: opt.GpuFilter = None,
    context: opt.SliceContext = None,
    batch: opt.SliceBatch = None,
    alpha: opt.SliceAlpha = None,
    scenario: opt.SliceScenario = None,
) -> None:
    """One self-contained HTML report: the best pairs per GPU at one slice of the sweep
    (context, batch, α), each with its frontier figure, and the assumptions behind them; for a
    capacity sweep, the fewest GPUs per GPU type for each workload and SLA."""
    from infersize.files import atomic_write
    from infersize.show.html import GpuSection, render_report
    from infersize.sweep.best import Filters, best_pairs, frontier_rows, read_manifest, read_table

    manifest = read_manifest(output_dir)
    filters = Filters(
        gpu=gpu, context_length=context, batch_size=batch, alpha=alpha, scenario=scenario
    )
    answer = best_pairs(output_dir, filters)
    selection = answer.selection
    sections = []
    if selection is not None:
        table = read_table(output_dir, "frontier")  # once, for every GPU's section
        # a methods axis is compared even where one method is best everywhere at this slice
        swept = read_table(output_dir, "best_pairs")
        compare = swept["method"].n_unique() > 1
        for (gpu,), rows in answer.rows.group_by(["gpu"], maintain_order=True):
            frontier = frontier_rows(output_dir, str(gpu), selection, table)
            methods = _method_curves(output_dir, filters, str(gpu), rows) if compare else {}
            sections.append(GpuSection(str(gpu), rows, frontier, methods))
    chosen = "no fitting pair" if selection is None else selection.describe()
    target = out or output_dir / "report.html"
    page = render_report(manifest, sections, chosen, _capacity(output_dir, manifest))
    try:
        atomic_write(target, page)
    except OSError as exc:
        raise InfersizeError(f"{target}: cannot write ({exc.strerror})") from None
    typer.echo(str(target))


def _method_curves(output_dir: Path, filters: Any, gpu: str, rows: Any) -> dict[str, Any]:
    """Each target's method curves on this GPU, from best_pairs (sweeps with a methods axis)."""
    from dataclasses import replace

    from infersize.sweep.methods_view import method_points

    curves = {}
    for target in rows["target"].unique(maintain_order=True).to_list():
        points = method_points(
            output_dir, replace(filters, gpu=gpu, target=target, batch_size=None)
        )
        curves[target] = {
            m: [(p.batch_size, p.speedup, p.drafter) for p in pts] for m, pts in points.items()
        }
    return curves


def _capacity(output_dir: Path, manifest: dict[str, Any]) -> str:
    """The capacity section of a capacity sweep's report (none for a decode sweep)."""
    if "capacity" not in manifest:
        return ""
    from infersize.show.capacity_report import CapacitySection, capacity_html
    from infersize.sweep.capacity.best import fleet_views

    sections = [
        CapacitySection(
            workload=view.workload,
            workload_text=view.workload_text,
            sla=view.sla,
            sla_terms=view.sla_terms,
            target=view.target,
            scenario=view.scenario,
            answers=view.answers,
            curves=view.curves,
            notes=view.notes,
        )
        for view in fleet_views(output_dir)
    ]
    return capacity_html(manifest, sections)
