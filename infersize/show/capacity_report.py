"""The sweep report's capacity section: per workload, SLA and target model, the fewest GPUs per
GPU type at each target rate (with and without speculation) and the GPUs-against-rate figure,
under the assumptions every figure rests on (the workload, the SLA, the simulation). Renders
what it is given; reads and computes nothing."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from infersize.record import record
from infersize.show.capacity_figure import FleetCurve, fleet_figure
from infersize.show.capacity_panel import FLEET_COLUMNS, fleet_rows
from infersize.show.figures import svg_text
from infersize.show.html import table_html

FIGURE_OWN_MARGINS: dict[str, float] = {}  # the fleet figure lays out its panels and legend


@record
class CapacitySection:
    """One (workload, SLA, target) of a capacity sweep, answered at each of its target rates."""

    workload: str
    workload_text: str  # its lengths and arrival, in words
    sla: str
    sla_terms: str
    target: str  # the target model every deployment of the section serves
    scenario: int
    answers: Sequence[tuple[float, Sequence[dict[str, Any]]]]  # (rate, best per GPU type)
    curves: Sequence[FleetCurve]
    notes: Sequence[str] = ()


def _one(section: CapacitySection) -> str:
    anchor = html.escape(f"capacity-{section.workload}-{section.sla}-{section.target}")
    question = f"{section.workload} under SLA {section.sla}"
    title = f"{section.target}: {question}"
    rows = [
        [f"{rate:g}", *row] for rate, answer in section.answers for row in fleet_rows(list(answer))
    ]
    caption = (
        f"GPUs needed against the fleet's request rate per GPU type: {title} (α scenario "
        f"{section.scenario}); solid with speculation, dashed with plain decoding."
    )
    figure = svg_text(fleet_figure([section], question), FIGURE_OWN_MARGINS)
    notes = "".join(f'<p class="meta">note: {html.escape(note)}</p>' for note in section.notes)
    return (
        f'<section class="capacity" id="{anchor}"><h3>{html.escape(title)}</h3>'
        f'<p class="meta">{html.escape(section.workload_text)}; SLA '
        f"{html.escape(section.sla_terms)}</p>{notes}"
        f"{table_html(['request rate', *FLEET_COLUMNS], rows, anchor + '-table')}"
        f"<figure>{figure}<figcaption>{html.escape(caption)}</figcaption></figure></section>"
    )


def capacity_html(manifest: dict[str, Any], sections: Sequence[CapacitySection]) -> str:
    """The capacity section (empty for a sweep without workloads and SLAs)."""
    if not sections:
        return ""
    figures = manifest.get("capacity", {})
    items = [
        "each deployment's highest request rate per replica at the SLA, with plain decoding "
        "and with speculation at its best K, simulated step by step as the engine schedules "
        f"({figures.get('requests', '?')} requests per run, seed {figures.get('seed', '?')})",
        f"{figures.get('simulated_rows', '?')} of {figures.get('rows', '?')} rows answered by "
        "the simulator, the others screened (capacity_source in capacity.parquet)",
        f"replicas = ⌈headroom × rate / capacity⌉, headroom {figures.get('headroom', '?')}; "
        "GPUs = replicas × TP; each GPU type's fewest GPUs over the sweep's deployments",
    ]
    meta = '<ul class="meta">' + "".join(f"<li>{html.escape(i)}</li>" for i in items) + "</ul>"
    return "<h2>Capacity: GPUs for a load</h2>" + meta + "".join(_one(s) for s in sections)
