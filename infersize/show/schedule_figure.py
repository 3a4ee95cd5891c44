"""`schedule --plot`: the draft length and the speedup against batch size (log axis), the
schedule beside the one static K. Draws a ScheduleCurve; computes nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from infersize.show.figures import literal, new_figure_grid

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from infersize.service.schedule import ScheduleResult


def schedule_figure(result: ScheduleResult) -> Figure:
    """Two panels over the batch: K (the schedule's steps, the static K dashed) and the
    speedup over plain decoding (the schedule's, the static K's, and the best K's at each
    batch, whose gap to the schedule the noise margin allows)."""
    import numpy as np

    curve = result.curve
    assert curve is not None
    fig, (k_ax, s_ax) = new_figure_grid(2, 1, 7.5, 6.4)
    batches = np.asarray(curve.batches)
    static = f"static K={curve.static_k}: one K for every batch"
    k_ax.step(batches, curve.draft_k, where="post", color="C0", linewidth=2)
    k_ax.axhline(curve.static_k, color="C1", linestyle="--")
    k_ax.set_ylabel("draft length K")
    k_ax.set_ylim(-0.5, max(int(np.max(curve.draft_k)), curve.static_k) + 1.5)
    k_ax.set_yticks(range(int(k_ax.get_ylim()[1]) + 1))
    s_ax.plot(batches, curve.speedup, color="C0", linewidth=2, label="schedule: K per batch size")
    s_ax.plot(batches, curve.static_speedup, color="C1", linestyle="--", label=static)
    s_ax.plot(
        batches,
        curve.best_speedup,
        color="grey",
        linestyle=":",
        linewidth=1.2,
        label="best K at each batch (no noise margin)",
    )
    s_ax.axhline(1.0, color="black", linewidth=0.8)
    s_ax.set_ylabel("speedup over K = 0")
    top = int(batches[-1])
    s_ax.set_xlabel(
        "batch size (sequences decoding at once)"
        if top >= result.max_batch
        else f"batch size (sequences decoding at once); past {top:,} not every K fits at this "
        f"context,\nthe last range runs on to {result.max_batch:,}"
    )
    ticks = [2**i for i in range(int(np.log2(max(top, 1))) + 1)]
    for ax in (k_ax, s_ax):
        ax.set_xscale("log", base=2)
        ax.set_xlim(1, max(2.0, float(top)))
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
    s_ax.margins(y=0.15)
    k_ax.set_title(literal(_title(result)), fontsize=9)
    fig.legend(loc="lower center", ncol=2, fontsize=8, bbox_to_anchor=(0.5, -0.06), frameon=False)
    return fig


def _title(result: ScheduleResult) -> str:
    """The deployment, broken after the models so the line fits the figure."""
    words = result.deployment
    head, _, tail = words.partition(", ")
    return f"{head}\n{tail}: draft length per batch size"
