"""`infersize capacity` against public serving measurements (tests/data/serving_measurements.csv,
one measured figure a row, each with its source and the quoted figure): every row predicted
through the path the command takes (a CapacityRequest with the row's deployment under the row's
engine preset, its mean lengths and its load, served by the simulator without speculation), and
printed as a Markdown table with the mean absolute error per metric over the bounded rows.

No constant of infersize is fitted on these rows: they only check.

Usage: python benchmarks/serving_calibration.py [--write]
--write puts the tables into docs/capacity.md and docs/calibration.md between their
serving-calibration markers.
"""

from __future__ import annotations

import argparse
import csv
from collections.abc import Iterable
from pathlib import Path

from infersize.catalog.store import Catalog, load_catalog
from infersize.core.engines import EngineSettings
from infersize.core.serving.metrics import ServingMetrics
from infersize.service.capacity.arm import make_arm, serve
from infersize.service.capacity.request import CapacityRequest, Traffic, prepare_capacity
from infersize.service.request import SpecRequest
from infersize.service.resolve import DeploymentRequest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "serving_measurements.csv"
DOCS = (ROOT / "docs" / "capacity.md", ROOT / "docs" / "calibration.md")
START, END = "<!-- serving-calibration:start -->\n", "<!-- serving-calibration:end -->\n"
# the columns that say what was served: rows that share them share one simulation
SETUP = (
    "model",
    "precision",
    "kv_dtype",
    "gpu",
    "tp",
    "engine",
    "gpu_memory_utilization",
    "input_tokens",
    "output_tokens",
    "load_kind",
    "load",
    "requests",
)
KINDS = {  # kind: (metric, statistic, factor to the row's units); metric None: a throughput
    "ttft_mean_ms": ("ttft", "mean", 1e3),
    "ttft_p50_ms": ("ttft", "p50", 1e3),
    "ttft_p99_ms": ("ttft", "p99", 1e3),
    "tpot_mean_ms": ("tpot", "mean", 1e3),
    "tpot_p50_ms": ("tpot", "p50", 1e3),
    "tpot_p99_ms": ("tpot", "p99", 1e3),
    "itl_mean_ms": ("itl", "mean", 1e3),
    "output_tokens_per_s": (None, "output_tokens_per_s", 1.0),
    "requests_per_s": (None, "requests_per_s", 1.0),
}


def load_rows(path: Path = DATA) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def capacity_request(row: dict[str, str]) -> CapacityRequest:
    """The request `infersize capacity --draft none` builds for the row's deployment and load."""
    inputs, outputs = int(row["input_tokens"]), int(row["output_tokens"])
    utilization = float(row["gpu_memory_utilization"]) if row["gpu_memory_utilization"] else None
    closed = row["load_kind"] == "concurrency"
    deployment = DeploymentRequest(
        target=row["model"],
        gpu=row["gpu"],
        target_quant=row["precision"],
        kv_dtype=row["kv_dtype"],
        tp=int(row["tp"]),
    )
    spec = SpecRequest(
        deployment=deployment,
        context_length=inputs + outputs,
        engine=EngineSettings(engine=row["engine"], gpu_memory_utilization=utilization),
    )
    traffic = Traffic(
        input_tokens=(inputs,),
        output_tokens=(outputs,),
        concurrency=int(row["load"]) if closed else None,
        request_rate=None if closed else float(row["load"]),
        requests=int(row["requests"]),
    )
    return CapacityRequest(spec=spec, traffic=traffic)


def simulate_row(row: dict[str, str], catalog: Catalog) -> ServingMetrics:
    """The baseline arm's metrics at the row's load."""
    request = capacity_request(row)
    arm = make_arm(prepare_capacity(request, catalog), request.traffic, 0)
    return serve(arm, request.traffic)


def value(measured: ServingMetrics, kind: str) -> float:
    metric, statistic, factor = KINDS[kind]
    if metric is None:
        return float(getattr(measured, statistic))
    return measured.value(metric, statistic) * factor


def predict(rows: Iterable[dict[str, str]]) -> dict[str, float]:
    """Every row's prediction, by id (one simulation per setup)."""
    catalog = load_catalog()
    served: dict[tuple[str, ...], ServingMetrics] = {}
    predicted = {}
    for row in rows:
        key = tuple(row[column] for column in SETUP)
        if key not in served:
            served[key] = simulate_row(row, catalog)
        predicted[row["id"]] = value(served[key], row["kind"])
    return predicted


def error(row: dict[str, str], predicted: float) -> float:
    """Relative error of the prediction: predicted / measured - 1."""
    return predicted / float(row["measured"]) - 1.0


def _number(x: float) -> str:
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.2f}" if abs(x) >= 1 else f"{x:.3f}"


def _setup(row: dict[str, str]) -> str:
    load = "concurrency" if row["load_kind"] == "concurrency" else "rate"
    utilization = row["gpu_memory_utilization"]
    engine = row["engine"] + (f" at {utilization} of memory" if utilization else "")
    return (
        f"{row['model']} {row['precision']} (KV {row['kv_dtype']}), {row['gpu']} ×{row['tp']}, "
        f"{engine}, {int(row['input_tokens']):,}/{int(row['output_tokens']):,} tokens, "
        f"{load} {row['load']}, {row['requests']} requests"
    )


def table(rows: list[dict[str, str]], predicted: dict[str, float]) -> str:
    """The rows (measured, predicted, error, and the bound of a bounded row, marked where the
    prediction misses it), then the mean absolute error per metric over the bounded rows."""
    lines = [
        "| id | what | setup | measured | predicted | error | bound |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    errors: dict[str, list[float]] = {}
    for row in rows:
        e = error(row, predicted[row["id"]])
        bounded = row["bounded"] == "yes"
        if bounded:
            errors.setdefault(row["kind"], []).append(abs(e))
        tolerance = float(row["tolerance"])
        bound = f"±{tolerance:.0%}" + (", missed" if abs(e) > tolerance else "")
        bound = bound if bounded else "n/a"
        lines.append(
            f"| {row['id']} | {row['kind']} | {_setup(row)} | {row['measured']} "
            f"{row['units']} | {_number(predicted[row['id']])} | {e:+.1%} | {bound} |"
        )
    lines += [
        "",
        "| what | bounded rows | mean absolute error | worst |",
        "| --- | ---: | ---: | ---: |",
    ]
    for kind in KINDS:
        if kind in errors:
            values = errors[kind]
            lines.append(
                f"| {kind} | {len(values)} | {sum(values) / len(values):.1%} | {max(values):.1%} |"
            )
    return "\n".join(lines) + "\n"


def write(text: str, doc: Path = DOCS[0]) -> None:
    """Put `text` between the doc's markers (the doc is created with them when missing)."""
    page = doc.read_text(encoding="utf-8") if doc.exists() else f"# Capacity\n\n{START}{END}"
    head, rest = page.split(START, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(head + START + text + END + tail, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="update the docs")
    args = parser.parse_args()
    rows = load_rows()
    text = table(rows, predict(rows))
    if args.write:
        for doc in DOCS:
            write(text, doc)
    else:
        print(text, end="")


if __name__ == "__main__":
    main()
