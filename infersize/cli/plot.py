"""`infersize plot k|batch|frontier`: figures, through the same evaluation as `spec`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from infersize.cli import options as opt
from infersize.cli.app import command_app
from infersize.cli.completion import complete_gpu, complete_model
from infersize.cli.knob_options import with_engine_knobs
from infersize.defaults import DEFAULTS
from infersize.errors import InfersizeError

if TYPE_CHECKING:
    from infersize.catalog.store import Catalog
    from infersize.service.request import SpecRequest
    from infersize.service.spec_result import SpecResult

plot_app = command_app(
    "plot", help="Figures: speedup vs K, frontier per GPU, speedup vs batch.", no_args_is_help=True
)


@plot_app.command(
    "k", epilog="Example: infersize plot k --alpha 0.6 --alpha 0.8 --latency-ratio 12 --out k.png"
)
def plot_k(
    alpha: Annotated[
        list[float], typer.Option("--alpha", help="Acceptance rates, one curve each (repeat).")
    ],
    latency_ratio: Annotated[
        float, typer.Option("--latency-ratio", help="γ = target step / draft step.")
    ],
    out: opt.FigureOut,
    max_k: opt.MaxK = DEFAULTS.max_k,
) -> None:
    """Leviathan's speedup vs K for several α at one given γ, the optimal K marked (for a
    deployment's own curve, with its memory limit: spec --plot)."""
    from infersize.service.curves import speedup_vs_k
    from infersize.show.figures import save, speedup_vs_k_figure

    curves = speedup_vs_k(alpha, latency_ratio, max_k)
    title = f"Speedup vs K at γ = {latency_ratio:.1f} (Leviathan Theorem 3.8; ★ optimal K)"
    typer.echo(str(save(speedup_vs_k_figure(curves, title), out)))


def draw_spec_k_curve(
    request: SpecRequest, catalog: Catalog, result: SpecResult, out: Path
) -> None:
    """`spec --plot`: the deployment's speedup vs K, by its own speedup model at its batch,
    with the K that do not fit in memory marked: the curve of the numbers spec printed."""
    from infersize.service.curves import deployment_speedup_vs_k
    from infersize.show.figures import save, speedup_vs_k_figure

    assert result.draft is not None
    curve = deployment_speedup_vs_k(request, catalog)
    title = (
        f"{result.target.model} + {result.draft.model} on {result.gpu.name}, batch "
        f"{result.batch_size}, context {result.context_length:,}: speedup vs K"
    )
    save(speedup_vs_k_figure([curve], title, result.draft_k), out)


@plot_app.command(
    "batch",
    epilog="Example: infersize plot batch --target llama-3.1-8b --draft llama-3.2-1b --gpu h100 "
    "--out batch.png",
)
@with_engine_knobs
def plot_batch(
    target: opt.Target,
    draft: opt.Draft,
    gpu: opt.Gpu,
    out: opt.FigureOut,
    target_quant: opt.TargetQuant = DEFAULTS.target_quant,
    draft_quant: opt.DraftQuant = DEFAULTS.draft_quant,
    tp: opt.Tp = DEFAULTS.tp,
    kv_dtype: opt.KvDtype = DEFAULTS.kv_dtype,
    context_length: opt.ContextLength = DEFAULTS.context_length,
    acceptance_rate: opt.AcceptanceRate = None,
    draft_k: opt.DraftK = DEFAULTS.draft_k,
    engine: opt.Engine = DEFAULTS.engine,
    allow_cross_tokenizer: opt.AllowCrossTokenizer = False,
    catalog: opt.CatalogFiles = None,
    *,
    engine_knobs: dict[str, Any],
) -> None:
    """Roofline speedup vs batch size, with the crossover where speculation stops paying."""
    from infersize.catalog.store import load_catalog
    from infersize.service.curves import speedup_vs_batch
    from infersize.show.figures import save, speedup_vs_batch_figure

    request = opt.spec_request(locals() | {"max_k": max(DEFAULTS.max_k, draft_k)})
    curve = speedup_vs_batch(request, load_catalog(tuple(catalog or ())))
    dep = curve.deployment
    assert dep.draft is not None
    label = (
        f"{dep.target.model.id} + {dep.draft.model.id} on {dep.gpu.name}, α {curve.alpha:g}, "
        f"K {draft_k}, context {context_length}"
    )
    typer.echo(str(save(speedup_vs_batch_figure(curve, label), out)))


TableGpu = Annotated[
    str,
    typer.Option(
        "--gpu", help="GPU as in the tables (catalog aliases work).", autocompletion=complete_gpu
    ),
]


@plot_app.command(
    "frontier",
    epilog="Example: infersize plot frontier outputs/quickstart --gpu h100 --out frontier.png",
)
def plot_frontier(
    output_dir: opt.OutputDir,
    gpu: TableGpu,
    out: opt.FigureOut,
    alpha: opt.SliceAlpha = None,
    context: opt.SliceContext = None,
    batch: opt.SliceBatch = None,
    scenario: opt.SliceScenario = None,
) -> None:
    """Memory vs speedup of one GPU's frontier, Pareto steps drawn, each target's best pair
    starred and named in the legend."""
    from infersize.show.figures import frontier_figure, frontier_plot, save
    from infersize.sweep.best import Filters, best_pairs, frontier_rows

    filters = Filters(
        gpu=gpu, context_length=context, batch_size=batch, alpha=alpha, scenario=scenario
    )
    answer = best_pairs(output_dir, filters)
    selection, best = answer.selection, answer.rows
    if selection is None or best.is_empty():
        raise InfersizeError(f"{output_dir}: no fitting rows for {gpu} in this selection")
    gpu_id = best["gpu"][0]
    frontier = frontier_rows(output_dir, gpu_id, selection)
    figure = frontier_figure(frontier_plot(frontier, best, gpu_id, selection.describe()))
    typer.echo(str(save(figure, out)))


@plot_app.command(
    "methods",
    epilog="Example: infersize plot methods outputs/methods --gpu h100 --target llama-3.1-8b "
    "--out methods.png",
)
def plot_methods(
    output_dir: opt.OutputDir,
    gpu: TableGpu,
    target: Annotated[
        str,
        typer.Option(
            "--target", help="Target model as in the tables.", autocompletion=complete_model
        ),
    ],
    out: opt.FigureOut,
    context: opt.SliceContext = None,
    scenario: opt.SliceScenario = None,
) -> None:
    """Each speculative method's best speedup against batch size, for one GPU and target, from
    a sweep with a `methods` axis (its best_pairs table)."""
    from infersize.show.figures import methods_figure, save
    from infersize.sweep.best import Filters
    from infersize.sweep.methods_view import method_points

    filters = Filters(gpu=gpu, target=target, context_length=context, scenario=scenario)
    curves = method_points(output_dir, filters)
    data = {m: [(p.batch_size, p.speedup, p.drafter) for p in pts] for m, pts in curves.items()}
    title = (
        f"Each method's best row: {target} on {gpu}\n(its drafter, K and TP with the most "
        "tokens/s per GPU, as `infersize best` ranks)"
    )
    typer.echo(str(save(methods_figure(data, title), out)))


@plot_app.command(
    "capacity",
    epilog="Example: infersize plot capacity outputs/capacity --sla interactive --workload chat "
    "--out fleet.png",
)
def plot_capacity(
    output_dir: opt.OutputDir,
    sla: Annotated[str, typer.Option("--sla", help="The SLA's name in the sweep.")],
    out: opt.FigureOut,
    workload: Annotated[
        str | None, typer.Option("--workload", help="The workload's name (when several).")
    ] = None,
    max_rate: Annotated[
        float | None,
        typer.Option(
            "--max-rate", help="The largest fleet rate drawn (default: 1.5 × the largest swept)."
        ),
    ] = None,
    scenario: opt.SliceScenario = None,
    target: opt.TargetFilter = None,
) -> None:
    """GPUs needed against the fleet's request rate per GPU type, with speculation (solid)
    and without (dashed), from a capacity sweep's table: one panel per target, or the one
    --target names."""
    from infersize.show.capacity_figure import fleet_figure
    from infersize.show.figures import save
    from infersize.sweep.capacity.best import FleetAsk, curve_rates, fleet_panels

    rates = curve_rates(output_dir, max_rate)
    ask = FleetAsk(
        request_rate=rates[0], sla=sla, workload=workload, scenario=scenario, target=target
    )
    panels = fleet_panels(output_dir, ask, rates)
    question = f"{panels[0].workload}, SLA {sla} (α scenario {panels[0].scenario})"
    typer.echo(str(save(fleet_figure(panels, question), out)))
