"""Figures (matplotlib, Agg backend: no display needed), written as PNG or SVG by file suffix.
The numbers come from the same core as `spec` and from a sweep's tables; nothing is computed
here that the core does not already compute."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from infersize.errors import InfersizeError

FORMATS = (".png", ".svg")


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _check_out(out: Path) -> None:
    if out.suffix.lower() not in FORMATS:
        raise InfersizeError(f"{out}: the figure file must end in .png or .svg")
    if not out.parent.is_dir():
        raise InfersizeError(f"{out.parent}: no such folder")


def save(fig, out: Path) -> Path:
    _check_out(out)
    try:
        fig.savefig(out, dpi=150, bbox_inches="tight")
    except OSError as exc:
        raise InfersizeError(f"{out}: cannot write ({exc.strerror})") from None
    finally:
        _pyplot().close(fig)
    return out


def svg_text(fig) -> str:
    """The figure as inline SVG (for the HTML report)."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight")
    _pyplot().close(fig)
    svg = buffer.getvalue()
    return svg[svg.index("<svg") :]


def speedup_vs_k_figure(
    alphas: list[float],
    latency_ratio: float,
    k_max: int = 16,
    marked_k: int | None = None,
    title: str | None = None,
):
    """Leviathan's S(K) for several α at one γ, each curve's optimal K marked."""
    from infersize.speculative import optimal_k_leviathan, speedup_leviathan

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ks = np.arange(1, k_max + 1)
    for alpha in alphas:
        curve = speedup_leviathan(alpha, ks, latency_ratio)
        (line,) = ax.plot(ks, curve, marker=".", label=f"α = {alpha:g}")
        best = int(optimal_k_leviathan(alpha, latency_ratio, k_max))
        ax.plot([best], [curve[best - 1]], marker="*", markersize=14, color=line.get_color())
        ax.annotate(
            f"K*={best}",
            (best, curve[best - 1]),
            textcoords="offset points",
            xytext=(4, 6),
            fontsize=8,
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


def speedup_vs_batch_figure(
    batches: np.ndarray, speedups: np.ndarray, label: str, crossover: float | None
):
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.plot(batches, speedups, marker="o")
    ax.axhline(1.0, color="black", linewidth=0.8)
    if crossover is not None:
        ax.axvline(crossover, color="red", linestyle="--", label=f"crossover: batch {crossover:g}")
        ax.legend(fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size (sequences)")
    ax.set_ylabel("speedup (roofline model)")
    ax.set_title(label)
    ax.grid(alpha=0.3)
    return fig


def frontier_figure(frontier, best, gpu: str, selection: dict):
    """Memory vs speedup of one GPU's frontier rows (one colour per target), the Pareto steps
    drawn, and each target's best pair labelled."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for (target,), rows in frontier.sort("target").group_by(["target"], maintain_order=True):
        rows = rows.sort(["combined_gib", "speedup"], descending=[False, True])
        points = ax.scatter(rows["combined_gib"], rows["speedup"], s=18, label=target)
        front = rows.with_columns(best=rows["speedup"].cum_max()).unique(
            "best", keep="first", maintain_order=True
        )
        ax.step(
            front["combined_gib"],
            front["best"],
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
    ax.set_title(
        f"{gpu}: frontier at context {selection['context_length']}, batch "
        f"{selection['batch_size']}, α {selection['acceptance_rate']:g} (★ best)"
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    return fig
