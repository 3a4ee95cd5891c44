"""`infersize sweep validate|run` and `infersize best`: thin commands over infersize.sweep."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from infersize.errors import InfersizeError

sweep_app = typer.Typer(
    help="Sweep a YAML grid of pairs × precisions × GPUs × ... to tables.", no_args_is_help=True
)


def _plan(path: Path, max_cells: int | None):
    from infersize.sweep.config import load_sweep
    from infersize.sweep.plan import build_plan

    config, doc = load_sweep(path)
    base = path.parent
    overlays = tuple(
        str((base / p) if not Path(p).is_absolute() else Path(p)) for p in config.catalog
    )
    plan = build_plan(config, doc, overlays)
    limit = max_cells if max_cells is not None else config.max_cells
    if plan.total_cells > limit:
        raise InfersizeError(
            f"{path}: the grid has {plan.total_cells:,} cells, over the limit of "
            f"{limit:,}; raise it with --max-cells or max_cells: in the YAML"
        )
    return config, plan


MaxCells = typer.Option(
    None,
    "--max-cells",
    help="Refuse grids larger than this (default: the YAML's max_cells, 100,000,000).",
)


@sweep_app.command("validate")
def validate(
    file: Path = typer.Argument(..., help="Sweep YAML."), max_cells: int = MaxCells
) -> None:
    """Check a sweep file and print its cell count per axis; writes nothing."""
    _config, plan = _plan(file, max_cells)
    from infersize.report import console, render_table

    counts = plan.axis_counts()
    rows = [[axis, f"{n:,}"] for axis, n in counts.items()]
    rows.append(["cells (settings × context × batch × α × K)", f"{plan.total_cells:,}"])
    rows.append(["chunks", f"{len(plan.chunks):,}"])
    render_table(console(), f"{file}: valid", ["axis", "values"], rows)
    for reason, n in plan.skipped.items():
        typer.echo(f"skipped {n:,} {reason}")


@sweep_app.command("run")
def run(
    file: Path = typer.Argument(..., help="Sweep YAML."),
    out: Path = typer.Option(
        None, "--out", help="Output folder (default: the YAML's output.dir, else outputs/<name>)."
    ),
    jobs: int = typer.Option(2, "--jobs", "-j", help="Parallel workers."),
    resume: bool = typer.Option(False, "--resume", help="Finish an interrupted run in --out."),
    backend: str = typer.Option("loky", "--backend", help="loky (this machine) or dask."),
    scheduler: str = typer.Option(None, "--scheduler", help="Dask scheduler address."),
    cells: bool = typer.Option(None, "--cells/--no-cells", help="Write the per-cell dataset."),
    max_cells: int = MaxCells,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or summary."),
) -> None:
    """Score every cell of the grid and write frontier and best-pair tables."""
    if jobs < 1:
        raise InfersizeError(f"--jobs must be at least 1, got {jobs}")
    if backend not in ("loky", "dask"):
        raise InfersizeError(f"--backend must be loky or dask, got '{backend}'")
    if scheduler is not None and backend != "dask":
        raise InfersizeError("--scheduler needs --backend dask")
    config, plan = _plan(file, max_cells)
    out_dir = out or Path(config.output.dir or Path("outputs") / config.name)
    with_cells = config.output.cells if cells is None else cells
    from infersize.report import console
    from infersize.sweep.run import run_sweep

    err = console(stderr=True, quiet=quiet)
    with _progress(err, len(plan.chunks), plan.total_cells) as advance:
        manifest = run_sweep(
            plan,
            out_dir,
            jobs=jobs,
            backend=backend,
            scheduler=scheduler,
            resume=resume,
            with_cells=with_cells,
            best_top_n=config.output.best_top_n,
            formats=tuple(config.output.formats),
            on_chunk=advance,
        )
    if not quiet:
        err.print(
            f"{manifest['cells']:,} cells in {manifest['seconds']['total']:.2f} s "
            f"({manifest['cells_per_s']:,} cells/s); frontier "
            f"{manifest['rows']['frontier']:,} rows, best_pairs "
            f"{manifest['rows']['best_pairs']:,} rows"
        )
        _print_best(console(), out_dir, None, None, None, None, None)
    typer.echo(str(out_dir))


def _progress(err, n_chunks: int, n_cells: int):
    from contextlib import contextmanager

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    @contextmanager
    def bar():
        if not err.is_terminal or err.quiet:  # logs and pipes get the summary only
            yield lambda _done: None
            return
        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=True,
        ) as progress:
            task = progress.add_task(f"scoring {n_cells:,} cells", total=n_chunks)
            yield lambda _done: progress.advance(task)

    return bar()


def _print_best(
    console, out_dir: Path, gpu, target, alpha, context, batch, as_json: bool = False, rank: int = 1
) -> None:
    from infersize.best import COLUMNS, best_pairs, display_rows
    from infersize.report import render_table

    frame, chosen = best_pairs(out_dir, gpu, target, alpha, context, batch, rank)
    if as_json:
        typer.echo(json.dumps({"selection": chosen, "rows": frame.to_dicts()}, indent=2))
        return
    if frame.is_empty():
        typer.echo("no fitting draft pair in this selection")
        return
    title = (
        f"Best draft pair per GPU at context {chosen['context_length']}, batch "
        f"{chosen['batch_size']}, α {chosen['acceptance_rate']:g}"
    )
    rows = display_rows(frame)
    if rank > 1:
        rows = [[str(r), *row] for r, row in zip(frame["rank"], rows, strict=True)]
    render_table(console, title, COLUMNS if rank == 1 else ["rank", *COLUMNS], rows)


def best(
    output_dir: Path = typer.Argument(..., help="A sweep's output folder."),
    gpu: str = typer.Option(None, "--gpu", help="Only this GPU (id as in the tables)."),
    target: str = typer.Option(None, "--target", help="Only this target model."),
    alpha: float = typer.Option(None, "--alpha", help="Acceptance rate (default: nearest 0.7)."),
    context: int = typer.Option(None, "--context-length", help="Default: the smallest swept."),
    batch: int = typer.Option(None, "--batch-size", help="Default: the smallest swept."),
    top: int = typer.Option(1, "--top", help="Show the top N ranks."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """The best draft pair per GPU (and target), from a sweep's tables."""
    from infersize.report import console

    _print_best(console(), output_dir, gpu, target, alpha, context, batch, as_json, top)
