"""`capacity --plot`: p50 and p99 TTFT and TPOT against request rate, plain decoding and
speculation side by side, the SLA's limits and the rate where each arm breaks it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from infersize.show.figures import new_figure_grid

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from infersize.service.capacity_curves import LatencyCurve
    from infersize.service.capacity_result import CapacityResult

STYLE = {"baseline": ("tab:blue", "plain decoding"), "speculative": ("tab:orange", "speculation")}


def capacity_figure(curves: list[LatencyCurve], result: CapacityResult) -> Figure:
    fig, axes = new_figure_grid(1, 2, 11, 4.2)
    limits = {}
    if result.sla:
        for term in result.sla.split(";"):
            metric = term.split(":")[0]
            limits[metric] = term
    for ax, metric, label in ((axes[0], "ttft", "TTFT"), (axes[1], "tpot", "TPOT")):
        for curve in curves:
            color, name = STYLE[curve.arm]
            k = f" K={curve.draft_k}" if curve.arm == "speculative" else ""
            for statistic, style in (("p50", "-"), ("p99", "--")):
                values = [m.value(metric, statistic) * 1e3 for m in curve.measured]
                ax.plot(curve.rates, values, style, color=color, marker=".",
                        label=f"{name}{k} {statistic}")  # fmt: skip
            arm = result.baseline if curve.arm == "baseline" else result.speculative
            if arm is not None and arm.max_request_rate:
                holds = f"{name}: SLA holds to {arm.max_request_rate:.3g} req/s"
                ax.axvline(arm.max_request_rate, color=color, linestyle=":", label=holds)
        if metric in limits:
            _, bound = limits[metric].split("<=")
            value = float(bound[:-2]) if bound.endswith("ms") else float(bound[:-1]) * 1e3
            ax.axhline(value, color="red", linewidth=1.0, label=f"SLA {limits[metric]}")
        ax.set_yscale("log")
        ax.set_xlabel("request rate per replica (requests/s)")
        ax.set_ylabel(f"{label} (ms)")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    drafter = "" if result.draft is None else f" + {result.draft}"
    fig.suptitle(
        f"{result.target}{drafter} on {result.gpu_name} × {result.tp} ({result.engine}): "
        f"{result.workload['input_tokens']:,.0f} in / {result.workload['output_tokens']:,.0f} out"
    )
    return fig
