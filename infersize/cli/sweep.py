"""`infersize sweep validate|run`: thin commands over infersize.sweep."""

from __future__ import annotations

import atexit
import gc
import math
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from infersize.cli.app import command_app
from infersize.errors import InfersizeError

if TYPE_CHECKING:
    from rich.console import Console

    from infersize.sweep.config import SweepConfig
    from infersize.sweep.plan import Plan
    from infersize.sweep.run import ChunkDone

sweep_app = command_app(
    "sweep",
    help="Sweep a YAML grid of pairs × precisions × GPUs × ... to tables.",
    no_args_is_help=True,
)

SweepFile = Annotated[Path, typer.Argument(help="Sweep YAML.")]
MaxCells = Annotated[
    int | None,
    typer.Option(
        "--max-cells",
        help="Refuse grids larger than this (default: the YAML's max_cells, 100,000,000).",
    ),
]


def _plan(path: Path, max_cells: int | None, warm_jobs: int = 1) -> tuple[SweepConfig, Plan]:
    from infersize.sweep.config import load_sweep
    from infersize.sweep.plan import build_plan
    from infersize.sweep.size import cells_upper_bound, check_size

    config, doc = load_sweep(path)
    check_size(config, path, max_cells)
    upper = cells_upper_bound(config)
    if warm_jobs > 1:
        from infersize.sweep.workers import jobs_for, warm_workers

        work = upper if config.workloads is None else math.inf  # capacity rows: always worth it
        if jobs_for(warm_jobs, work, warm_jobs) > 1:  # start them while the plan is built
            warm_workers(warm_jobs, simulator=config.workloads is not None)
    base = path.parent
    overlays = tuple(
        str((base / p) if not Path(p).is_absolute() else Path(p)) for p in config.catalog
    )
    plan = build_plan(config, doc, overlays)
    return config, plan


@sweep_app.command("validate", epilog="Example: infersize sweep validate sweeps/quickstart.yaml")
def validate(file: SweepFile, max_cells: MaxCells = None) -> None:
    """Check a sweep file and print its cell count per axis; writes nothing."""
    _config, plan = _plan(file, max_cells)
    from infersize.show.terminal import console, render_table

    rows = [[axis, f"{n:,}"] for axis, n in plan.axis_counts().items()]
    rows.append(["cells (settings × context × batch × α × K)", f"{plan.total_cells:,}"])
    if plan.capacity is not None:
        rows.append(["workloads", f"{len(plan.capacity.workloads):,}"])
        rows.append(["slas", f"{len(plan.capacity.slas):,}"])
        label = "capacity rows (settings × workloads' rates × SLAs × α)"
        rows.append([label, f"{plan.capacity_rows:,}"])
    rows.append(["chunks", f"{len(plan.chunks):,}"])
    render_table(console(), f"{file}: valid", ["axis", "values"], rows)
    for reason, n in plan.skipped.items():
        typer.echo(f"skipped {n:,} {reason}")
    for note in plan.notes:
        typer.echo(f"note: {note}")


@sweep_app.command("run", epilog="Example: infersize sweep run sweeps/quickstart.yaml")
def run(
    file: SweepFile,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Output folder (default: the YAML's output.dir, else outputs/<name>)."
        ),
    ] = None,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs",
            "-j",
            help="Processes scoring chunks: this one and N-1 workers (at most the machine's CPUs).",
        ),
    ] = 2,
    resume: Annotated[
        bool, typer.Option("--resume", help="Finish an interrupted run in --out.")
    ] = False,
    backend: Annotated[
        str, typer.Option("--backend", help="loky (this machine) or dask.")
    ] = "loky",
    scheduler: Annotated[
        str | None, typer.Option("--scheduler", help="Dask scheduler address.")
    ] = None,
    cells: Annotated[
        bool | None, typer.Option("--cells/--no-cells", help="Write the per-cell dataset.")
    ] = None,
    max_cells: MaxCells = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress bar or summary.")
    ] = False,
) -> None:
    """Score every cell of the grid and write frontier and best-pair tables."""
    _check_run_options(jobs, backend, scheduler)
    # every phase interruptible: workers start while the plan is built
    with _interruptible(file, out), _lasting_objects_frozen():
        _run(file, out, jobs, backend, scheduler, resume, cells, max_cells, quiet)


def _run(
    file: Path,
    out: Path | None,
    jobs: int,
    backend: str,
    scheduler: str | None,
    resume: bool,
    cells: bool | None,
    max_cells: int | None,
    quiet: bool,
) -> None:
    from infersize.sweep.workers import keep_freed_memory

    keep_freed_memory()  # a chunk's arrays reuse the previous chunk's memory
    config, plan = _plan(file, max_cells, jobs if backend == "loky" else 1)
    gc.freeze()  # the plan lives as long as the run
    out_dir = output_folder(out, config.output.dir, config.name)
    if not plan.chunks:
        skipped = "; ".join(f"skipped {n:,} {reason}" for reason, n in plan.skipped.items())
        raise InfersizeError(f"{file}: no cell to score ({skipped or 'an empty grid'})")
    for note in plan.notes:
        typer.echo(f"note: {note}", err=True)
    from infersize.sweep.run import RunOptions, run_sweep

    err = None if quiet else _stderr_console()  # quiet: the terminal library is not loaded
    options = RunOptions(
        jobs=jobs,
        backend=backend,
        scheduler=scheduler,
        resume=resume,
        with_cells=config.output.cells if cells is None else cells,
        best_top_n=config.output.best_top_n,
        formats=tuple(config.output.formats),
        command_line=shlex.join(["infersize", *sys.argv[1:]]),
    )
    what = f"{plan.total_cells:,} cells" + (
        f" and {plan.capacity_rows:,} capacity rows" if plan.capacity is not None else ""
    )
    with _progress(err, len(plan.chunks), what) as advance:
        manifest = run_sweep(plan, out_dir, options, on_chunk=advance)
    if err is not None:
        _summary(err, manifest, out_dir)
    typer.echo(str(out_dir))


def _summary(err: Console, manifest: dict[str, Any], out_dir: Path) -> None:
    """What the run found, in the terminal's width and height: what it did, then per GPU its
    best pair by the ranking rule of `best` (target, draft, K) and how many targets have a
    pair; `best` and `report` show the rest."""
    _what_it_did(err, manifest, out_dir)
    _best_per_gpu(out_dir)


def _what_it_did(err: Console, manifest: dict[str, Any], out_dir: Path) -> None:
    """Cells (or capacity rows: a capacity sweep's time goes to its simulations, so cells/s
    would say nothing) and rows written, rows beyond their models' context, and for a capacity
    sweep the share the simulator answered and how to ask for a fleet."""
    from infersize.sweep.best import beyond_context_rows

    seconds, capacity = manifest["seconds"]["total"], manifest.get("capacity")
    work = (
        f"{manifest['cells']:,} cells in {seconds:.2f} s ({manifest['cells_per_s']:,} cells/s)"
        if capacity is None
        else f"{manifest['cells']:,} cells and {capacity['rows']:,} capacity rows in "
        f"{seconds:.2f} s"
    )
    err.print(
        f"{work}; frontier {manifest['rows']['frontier']:,} rows, best_pairs "
        f"{manifest['rows']['best_pairs']:,} rows"
    )
    beyond, scored = beyond_context_rows(out_dir)
    if beyond:
        err.print(
            f"{beyond:,} of {scored:,} rows are at a context longer than their target or draft "
            "holds (within_max_context false): they never rank"
        )
    if capacity is not None:
        err.print(
            f"capacity: {capacity['simulated_rows']:,} of {capacity['rows']:,} rows answered by "
            f"the simulator; fewest GPUs for a load: infersize best {out_dir} --request-rate R "
            "--sla NAME [--target NAME]"
        )


def _best_per_gpu(out_dir: Path) -> None:
    import shutil

    from infersize.show.terminal import console, render_table
    from infersize.sweep.best import Filters, best_pairs, ranked

    answer = best_pairs(out_dir, Filters())
    if answer.selection is None or answer.rows.is_empty():
        typer.echo("no fitting draft pair at the default selection")
        return
    size = shutil.get_terminal_size((100, 40))  # COLUMNS and LINES, else the terminal's
    rows = []
    for (gpu,), group in answer.rows.group_by(["gpu"], maintain_order=True):
        top = ranked(group).row(0, named=True)
        tp = f" tp{top['tp']}" if top["tp"] != 1 else ""
        rows.append(
            [
                str(gpu),
                f"{top['target']} {top['target_quant']}{tp}",
                f"{top['draft']} {top['draft_quant']}",
                str(top["optimal_k"]),
                f"{top['speedup']:.2f}x",
                f"{top['speculative_tokens_per_s_per_gpu']:,.0f}",
                str(group.height),
            ]
        )
    shown = rows[: max(3, size.lines - 12)]
    render_table(
        console(width=size.columns),
        f"Best pair per GPU at {answer.selection.describe()}",
        ["gpu", "target", "draft", "K", "speedup", "tok/s/GPU", "targets"],
        shown,
    )
    more = f"{len(rows) - len(shown)} more GPUs; " if len(shown) < len(rows) else ""
    typer.echo(
        f"{more}ranked by tokens/s per GPU, then speedup, then memory; every target's "
        f"best pair: infersize best {out_dir} (report: HTML)"
    )


def output_folder(out: Path | None, configured: str | None, name: str) -> Path:
    """--out, else the YAML's output.dir (relative to the working folder), else outputs/NAME;
    `~` is expanded, and a sweep name never leads outside outputs/."""
    if out is not None:
        if str(out) in ("", "."):
            raise InfersizeError("--out must name a folder, got the current folder")
        return out.expanduser()
    if configured:
        return Path(configured).expanduser()
    return Path("outputs") / name


STOP_SIGNALS = ("SIGTERM", "SIGHUP")  # and SIGINT, which Python raises as KeyboardInterrupt


@contextmanager
def _interruptible(file: Path, out: Path | None) -> Iterator[None]:
    """SIGTERM and SIGHUP end the run like Ctrl-C, in any phase (the plan being built
    included): workers killed at once, the previous tables untouched, and one line saying how
    to continue (exit 130)."""
    import signal

    from infersize.sweep.workers import stop_workers

    def on_stop(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    stops = [getattr(signal, name) for name in STOP_SIGNALS if hasattr(signal, name)]
    previous = {stop: signal.signal(stop, on_stop) for stop in stops}
    try:
        yield
    except KeyboardInterrupt:
        stop_workers(wait=True)
        again = f"infersize sweep run {shlex.quote(str(file))}" + (
            f" --out {shlex.quote(str(out))}" if out is not None else ""
        )
        typer.echo(f"interrupted: `{again} --resume` continues", err=True)
        raise typer.Exit(130) from None
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler)


def _check_run_options(jobs: int, backend: str, scheduler: str | None) -> None:
    import os

    if jobs < 1:
        raise InfersizeError(f"--jobs must be at least 1, got {jobs}")
    cpus = os.cpu_count() or 1
    if backend == "loky" and jobs > cpus:
        raise InfersizeError(
            f"--jobs must be at most {cpus} (this machine's CPUs; more workers only wait), "
            f"got {jobs}"
        )
    if backend not in ("loky", "dask"):
        raise InfersizeError(f"--backend must be loky or dask, got '{backend}'")
    if scheduler is not None and backend != "dask":
        raise InfersizeError("--scheduler needs --backend dask")


@contextmanager
def _lasting_objects_frozen() -> Iterator[None]:
    """What the process holds when the run starts (its imports), and then the plan, outlive
    the run: frozen, the collector's full passes during the run (one in the plan, one in the
    first chunk's tables) no longer walk them. Collectable again afterwards; frozen once more
    when the process exits, whose last full pass would otherwise walk them all (0.1 s after a
    100 M-cell run's tables are published; every file was closed before)."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
    atexit.unregister(gc.freeze)  # registered once, however many runs a process makes
    atexit.register(gc.freeze)


def _stderr_console() -> Console:
    from infersize.show.terminal import console

    return console(stderr=True)


@contextmanager
def _progress(
    err: Console | None, n_chunks: int, what: str
) -> Iterator[Callable[[ChunkDone], None]]:
    if err is None or not err.is_terminal:  # quiet; logs and pipes get the summary only
        yield lambda _done: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as progress:
        task = progress.add_task(f"scoring {what}", total=n_chunks)
        yield lambda _done: progress.advance(task)
