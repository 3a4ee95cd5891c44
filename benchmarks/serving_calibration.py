"""`infersize capacity` against public serving measurements (tests/data/serving_measurements.csv,
one measured figure a row, each with its source and the quoted figure): every row predicted
through the path the command takes (infersize/service/serving_calibration.py: the row's
deployment under its engine's settings, its benchmark client's lengths and load, its
speculative method at its K, served by the simulator), printed as Markdown tables: the check
rows, then the fit rows, each with its source's key, then each source once (its URL or
repo@commit:path), then the check rows' errors by category, then each speculative row beside its
plain-decoding twin (the direction of speculation's effect).

Constants are fitted on the `fit` rows only (benchmarks/fit_serving_constants.py); the `check`
rows' errors are out of sample.

Usage: python benchmarks/serving_calibration.py [--write] [--rows TEXT [--lengths DRAW]]
--write puts the tables into docs/capacity.md and docs/calibration.md between their
serving-calibration markers. --rows prints the rows whose id holds TEXT alone; with --lengths
they are served with that client's draws instead of their own (a diagnostic: e.g.
`--lengths vllm-random:0.99` spreads each row's lengths uniformly from about 1 to twice its
mean).
"""

from __future__ import annotations

import argparse
import math
import statistics
from pathlib import Path

from infersize.catalog.store import Catalog, load_catalog
from infersize.service.calibration import source_of
from infersize.service.serving_calibration import KINDS as KINDS
from infersize.service.serving_calibration import (
    SGLANG_RANDOM,
    VLLM_RANDOM,
    Row,
    is_length_draw,
)
from infersize.service.serving_calibration import error as error
from infersize.service.serving_calibration import load_rows as _load_rows
from infersize.service.serving_calibration import predict as _predict

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "serving_measurements.csv"
DOCS = (ROOT / "docs" / "capacity.md", ROOT / "docs" / "calibration.md")
START, END = "<!-- serving-calibration:start -->\n", "<!-- serving-calibration:end -->\n"
# the check rows' targets by category and metric (median absolute error)
TARGETS = {"tpot_mean_ms": 0.15, "ttft_p50_ms": 0.30, "output_tokens_per_s": 0.15}
DIRECTION_MARGIN = 0.05  # a pair whose measured ratio is within 5 % of 1 has no direction
TWIN = (
    "model",
    "precision",
    "kv_dtype",
    "gpu",
    "tp",
    "engine",
    "input_tokens",
    "output_tokens",
    "lengths",
    "load_kind",
    "load",
    "requests",
    "kind",
)


def load_rows(path: Path = DATA) -> list[Row]:
    return _load_rows(path)


def predict(rows: list[Row]) -> dict[str, float]:
    return _predict(rows)


def _number(x: float) -> str:
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.2f}" if abs(x) >= 1 else f"{x:.3f}"


def _setup(row: Row) -> str:
    load = "concurrency" if row["load_kind"] == "concurrency" else "rate"
    utilization = row["gpu_memory_utilization"]
    engine = row["engine"] + (f" at {utilization} of memory" if utilization else "")
    drafter = f" + {row['draft']} K {row['draft_k']}" if row.get("draft") else ""
    lengths = " (bench_serving's draws)" if row.get("lengths") else ""
    return (
        f"{row['model']} {row['precision']}{drafter} (KV {row['kv_dtype']}), {row['gpu']} "
        f"×{row['tp']}, {engine}, {int(row['input_tokens']):,}/{int(row['output_tokens']):,} "
        f"tokens{lengths}, {load} {row['load']}, {row['requests']} requests"
    )


def category(row: Row, catalog: Catalog) -> str:
    """What a row checks: speculation, a MoE target, throughput with every request queued at
    once, or a dense target under load."""
    if row.get("draft"):
        return "speculative"
    if row["load_kind"] == "concurrency" and row["load"] == row["requests"] != "1":
        return "high-batch throughput"
    return "MoE" if catalog.model(row["model"]).moe is not None else "dense"


def source_keys(rows: list[Row]) -> dict[str, str]:
    """A short key for each source (S1, S2, ...), in the order the rows first cite them."""
    keys: dict[str, str] = {}
    for row in rows:
        keys.setdefault(source_of(row), f"S{len(keys) + 1}")
    return keys


def sources_table(rows: list[Row]) -> str:
    """Each source once: its key, the publication, its rows and their split (a source is
    wholly `fit` or wholly `check`)."""
    lines = ["| key | source | rows | split |", "| --- | --- | ---: | --- |"]
    for source, key in source_keys(rows).items():
        cited = [r for r in rows if source_of(r) == source]
        splits = "/".join(sorted({r["split"] for r in cited}))
        lines.append(f"| {key} | {source} | {len(cited)} | {splits} |")
    return "\n".join(lines) + "\n"


def rows_table(rows: list[Row], predicted: dict[str, float], keys: dict[str, str]) -> str:
    """Every row: its id, source key (`keys`: source_keys of every row), split, setup and
    error."""
    lines = [
        "| id | source | split | what | setup | measured | predicted | error | bound |",
        "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        e = error(row, predicted[row["id"]])
        tolerance = float(row["tolerance"])
        bound = f"±{tolerance:.0%}" + (", missed" if abs(e) > tolerance else "")
        bound = bound if row["bounded"] == "yes" else "n/a"
        lines.append(
            f"| {row['id']} | {keys[source_of(row)]} | {row['split']} | {row['kind']} | "
            f"{_setup(row)} | {row['measured']} "
            f"{row['units']} | {_number(predicted[row['id']])} | {e:+.1%} | {bound} |"
        )
    return "\n".join(lines) + "\n"


def summary_table(rows: list[Row], predicted: dict[str, float], catalog: Catalog) -> str:
    """The bounded check rows' errors by category and metric: median and worst |error|, and
    how many meet the target where one is set."""
    groups: dict[tuple[str, str], list[float]] = {}
    for row in rows:
        if row["split"] == "check" and row["bounded"] == "yes":
            key = (category(row, catalog), row["kind"])
            groups.setdefault(key, []).append(abs(error(row, predicted[row["id"]])))
    lines = [
        "| check rows | what | rows | median \\|error\\| | worst | within target |",
        "| --- | --- | ---: | ---: | ---: | --- |",
    ]
    for (what, kind), values in sorted(groups.items()):
        target = TARGETS.get(kind)
        within = (
            f"{sum(v <= target for v in values)} of {len(values)} within {target:.0%}"
            if target is not None
            else "—"
        )
        lines.append(
            f"| {what} | {kind} | {len(values)} | {statistics.median(values):.1%} | "
            f"{max(values):.1%} | {within} |"
        )
    return "\n".join(lines) + "\n"


def pairs(rows: list[Row]) -> list[tuple[Row, Row]]:
    """(plain decoding, speculation) rows of the same deployment, load and figure."""
    plain = {tuple(r[c] for c in TWIN): r for r in rows if not r.get("draft")}
    out = []
    for row in rows:
        twin = plain.get(tuple(row[c] for c in TWIN))
        if row.get("draft") and twin is not None:
            out.append((twin, row))
    return out


def pairs_table(rows: list[Row], predicted: dict[str, float]) -> str:
    """Speculation over plain decoding, measured and predicted, and whether the prediction
    goes the measured way (pairs within 5 % of even have no way to go)."""
    lines = [
        "| speculative row | what | split | measured ratio | predicted ratio | direction |",
        "| --- | --- | --- | ---: | ---: | --- |",
    ]
    right = counted = 0
    for off, on in pairs(rows):
        measured = float(on["measured"]) / float(off["measured"])
        model = predicted[on["id"]] / predicted[off["id"]]
        if abs(measured - 1.0) <= DIRECTION_MARGIN:
            verdict = "even (within 5 %)"
        else:
            counted += 1
            good = math.copysign(1, measured - 1) == math.copysign(1, model - 1)
            right += good
            verdict = "right" if good else "wrong"
        lines.append(
            f"| {on['id']} | {on['kind']} | {on['split']} | {measured:.2f} | {model:.2f} | "
            f"{verdict} |"
        )
    lines += [
        "",
        f"Direction right in {right} of {counted} pairs whose measured ratio is "
        "more than 5 % from even.",
    ]
    return "\n".join(lines) + "\n"


def table(rows: list[Row], predicted: dict[str, float]) -> str:
    catalog = load_catalog()
    keys = source_keys(rows)
    return "\n".join(
        (
            "Out of sample (`check`: nothing was fitted to these rows or their sources):\n",
            rows_table([r for r in rows if r["split"] == "check"], predicted, keys),
            "In sample (`fit`):\n",
            rows_table([r for r in rows if r["split"] == "fit"], predicted, keys),
            "The sources, each wholly `fit` or wholly `check`:\n",
            sources_table(rows),
            summary_table(rows, predicted, catalog),
            pairs_table(rows, predicted),
        )
    )


def write(text: str, doc: Path = DOCS[0]) -> None:
    """Put `text` between the doc's markers (the doc is created with them when missing)."""
    page = doc.read_text(encoding="utf-8") if doc.exists() else f"# Capacity\n\n{START}{END}"
    head, rest = page.split(START, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(head + START + text + END + tail, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="update the docs")
    parser.add_argument("--rows", help="only the rows whose id holds this text")
    parser.add_argument("--lengths", help="serve --rows with this draw of lengths instead")
    args = parser.parse_args()
    rows = load_rows()
    if args.rows is not None:
        if args.write:
            parser.error("--rows prints a diagnostic; it does not --write the pages")
        chosen = [r for r in rows if args.rows in r["id"]]
        if not chosen:
            parser.error(f"no row's id holds {args.rows!r}")
        if args.lengths is not None:
            if not is_length_draw(args.lengths):
                parser.error(
                    f"--lengths takes {SGLANG_RANDOM} or {VLLM_RANDOM}R with 0 <= R < 1, "
                    f"not {args.lengths!r}"
                )
            chosen = [dict(r, lengths=args.lengths) for r in chosen]
        print(rows_table(chosen, predict(chosen), source_keys(rows)), end="")
        return
    if args.lengths is not None:
        parser.error("--lengths needs --rows: it is a diagnostic of chosen rows")
    text = table(rows, predict(rows))
    if args.write:
        for doc in DOCS:
            write(text, doc)
    else:
        print(text, end="")


if __name__ == "__main__":
    main()
