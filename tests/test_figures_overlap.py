"""Every figure the docs show, rendered as a user gets it and checked by its text boxes: no two
texts overlap (titles, axis labels, tick labels, annotations, legend entries) and none leaves
the figure. The same figures are kept in docs/figures/ (docs/make_figures.py)."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

import matplotlib
import pytest

from tests.support.sweeps import TWO_TARGETS

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("make_figures", ROOT / "docs" / "make_figures.py")
assert spec is not None and spec.loader is not None
make_figures = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_figures)


def _drawn_texts(fig):
    """The texts the figure shows: titles, axis labels, annotations, legend entries, and the
    tick labels of ticks inside the axes' limits (matplotlib keeps others it never draws)."""
    texts = list(fig.texts)
    for legend in fig.legends:
        texts += [legend.get_title(), *legend.get_texts()]
    for ax in fig.axes:
        texts += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label]
        texts += list(ax.texts)
        legend = ax.get_legend()
        if legend is not None:
            texts += [legend.get_title(), *legend.get_texts()]
        for axis, limits in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            low, high = sorted(limits)
            for tick in axis.get_major_ticks():
                if low <= tick.get_loc() <= high:
                    texts.append(tick.label1)
    return [t for t in texts if t.get_visible() and t.get_text().strip()]


def _problems(fig, inside_figure: bool = False) -> list[str]:
    """Texts that overlap, drawn as the Agg backend draws them; with `inside_figure`, also
    texts that leave the figure (the report's fixed margins; PNGs are saved with a tight
    bounding box, which holds every text by construction)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in _drawn_texts(fig)]
    problems = []
    frame = fig.bbox
    for label, box in boxes if inside_figure else ():
        inside = frame.x0 - 1 <= box.x0 and box.x1 <= frame.x1 + 1
        if not (inside and frame.y0 - 1 <= box.y0 and box.y1 <= frame.y1 + 1):
            problems.append(f"{label!r} leaves the figure")
    for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2):
        common = box_a.intersection(box_a, box_b)
        if common is not None and common.width > 1 and common.height > 1:
            problems.append(f"{a!r} overlaps {b!r}")
    return problems


@pytest.fixture(scope="module")
def figures(tmp_path_factory):
    """Each figure the docs show, captured as the Figure object the command saved."""
    from infersize.show import figures as figure_module

    captured = {}
    save = figure_module.save

    def keep(fig, out):
        captured[Path(out).name] = _problems(fig)  # before saving clears the figure
        return save(fig, out)

    tmp = tmp_path_factory.mktemp("figures")
    figure_module.save = keep
    try:
        # two targets, as the README's sweep, under its workload and SLA names; a smaller grid
        capacity = tmp / "capacity.yaml"
        capacity.write_text(TWO_TARGETS)
        make_figures.render(tmp, ROOT / "sweeps" / "fleet.yaml", capacity)
    finally:
        figure_module.save = save
    return captured, tmp


def test_every_docs_figure_is_rendered(figures):
    captured, tmp = figures
    assert set(captured) == {name for name, _ in make_figures.figure_commands(tmp, tmp)}


@pytest.mark.parametrize(
    "name",
    [
        "speedup_vs_k.png",
        "speedup_vs_batch.png",
        "frontier_h100.png",
        "methods_h100.png",
        "spec_k_curve.png",
        "capacity_70b_h100.png",
        "fleet_capacity.png",
    ],
)
def test_no_text_overlaps_or_leaves_the_figure(figures, name):
    captured, _ = figures
    assert captured[name] == []


def test_the_report_figure_fits_its_fixed_margins():
    """The report draws the frontier as SVG with fixed margins (no tight bounding box)."""
    from infersize.show.figures import REPORT_MARGINS, FrontierPlot, TargetSeries, frontier_figure

    names = [f"a-long-target-name-{i}b" for i in range(15)]
    series = [
        TargetSeries(
            name=n,
            memory_gib=[1.0 + i, 2.0 + i],
            speedup=[1.2, 1.5 + i / 20],
            steps_gib=[1.0 + i],
            steps_speedup=[1.2],
            best=(f"draft-{i}b int4 K={i % 7 + 1}", 2.0 + i, 1.5 + i / 20),
        )
        for i, n in enumerate(names)
    ]
    fig = frontier_figure(FrontierPlot("h100-sxm", "context 2048, batch 1, α 0.7", series))
    fig.subplots_adjust(**REPORT_MARGINS)
    assert _problems(fig, inside_figure=True) == []


@pytest.mark.parametrize("targets", [1, 2, 3])
def test_the_fleet_figure_fits_its_own_margins(targets):
    """The fleet figure as the report draws it (its own margins, no tight bounding box) and as
    a PNG: a panel per target and one legend below for eight GPU types with long names."""
    from infersize.service.capacity.answer import BASELINE, SPECULATIVE
    from infersize.show.capacity_figure import fleet_figure
    from infersize.sweep.capacity.best import FleetCurve, FleetPanel

    rates = [float(r) for r in range(1, 121)]
    curves = [
        FleetCurve(
            f"a-long-gpu-name-{i}-sxm",
            rates,
            {
                BASELINE: [int(r * (i + 2)) for r in rates],
                SPECULATIVE: [int(r * (i + 1)) for r in rates],
            },
        )
        for i in range(8)
    ]
    panels = [FleetPanel(f"a-long-target-name-{t}b", "chat", 1, curves) for t in range(targets)]
    question = "a-long-workload-name, SLA a-long-sla-name (α scenario 1)"
    assert _problems(fleet_figure(panels, question), inside_figure=True) == []


def test_the_check_finds_an_overlap_and_a_text_outside():
    """The checker itself: two labels written on one point, and one past the right edge."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4, 3))
    ax = fig.add_subplot()
    ax.annotate("first label", (0.5, 0.5))
    ax.annotate("second label", (0.5, 0.5))
    ax.annotate("far out", (1.0, 0.5), xytext=(300, 0), textcoords="offset points")
    problems = _problems(fig, inside_figure=True)
    assert "'first label' overlaps 'second label'" in problems
    assert "'far out' leaves the figure" in problems
    fig = Figure(figsize=(4, 3))  # a figure's own legend (not an axes') is checked too
    fig.text(0.45, 0.5, "under the legend")
    fig.legend(handles=fig.add_subplot().plot([], [], label="the legend"), loc="center")
    assert "'under the legend' overlaps 'the legend'" in _problems(fig)
