"""`infersize report OUTPUT_DIR`: one self-contained HTML file (tables and inline SVG figures,
no scripts, no external files) that a planner can mail around and open without a server."""

from __future__ import annotations

import html
import json
from pathlib import Path

from infersize import __version__
from infersize.best import COLUMNS, best_pairs, display_rows
from infersize.errors import InfersizeError
from infersize.plot import frontier_figure, svg_text

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border-bottom: 1px solid #ddd; padding: 4px 10px; text-align: right; }
th:nth-child(-n+3), td:nth-child(-n+3) { text-align: left; }
.meta { color: #666; font-size: 0.85em; } figure { margin: 1em 0; } svg { max-width: 100%; }
"""


def _table(columns: list[str], rows: list[list[str]], table_id: str) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>" for row in rows
    )
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def frontier_rows(out_dir: Path, gpu: str, selection: dict):
    import polars as pl

    frame = pl.read_parquet(out_dir / "frontier.parquet").filter(pl.col("gpu") == gpu)
    for column, value in selection.items():
        frame = frame.filter(pl.col(column) == value)
    return frame


def build_report(out_dir: Path) -> str:
    manifest_path = out_dir / "manifest.json"
    if not manifest_path.is_file():
        raise InfersizeError(f"{out_dir}: no manifest.json there; run 'infersize sweep run' first")
    manifest = json.loads(manifest_path.read_text())
    best, selection = best_pairs(out_dir)
    sections = []
    for (gpu,), rows in best.group_by(["gpu"], maintain_order=True):
        figure = frontier_figure(frontier_rows(out_dir, gpu, selection), rows, gpu, selection)
        sections.append(
            f'<section class="gpu" id="gpu-{html.escape(gpu)}"><h2>{html.escape(gpu)} '
            f"({html.escape(rows['gpu_name'][0])})</h2>"
            f"{_table(COLUMNS, display_rows(rows), f'best-{gpu}')}"
            f"<figure>{svg_text(figure)}<figcaption>Frontier: memory vs speedup per target; "
            "★ the best draft pair.</figcaption></figure></section>"
        )
    title = f"infersize sweep report: {manifest['name']}"
    summary = (
        f"{manifest['cells']:,} cells scored in {manifest['seconds']['total']:.2f} s; "
        f"frontier {manifest['rows']['frontier']:,} rows, best_pairs "
        f"{manifest['rows']['best_pairs']:,} rows. Config hash "
        f"{manifest['config_hash'][:12]}, infersize {__version__}."
    )
    chosen = (
        f"Best draft pair per GPU at context {selection['context_length']}, batch "
        f"{selection['batch_size']}, α {selection['acceptance_rate']:g} "
        "(ranked by speculative tokens/s; all selections are in best_pairs.parquet)."
    )
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>'
        f"{html.escape(title)}</title><style>{STYLE}</style></head><body>"
        f'<h1>{html.escape(title)}</h1><p class="meta">{html.escape(summary)}</p>'
        f"<p>{html.escape(chosen)}</p>{''.join(sections)}</body></html>"
    )


def write_report(out_dir: Path, out: Path | None = None) -> Path:
    target = out or out_dir / "report.html"
    text = build_report(out_dir)
    try:
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(target)
    except OSError as exc:
        raise InfersizeError(f"{target}: cannot write ({exc.strerror})") from None
    return target
