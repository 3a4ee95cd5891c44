"""`infersize plot ...` and `infersize report`: thin commands over infersize.plot."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import typer

from infersize.errors import InfersizeError

plot_app = typer.Typer(
    help="Figures: speedup vs K, frontier per GPU, speedup vs batch.", no_args_is_help=True
)
Out = typer.Option(..., "--out", "-o", help="Figure file, .png or .svg.")


@plot_app.command("k")
def plot_k(
    alpha: list[float] = typer.Option(..., "--alpha", help="Acceptance rates (repeat)."),
    latency_ratio: float = typer.Option(..., "--latency-ratio", help="γ = target / draft step."),
    max_k: int = typer.Option(16, "--max-k"),
    out: Path = Out,
) -> None:
    """Speedup vs K for several α at one γ, the optimal K marked."""
    from infersize.plot import save, speedup_vs_k_figure

    if any(not 0 <= a <= 1 for a in alpha):
        raise InfersizeError("--alpha values must be in [0, 1]")
    if not 0 < latency_ratio < float("inf") or not 1 <= max_k <= 256:
        raise InfersizeError("--latency-ratio must be a finite number > 0 and --max-k in 1..256")
    typer.echo(str(save(speedup_vs_k_figure(alpha, latency_ratio, max_k), out)))


@plot_app.command("batch")
def plot_batch(
    target: str = typer.Option(..., "--target"),
    draft: str = typer.Option(..., "--draft"),
    gpu: str = typer.Option(..., "--gpu"),
    target_quant: str = typer.Option("auto", "--target-quant"),
    draft_quant: str = typer.Option("auto", "--draft-quant"),
    tp: int = typer.Option(1, "--tp"),
    context_length: int = typer.Option(4096, "--context-length"),
    acceptance_rate: float = typer.Option(0.7, "--acceptance-rate"),
    draft_k: int = typer.Option(4, "--draft-k"),
    engine: str = typer.Option("plain", "--engine"),
    out: Path = Out,
) -> None:
    """Roofline speedup vs batch size, with the crossover where speculation stops paying."""
    from infersize.catalog import load_catalog
    from infersize.deployment import CROSSOVER_BATCHES, crossover_batch, deployment_speed
    from infersize.engines import get_engine
    from infersize.plot import save, speedup_vs_batch_figure
    from infersize.sources import resolve_side
    from infersize.spec import SpecRequest, validate_request

    validate_request(
        SpecRequest(
            target,
            target_quant,
            draft,
            draft_quant,
            gpu,
            context_length,
            acceptance_rate,
            draft_k,
            tp=tp,
        )
    )
    catalog, eng = load_catalog(), get_engine(engine)
    device, kv = catalog.gpu(gpu), catalog.kv_dtype("fp16")
    t, _ = resolve_side(target, target_quant, catalog, kv, device, tp)
    d, _ = resolve_side(draft, draft_quant, catalog, kv, device, 1)
    speed = deployment_speed(
        t.numbers,
        d.numbers,
        eng,
        context_length,
        CROSSOVER_BATCHES,
        acceptance_rate,
        draft_k,
        "roofline",
    ).speedup
    cross = float(
        crossover_batch(t.numbers, d.numbers, eng, context_length, acceptance_rate, draft_k)
    )
    label = (
        f"{t.model.id} + {d.model.id} on {device.name}, α {acceptance_rate:g}, "
        f"K {draft_k}, context {context_length}"
    )
    figure = speedup_vs_batch_figure(
        CROSSOVER_BATCHES, speed, label, None if np.isnan(cross) else cross
    )
    typer.echo(str(save(figure, out)))


@plot_app.command("frontier")
def plot_frontier(
    output_dir: Path = typer.Argument(..., help="A sweep's output folder."),
    gpu: str = typer.Option(..., "--gpu", help="GPU as in the tables (catalog aliases work)."),
    alpha: float = typer.Option(None, "--alpha"),
    out: Path = Out,
) -> None:
    """Memory vs speedup of one GPU's frontier, Pareto steps drawn, best pair labelled."""
    from infersize.best import best_pairs
    from infersize.html_report import frontier_rows
    from infersize.plot import frontier_figure, save

    best, selection = best_pairs(output_dir, gpu=gpu, alpha=alpha)
    if best.is_empty():
        raise InfersizeError(f"{output_dir}: no fitting rows for {gpu} in this selection")
    gpu_id = best["gpu"][0]
    figure = frontier_figure(frontier_rows(output_dir, gpu_id, selection), best, gpu_id, selection)
    typer.echo(str(save(figure, out)))


def report(
    output_dir: Path = typer.Argument(..., help="A sweep's output folder."),
    out: Path = typer.Option(
        None, "--out", "-o", help="HTML file (default OUTPUT_DIR/report.html)."
    ),
) -> None:
    """One self-contained HTML report (best pairs per GPU, frontier figures inline)."""
    from infersize.html_report import write_report

    typer.echo(str(write_report(output_dir, out)))
