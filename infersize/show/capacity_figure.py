"""`capacity --plot`: p50 and p99 TTFT and TPOT against request rate, plain decoding and
speculation side by side, the SLA's limits and the rate up to which each arm meets the SLA."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, Protocol

from infersize.service.capacity.answer import BASELINE, SPECULATIVE, ArmKind
from infersize.show.figures import literal, new_figure_grid

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    from infersize.service.capacity.answer import CapacityResult
    from infersize.service.capacity.curves import LatencyCurve


class FleetCurve(Protocol):
    """A GPU type's GPUs needed by request rate (a sweep's fleet curve)."""

    @property
    def gpu(self) -> str: ...
    @property
    def rates(self) -> list[float]: ...
    def gpus(self, kind: ArmKind) -> list[int | None]: ...


class FleetPanel(Protocol):
    """One target's fleet curves, a panel of the fleet figure."""

    @property
    def target(self) -> str: ...
    @property
    def curves(self) -> Sequence[FleetCurve]: ...


COLORS = {BASELINE: "tab:blue", SPECULATIVE: "tab:orange"}
PANELS = (("ttft", "TTFT"), ("tpot", "TPOT"))


def _sla_limits_ms(result: CapacityResult) -> dict[str, tuple[str, float]]:
    """metric -> (the SLA term, its limit in ms)."""
    terms = () if result.sla is None else result.sla.terms
    return {term.metric: (str(term), term.limit_s * 1e3) for term in terms}


def _panel(
    ax: Axes, metric: str, label: str, curves: list[LatencyCurve], result: CapacityResult
) -> None:
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    for curve in curves:
        color, name = COLORS[curve.arm], curve.arm.label
        k = f" (K={curve.draft_k})" if curve.arm.speculates else ""
        for statistic, style in (("p50", "-"), ("p99", "--")):
            values = [m.value(metric, statistic) * 1e3 for m in curve.measured]
            ax.plot(
                curve.rates, values, style, color=color, marker=".", label=f"{name}{k} {statistic}"
            )
        arm = result.arm(curve.arm)
        top = None if arm is None or arm.capacity is None else arm.capacity.max_request_rate
        if top:
            ax.axvline(
                top, color=color, linestyle=":", label=f"{name}: SLA met up to {top:.3g} req/s"
            )
    limits = _sla_limits_ms(result)
    title = label
    if metric in limits:
        term, value = limits[metric]
        ax.axhline(value, color="red", linewidth=1.0, label="SLA limit")
        title += f" (SLA {term})"
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("request rate per replica (requests/s)")
    ax.set_ylabel(f"{label} (ms)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, which="both")


def capacity_figure(curves: list[LatencyCurve], result: CapacityResult) -> Figure:
    fig, axes = new_figure_grid(1, 2, 11, 4.8)
    for ax, (metric, label) in zip(axes, PANELS, strict=True):
        _panel(ax, metric, label, curves, result)
    handles, labels = axes[0].get_legend_handles_labels()
    for handle, text in zip(*axes[1].get_legend_handles_labels(), strict=True):
        if text not in labels:
            handles.append(handle)
            labels.append(text)
    fig.legend(handles, labels, loc="lower center", ncols=3, fontsize=8, frameon=False)
    drafter = "" if result.draft is None else f" + {result.draft}"
    fig.suptitle(  # names from a catalog overlay are drawn as they are, never as mathtext
        literal(
            f"{result.target}{drafter} on {result.gpu_name} × {result.tp} ({result.engine}): "
            f"{result.workload['input_tokens']:,.0f} in / "
            f"{result.workload['output_tokens']:,.0f} out tokens"
        )
    )
    fig.subplots_adjust(bottom=0.27, wspace=0.25)
    return fig


# each arm's line style and width, speculation first (the legend's order)
LINES: dict[ArmKind, tuple[Literal["-", "--"], float]] = {
    SPECULATIVE: ("-", 2.6),
    BASELINE: ("--", 1.4),
}


def _fleet_panel(ax: Axes, panel: FleetPanel, colors: dict[str, str]) -> None:
    from matplotlib.ticker import MaxNLocator

    for curve in panel.curves:
        for kind, (style, width) in LINES.items():
            values = curve.gpus(kind)
            points = [(r, g) for r, g in zip(curve.rates, values, strict=True) if g is not None]
            if points:
                xs, ys = zip(*points, strict=True)
                ax.step(xs, ys, style, where="post", color=colors[curve.gpu], linewidth=width)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("request rate of the fleet (requests/s)")
    ax.set_ylabel("GPUs needed")
    ax.set_title(literal(panel.target), fontsize=10)
    ax.grid(alpha=0.3)


def _legend(gpus: list[str], colors: dict[str, str], width: float) -> tuple[list[Line2D], int]:
    """A colour per GPU type and a line style per arm, and as many entries to a row as the
    figure's width holds (about 0.065 inch a letter at 8 points)."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colors[gpu], linewidth=2.6, label=literal(gpu)) for gpu in gpus]
    handles += [
        Line2D([], [], color="0.25", linestyle=style, linewidth=line, label=kind.label)
        for kind, (style, line) in LINES.items()
    ]
    entry = 0.75 + 0.065 * max(len(name) for name in [*gpus, *(kind.label for kind in LINES)])
    return handles, max(1, min(len(handles), 5, int((width - 0.4) / entry)))


def fleet_figure(panels: Sequence[FleetPanel], question: str) -> Figure:
    """GPUs needed against the request rate per GPU type, one panel per target (two to a row):
    solid with speculation, dashed without (each the fewest over the target's deployments at
    that rate); the dashed line is drawn over the solid one, so both show where they agree.
    One panel's title names its target and the question; several share the question's title
    and each is titled with its target. One legend below; margins in inches, so a report can
    draw it as it is (no tight bounding box)."""
    import textwrap

    columns = min(len(panels), 2)
    rows = -(-len(panels) // columns)
    width = 1.1 + 6.0 * columns
    gpus = list(dict.fromkeys(curve.gpu for panel in panels for curve in panel.curves))
    colors = {gpu: f"C{i % 10}" for i, gpu in enumerate(gpus)}
    handles, legend_columns = _legend(gpus, colors, width)
    below = 0.7 + 0.2 * -(-len(handles) // legend_columns)  # inches: x label, then the legend
    one = len(panels) == 1
    title = f"GPUs needed for {panels[0].target}: {question}" if one else f"GPUs needed: {question}"
    lines = textwrap.wrap(title, int((width - 1.1) / 0.085))  # about 0.085 inch a letter at 11
    above = 0.2 * len(lines) + (0.25 if one else 0.45)  # inches over the panels: the title(s)
    height = above + below + 3.9 * rows
    left, right = 0.8 / width, 1 - 0.3 / width
    fig, axes = new_figure_grid(rows, columns, width, height)
    for ax, panel in zip(axes, panels, strict=False):
        _fleet_panel(ax, panel, colors)
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    if one:
        axes[0].set_title(literal("\n".join(lines)), fontsize=11)
    else:
        fig.suptitle(
            literal("\n".join(lines)),
            x=(left + right) / 2,
            y=1 - 0.1 / height,
            va="top",
            fontsize=11,
        )
    fig.legend(
        handles=handles,
        loc="lower center",
        ncols=legend_columns,
        fontsize=8,
        frameon=False,
        bbox_to_anchor=((left + right) / 2, 0),
    )
    fig.subplots_adjust(
        left=left,
        right=right,
        top=1 - above / height,
        bottom=below / height,
        wspace=0.16,
        hspace=0.4,
    )
    return fig
