"""`capacity --plot`: p50 and p99 TTFT and TPOT against request rate, plain decoding and
speculation side by side, the SLA's limits and the rate up to which each arm meets the SLA."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from infersize.show.figures import literal, new_figure_grid

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from infersize.service.capacity_answer import CapacityResult
    from infersize.service.capacity_curves import LatencyCurve


class FleetCurve(Protocol):
    """A GPU type's GPUs needed by request rate (a sweep's fleet curve)."""

    @property
    def gpu(self) -> str: ...
    @property
    def rates(self) -> list[float]: ...
    @property
    def plain_gpus(self) -> list[int | None]: ...
    @property
    def speculative_gpus(self) -> list[int | None]: ...


STYLE = {"baseline": ("tab:blue", "plain decoding"), "speculative": ("tab:orange", "speculation")}
PANELS = (("ttft", "TTFT"), ("tpot", "TPOT"))


def _sla_limits_ms(result: CapacityResult) -> dict[str, tuple[str, float]]:
    """metric -> (the SLA term, its limit in ms)."""
    limits = {}
    for term in (result.sla or "").split(";") if result.sla else ():
        metric, bound = term.split(":")[0], term.split("<=")[1]
        value = float(bound[:-2]) if bound.endswith("ms") else float(bound[:-1]) * 1e3
        limits[metric] = (term, value)
    return limits


def _panel(
    ax: Axes, metric: str, label: str, curves: list[LatencyCurve], result: CapacityResult
) -> None:
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    for curve in curves:
        color, name = STYLE[curve.arm]
        k = f" (K={curve.draft_k})" if curve.arm == "speculative" else ""
        for statistic, style in (("p50", "-"), ("p99", "--")):
            values = [m.value(metric, statistic) * 1e3 for m in curve.measured]
            ax.plot(curve.rates, values, style, color=color, marker=".",
                    label=f"{name}{k} {statistic}")  # fmt: skip
        arm = result.baseline if curve.arm == "baseline" else result.speculative
        top = None if arm is None or arm.capacity is None else arm.capacity.max_request_rate
        if top:
            ax.axvline(top, color=color, linestyle=":",
                       label=f"{name}: SLA met up to {top:.3g} req/s")  # fmt: skip
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
    fig.suptitle(
        f"{result.target}{drafter} on {result.gpu_name} × {result.tp} ({result.engine}): "
        f"{result.workload['input_tokens']:,.0f} in / {result.workload['output_tokens']:,.0f} "
        "out tokens"
    )
    fig.subplots_adjust(bottom=0.27, wspace=0.25)
    return fig


def fleet_figure(curves: Sequence[FleetCurve], title: str) -> Figure:
    """GPUs needed against the request rate per GPU type: solid with speculation, dashed
    without (each the fewest over the sweep's deployments at that rate); the dashed line is
    drawn over the solid one, so both show where they agree."""
    from matplotlib.ticker import MaxNLocator

    fig, axes = new_figure_grid(1, 1, 8, 4.8)
    ax = axes[0]
    colors = [f"C{i}" for i in range(10)]
    for curve, color in zip(curves, colors * (len(curves) // 10 + 1), strict=False):
        arms = ((curve.speculative_gpus, "-", 2.6, "speculation"),
                (curve.plain_gpus, "--", 1.4, "plain decoding"))  # fmt: skip
        for values, style, width, how in arms:
            points = [(r, g) for r, g in zip(curve.rates, values, strict=True) if g is not None]
            if points:
                xs, ys = zip(*points, strict=True)
                label = literal(f"{curve.gpu}, {how}")
                ax.step(xs, ys, style, where="post", color=color, linewidth=width, label=label)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("request rate of the fleet (requests/s)")
    ax.set_ylabel("GPUs needed")
    ax.set_title(literal(title), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return fig
