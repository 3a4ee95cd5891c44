"""Figures (matplotlib, Agg backend: no display needed), written as PNG or SVG by file suffix.
The numbers come from the service layer's curves (the same evaluation as `spec`) and from a
sweep's tables; nothing is computed here."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from infersize.core.ranking import RANKED_BY, ranking_order
from infersize.errors import InfersizeError
from infersize.files import atomic_write
from infersize.record import record

if TYPE_CHECKING:
    import polars as pl
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from infersize.service.curves import BatchCurve, KCurve

FORMATS = (".png", ".svg")


def literal(text: str) -> str:
    """`text` drawn as it is: matplotlib reads text between two `$` as mathtext (a name like
    `$\\frac{1}{$` would fail to draw), and an escaped `\\$` is drawn as a plain `$`."""
    return text.replace("$", r"\$")


def _new_figure(width: float, height: float) -> tuple[Figure, Axes]:
    """A figure on the Agg backend (no display needed)."""
    fig, axes = new_figure_grid(1, 1, width, height)
    return fig, axes[0]


def new_figure_grid(
    rows: int, columns: int, width: float, height: float
) -> tuple[Figure, list[Axes]]:
    """A figure of rows × columns axes on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    return fig, [fig.add_subplot(rows, columns, i + 1) for i in range(rows * columns)]


def _check_out(out: Path) -> None:
    if out.suffix.lower() not in FORMATS:
        raise InfersizeError(f"{out}: the figure file must end in .png or .svg")
    if not out.parent.is_dir():
        raise InfersizeError(f"{out.parent}: no such folder")


def save(fig: Figure, out: Path) -> Path:
    _check_out(out)
    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format=out.suffix.lower().lstrip("."), dpi=150, bbox_inches="tight")
        atomic_write(out, buffer.getvalue())
    except OSError as exc:
        raise InfersizeError(f"{out}: cannot write ({exc.strerror})") from None
    finally:
        fig.clear()
    return out


REPORT_MARGINS = {"left": 0.07, "right": 0.68, "bottom": 0.11, "top": 0.88}  # legend right


def svg_text(fig: Figure, margins: Mapping[str, float] = REPORT_MARGINS) -> str:
    """The figure as inline SVG (for the HTML report): text as text (the browser's fonts, not
    glyph outlines) and fixed margins, so one draw makes it (a tight bounding box takes two)."""
    import matplotlib

    buffer = io.StringIO()
    fig.subplots_adjust(**margins)
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig.savefig(buffer, format="svg")
    fig.clear()
    svg = buffer.getvalue()
    return svg[svg.index("<svg") :]


def speedup_vs_k_figure(
    curves: Sequence[KCurve],
    title: str,
    marked_k: int | None = None,
) -> Figure:
    """S(K) for one or several α, each curve's best fitting K starred; K that do not fit in
    memory are drawn hollow on a dotted line."""
    import numpy as np

    fig, ax = _new_figure(7, 4.2)
    for curve in curves:
        fits = np.asarray(curve.fits, dtype=bool)
        ks, speedup = np.asarray(curve.ks), np.asarray(curve.speedup)
        (line,) = ax.plot(ks[fits], speedup[fits], marker=".", label=f"α = {curve.alpha:g}")
        if not fits.all():
            ax.plot(ks, speedup, linestyle=":", color=line.get_color(), alpha=0.6)
            ax.plot(
                ks[~fits],
                speedup[~fits],
                linestyle="none",
                marker="o",
                mfc="none",
                color=line.get_color(),
                label=f"α = {curve.alpha:g}: does not fit",
            )
        if curve.best_k is not None and curve.best_speedup is not None:
            best = (float(curve.best_k), curve.best_speedup)
            ax.plot(*best, marker="*", markersize=14, color=line.get_color())
            ax.annotate(  # above and right of the star: clear of a chosen-K line through it
                f"K*={curve.best_k}",
                best,
                textcoords="offset points",
                xytext=(7, 5),
                fontsize=8,
                ha="left",
                va="bottom",
            )
    if marked_k is not None:
        ax.axvline(marked_k, color="grey", linestyle=":", label=f"chosen K = {marked_k}")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.margins(y=0.12)  # room above the stars and below the lowest label
    ax.set_xlabel("draft length K")
    ax.set_ylabel(f"speedup ({curves[0].model.name} model)" if curves else "speedup")
    ax.set_title(literal(title))
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def speedup_vs_batch_figure(curve: BatchCurve, label: str) -> Figure:
    """The speedup against batch size: solid where the batch fits in memory, faded
    past the memory limit (marked), and the crossover where speculation stops paying."""
    import numpy as np

    fig, ax = _new_figure(7, 4.2)
    fits = np.asarray(curve.fits, dtype=bool)
    batches, speedup = np.asarray(curve.batches), np.asarray(curve.speedup)
    ax.plot(batches[fits], speedup[fits], marker="o", label="fits in memory")
    if not fits.all():
        limit = batches[fits].max() if fits.any() else None
        ax.plot(
            batches,
            speedup,
            linestyle=":",
            color="grey",
            alpha=0.7,
            label="does not fit (more memory needed)",
        )
        if limit is not None:
            ax.axvline(limit, color="grey", linewidth=1.2, label=f"memory limit: batch {limit:g}")
    ax.axhline(1.0, color="black", linewidth=0.8)
    if curve.crossover is not None:
        ax.axvline(
            curve.crossover,
            color="red",
            linestyle="--",
            label=f"crossover: batch {curve.crossover}",
        )
    ax.legend(fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size (sequences)")
    ax.set_ylabel(f"speedup ({curve.model.name} model)")
    ax.set_title(literal(label))
    ax.grid(alpha=0.3)
    return fig


@record
class TargetSeries:
    name: str
    memory_gib: list[float]
    speedup: list[float]
    steps_gib: list[float]  # its Pareto steps (the rows `on_front`)
    steps_speedup: list[float]
    best: tuple[str, float, float] | None  # its best pair: (draft and K, memory GiB, speedup)


@record(kw_only=False)
class FrontierPlot:
    """What a frontier figure shows, as plain numbers (drawable in a forked process that
    never touches the tables' library)."""

    gpu: str
    selection: str
    targets: list[TargetSeries]


def frontier_plot(
    frontier: pl.DataFrame, best: pl.DataFrame, gpu: str, selection: str
) -> FrontierPlot:
    """One GPU's frontier rows (one series per target) and each target's best pair by the
    ranking rule of `best` (most tokens/s per GPU, then speedup, then memory): a ★ may sit
    below the speedup frontier when a smaller TP or precision delivers more per GPU."""

    def drafter(r: dict[str, object]) -> str:  # n-gram lookup has no precision to name
        quant = "" if r["draft_quant"] == "none" else f" {r['draft_quant']}"
        return f"{r['draft']}{quant} K={r['optimal_k']}"

    order = ranking_order(*(best[name].to_numpy() for name in RANKED_BY))
    stars: dict[str, tuple[str, float, float]] = {}
    for r in best[order].iter_rows(named=True):  # best first: each target's first row is its ★
        stars.setdefault(r["target"], (drafter(r), r["combined_gib"], r["speedup"]))
    targets = []
    for (target,), rows in frontier.group_by(["target"], maintain_order=True):
        steps = rows.filter(rows["on_front"])
        targets.append(
            TargetSeries(
                name=str(target),
                memory_gib=rows["combined_gib"].to_list(),
                speedup=rows["speedup"].to_list(),
                steps_gib=steps["combined_gib"].to_list(),
                steps_speedup=steps["speedup"].to_list(),
                best=stars.get(str(target)),
            )
        )
    return FrontierPlot(gpu, selection, targets)


def frontier_figure(plot: FrontierPlot) -> Figure:
    """Memory vs speedup of one GPU's frontier rows, one colour per target, each target's
    Pareto steps drawn and its best pair starred in its colour. The legend, beside the axes,
    names each target and its best draft and K: no label is written over the points."""
    import matplotlib

    fig, ax = _new_figure(10.5, 5.0)
    palette = matplotlib.colormaps["tab20" if len(plot.targets) > 10 else "tab10"]
    for i, series in enumerate(plot.targets):  # up to 20 targets, each colour and marker once
        color, marker = palette(i % palette.N), "os^Dv"[(i // palette.N) % 5]
        label = series.name if series.best is None else f"{series.name}: ★ {series.best[0]}"
        label = literal(label)
        ax.scatter(
            series.memory_gib,
            series.speedup,
            s=16,
            label=label,
            color=color,
            marker=marker,
            alpha=0.8,
        )
        ax.step(series.steps_gib, series.steps_speedup, where="post", alpha=0.5, color=color)
        if series.best is not None:
            ax.plot(
                [series.best[1]],
                [series.best[2]],
                linestyle="none",
                marker="*",
                markersize=14,
                color=color,
                markeredgecolor="black",
            )
    ax.set_xlabel("combined memory per GPU (GiB)")
    ax.set_ylabel("speedup")
    ax.set_title(
        literal(f"{plot.gpu}: frontier (★ best pair: most tokens/s per GPU)\nat {plot.selection}"),
        fontsize=10,
    )
    ax.grid(alpha=0.3)
    ax.legend(
        fontsize=7,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        borderaxespad=0.0,
        title="target: ★ best draft, K",
        title_fontsize=7,
    )
    return fig


def frontier_svgs(plots: Sequence[FrontierPlot]) -> list[str]:
    """Every plot as inline SVG; with several CPUs, drawn in forked processes (matplotlib
    draws one figure at a time). The plots are plain numbers: the children use no library
    that holds threads, which a fork would leave locked."""
    import multiprocessing
    import os

    workers = min(len(plots), os.cpu_count() or 1)
    if workers < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return [_frontier_svg(p) for p in plots]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        return pool.map(_frontier_svg, plots)


def _frontier_svg(plot: FrontierPlot) -> str:
    return svg_text(frontier_figure(plot))


def methods_figure(curves: Mapping[str, Sequence[tuple[int, float, str]]], title: str) -> Figure:
    """Each speculative method's best speedup against batch size (points: batch, speedup,
    drafter), the drafters behind each line named in the legend."""
    fig, ax = _new_figure(7.5, 4.4)
    for method, points in sorted(curves.items()):
        batches = [p[0] for p in points]
        speedups = [p[1] for p in points]
        drafters = sorted({p[2].split(" ")[0] for p in points})
        shown = ", ".join(drafters[:3]) + (" ..." if len(drafters) > 3 else "")
        ax.plot(batches, speedups, marker="o", label=literal(f"{method}: {shown}"))
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log", base=2)
    batches = sorted({p[0] for points in curves.values() for p in points})
    ax.set_xticks(batches, [str(b) for b in batches])
    ax.minorticks_off()
    ax.set_xlabel("batch size (concurrent sequences)")
    ax.set_ylabel("speedup over plain decoding (roofline)")
    ax.set_title(literal(title), fontsize=10)
    ax.legend(fontsize=8, title="method: drafter(s)", title_fontsize=8)
    ax.grid(alpha=0.3)
    ax.margins(y=0.12)
    return fig


METHODS_MARGINS = {"left": 0.09, "right": 0.97, "bottom": 0.12, "top": 0.9}  # legend inside


def methods_svg(curves: Mapping[str, Sequence[tuple[int, float, str]]], title: str) -> str:
    return svg_text(methods_figure(curves, title), METHODS_MARGINS)
