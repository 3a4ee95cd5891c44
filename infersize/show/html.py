"""The sweep report: one self-contained HTML file (tables and inline SVG figures, no scripts,
no external files) that a planner can mail around and open without a server. Renders the frames
it is given; reads and computes nothing."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from infersize import __version__
from infersize.show.figures import frontier_plot, frontier_svgs
from infersize.show.terminal import BEST_COLUMNS, best_rows

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border-bottom: 1px solid #ddd; padding: 4px 10px; text-align: right; }
th:nth-child(-n+3), td:nth-child(-n+3) { text-align: left; }
.meta { color: #666; font-size: 0.85em; } figure { margin: 1em 0; } svg { max-width: 100%; }
"""


@dataclass(frozen=True)
class GpuSection:
    gpu: str
    best: pl.DataFrame  # best_pairs rows of this GPU at the selection
    frontier: pl.DataFrame  # frontier rows of this GPU at the selection (with on_front)


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]], table_id: str) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>" for row in rows
    )
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _section(section: GpuSection, figure: str) -> str:
    gpu, rows = section.gpu, section.best
    return (
        f'<section class="gpu" id="gpu-{html.escape(gpu)}"><h2>{html.escape(gpu)} '
        f"({html.escape(rows['gpu_name'][0])})</h2>"
        f"{_table(BEST_COLUMNS, best_rows(rows.to_dicts()), f'best-{gpu}')}"
        f"<figure>{figure}<figcaption>Frontier: memory vs speedup per target; "
        "★ the best draft pair.</figcaption></figure></section>"
    )


def render_report(manifest: dict[str, Any], sections: Sequence[GpuSection], selection: str) -> str:
    title = f"infersize sweep report: {manifest['name']}"
    summary = (
        f"{manifest['cells']:,} cells scored in {manifest['seconds']['total']:.2f} s; "
        f"frontier {manifest['rows']['frontier']:,} rows, best_pairs "
        f"{manifest['rows']['best_pairs']:,} rows. Config hash "
        f"{manifest['config_hash'][:12]}, infersize {__version__}."
    )
    chosen = (
        f"Best draft pair per GPU at {selection} "
        "(ranked by speculative tokens/s; all selections are in best_pairs.parquet)."
    )
    plots = [frontier_plot(s.frontier, s.best, s.gpu, selection) for s in sections]
    figures = frontier_svgs(plots)
    body = "".join(_section(s, figure) for s, figure in zip(sections, figures, strict=True))
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>'
        f"{html.escape(title)}</title><style>{STYLE}</style></head><body>"
        f'<h1>{html.escape(title)}</h1><p class="meta">{html.escape(summary)}</p>'
        f"<p>{html.escape(chosen)}</p>{body}</body></html>"
    )
