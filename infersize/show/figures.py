"""Figures (matplotlib, Agg backend: no display needed), written as PNG or SVG by file suffix.
The numbers come from the service layer's curves (the same evaluation as `spec`) and from a
sweep's tables; nothing is computed here."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from infersize.errors import InfersizeError
from infersize.files import atomic_write

if TYPE_CHECKING:
    import polars as pl
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from infersize.service.curves import BatchCurve, KCurve

FORMATS = (".png", ".svg")


def _new_figure(width: float, height: float) -> tuple[Figure, Axes]:
    """A figure on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    return fig, fig.add_subplot()


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


def svg_text(fig: Figure) -> str:
    """The figure as inline SVG (for the HTML report)."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight")
    fig.clear()
    svg = buffer.getvalue()
    return svg[svg.index("<svg") :]


def speedup_vs_k_figure(
    curves: Sequence[KCurve],
    latency_ratio: float,
    marked_k: int | None = None,
    title: str | None = None,
) -> Figure:
    """Leviathan's S(K) for several α at one γ, each curve's optimal K marked."""
    fig, ax = _new_figure(7, 4.2)
    for curve in curves:
        (line,) = ax.plot(curve.ks, curve.speedup, marker=".", label=f"α = {curve.alpha:g}")
        best = (curve.best_k, curve.best_speedup)
        ax.plot(*best, marker="*", markersize=14, color=line.get_color())
        ax.annotate(
            f"K*={curve.best_k}", best, textcoords="offset points", xytext=(4, 6), fontsize=8
        )
    if marked_k is not None:
        ax.axvline(marked_k, color="grey", linestyle=":", label=f"chosen K = {marked_k}")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel("draft length K")
    ax.set_ylabel("speedup (Leviathan Theorem 3.8)")
    ax.set_title(title or f"Speedup vs K at γ = {latency_ratio:.1f} (★ optimal K)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def speedup_vs_batch_figure(curve: BatchCurve, label: str) -> Figure:
    fig, ax = _new_figure(7, 4.2)
    ax.plot(curve.batches, curve.speedup, marker="o")
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
    ax.set_ylabel("speedup (roofline model)")
    ax.set_title(label)
    ax.grid(alpha=0.3)
    return fig


def frontier_figure(frontier: pl.DataFrame, best: pl.DataFrame, gpu: str, selection: str) -> Figure:
    """Memory vs speedup of one GPU's frontier rows (one colour per target), each target's
    Pareto steps (its `front_speedup` column) drawn, and each target's best pair labelled."""
    fig, ax = _new_figure(7.5, 4.8)
    for (target,), rows in frontier.group_by(["target"], maintain_order=True):
        points = ax.scatter(rows["combined_gib"], rows["speedup"], s=18, label=target)
        steps = rows.filter(rows["on_front"])
        ax.step(
            steps["combined_gib"],
            steps["speedup"],
            where="post",
            alpha=0.5,
            color=points.get_facecolor()[0],
        )
    for row in best.iter_rows(named=True):
        ax.annotate(
            f"{row['draft']} {row['draft_quant']} K={row['optimal_k']}",
            (row["combined_gib"], row["speedup"]),
            textcoords="offset points",
            xytext=(5, 5),
            fontsize=7,
        )
        ax.plot([row["combined_gib"]], [row["speedup"]], marker="*", markersize=12, color="black")
    ax.set_xlabel("combined memory per GPU (GiB)")
    ax.set_ylabel("speedup")
    ax.set_title(f"{gpu}: frontier at {selection} (★ best)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    return fig
