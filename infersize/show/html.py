"""The sweep report: one self-contained HTML file (tables and inline SVG figures, no scripts,
no external files) that a planner can mail around and open without a server. Renders the frames
it is given; reads and computes nothing."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any

import polars as pl

from infersize import __version__
from infersize.record import record
from infersize.show.figures import frontier_plot, frontier_svgs, methods_svg
from infersize.show.terminal import BEST_COLUMNS, best_rows

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border-bottom: 1px solid #ddd; padding: 4px 10px; text-align: right; }
th:nth-child(-n+3), td:nth-child(-n+3) { text-align: left; }
.meta { color: #666; font-size: 0.85em; } figure { margin: 1em 0; } svg { max-width: 100%; }
"""


MethodCurves = Mapping[str, Sequence[tuple[int, float, str]]]  # method -> (batch, S, drafter)


@record(kw_only=False)
class GpuSection:
    gpu: str
    best: pl.DataFrame  # best_pairs rows of this GPU at the selection
    frontier: pl.DataFrame  # frontier rows of this GPU at the selection (with on_front)
    methods: Mapping[str, MethodCurves] = field(default_factory=dict)  # target -> its curves


def table_html(columns: Sequence[str], rows: Sequence[Sequence[str]], table_id: str) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>" for row in rows
    )
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _section(section: GpuSection, figure: str) -> str:
    gpu, rows = section.gpu, section.best
    anchor = html.escape(gpu)
    return (
        f'<section class="gpu" id="gpu-{anchor}"><h2>{anchor} '
        f"({html.escape(rows['gpu_name'][0])})</h2>"
        f'<p class="meta"><a href="#figure-{anchor}">its frontier figure ↓</a></p>'
        f"{table_html(BEST_COLUMNS, best_rows(rows.to_dicts()), f'best-{gpu}')}"
        f'<figure id="figure-{anchor}">{figure}<figcaption>Frontier of {anchor}: memory vs '
        "speedup per target; ★ each target's best draft pair, named in the legend "
        f'(<a href="#gpu-{anchor}">back to its table</a>).</figcaption></figure>'
        f"{_methods(section)}</section>"
    )


def _methods(section: GpuSection) -> str:
    """Per target, each method's best speedup over batch size (sweeps with a methods axis)."""
    out = []
    for target, curves in section.methods.items():
        title = f"{target} on {section.gpu}: speedup of each method's best row over batch size"
        out.append(
            f"<figure>{methods_svg(curves, title)}<figcaption>{html.escape(title)}, each "
            "method at its best drafter, K and TP by the ranking of `infersize best` (most "
            "tokens/s per GPU).</figcaption></figure>"
        )
    return "".join(out)


def _assumptions(manifest: dict[str, Any], sections: Sequence[GpuSection]) -> str:
    """What every number in the report rests on: the speedup model, the engine, the prices."""
    prices = sorted(
        {(s.gpu, s.best["price_usd_per_hour"][0]) for s in sections if s.best.height},
        key=lambda gp: gp[0],
    )
    price_text = ", ".join(
        f"{gpu} ${price:.2f}/h" if price is not None else f"{gpu} no price" for gpu, price in prices
    )
    items = [
        f"speedup model: {manifest.get('speedup_model', '?')} (docs/modelling.md)",
        f"engine: {manifest.get('engine', '?')} (memory rules and step-time constants)",
        f"α: each pair's {manifest.get('acceptance_scenarios', '?')} acceptance scenarios "
        "(published for the pair, else the prior; acceptance_source in the tables)",
        f"GPU prices per GPU-hour: {price_text or 'none'}",
    ]
    return '<ul class="meta">' + "".join(f"<li>{html.escape(i)}</li>" for i in items) + "</ul>"


def render_report(
    manifest: dict[str, Any], sections: Sequence[GpuSection], selection: str, capacity: str = ""
) -> str:
    """The report's page; `capacity` is its capacity section (show/capacity_report.py), if
    any."""
    title = f"infersize sweep report: {manifest['name']}"
    summary = (
        f"{manifest['cells']:,} cells scored in {manifest['seconds']['total']:.2f} s; "
        f"frontier {manifest['rows']['frontier']:,} rows, best_pairs "
        f"{manifest['rows']['best_pairs']:,} rows. Config hash "
        f"{manifest['config_hash'][:12]}, infersize {__version__}."
    )
    chosen = (
        f"Best draft pair per GPU at {selection} "
        "(ranked by speculative tokens/s per GPU, then speedup, then memory, as `infersize best` "
        "and every ★ rank; all selections are in best_pairs.parquet)."
    )
    plots = [frontier_plot(s.frontier, s.best, s.gpu, selection) for s in sections]
    figures = frontier_svgs(plots)
    body = "".join(_section(s, figure) for s, figure in zip(sections, figures, strict=True))
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>'
        f"{html.escape(title)}</title><style>{STYLE}</style></head><body>"
        f'<h1>{html.escape(title)}</h1><p class="meta">{html.escape(summary)}</p>'
        f"<p>{html.escape(chosen)}</p><h2>Assumptions</h2>{_assumptions(manifest, sections)}"
        f"{body}{capacity}</body></html>"
    )
