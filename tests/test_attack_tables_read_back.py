"""A capacity sweep's tables and manifest edited, truncated or written by another tool, then
read back by `best --request-rate`, `plot capacity` and `report`: each refused in one line that
names the file and the column or key, with exit code 2, never read into a wrong answer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from infersize.cli import app
from tests.support.sweeps import TWO_TARGETS

BEST = ["--request-rate", "10", "--sla", "interactive", "--workload", "chat"]
DAMAGED = "not a table infersize wrote, or one edited since; run the sweep again"
RATES = ["max_request_rate_baseline", "max_request_rate_speculative"]


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    folder = tmp_path_factory.mktemp("swept")
    sweep = folder / "two.yaml"
    sweep.write_text(TWO_TARGETS.replace("requests: 200", "requests: 100"))
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["sweep", "run", str(sweep), "--out", str(folder / "o")])
    assert result.exit_code == 0, result.output
    return folder / "o"


def _copy(swept: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the output folder, and its published generation (where the files are)."""
    out = tmp_path / "o"
    shutil.copytree(swept, out, symlinks=True)
    return out, out / (out / "current").readlink()


TABLE_EDITS = [
    (lambda f: f.drop("tp"), "column 'tp' is missing"),
    (lambda f: f.drop("capacity_source"), "column 'capacity_source' is missing"),
    (lambda f: f.drop("price_usd_per_hour"), "column 'price_usd_per_hour' is missing"),
    (
        lambda f: f.with_columns(pl.col("tp").cast(pl.String)),
        "column 'tp' holds String values, not whole numbers",
    ),
    (lambda f: f.with_columns(pl.lit(0, pl.Int64).alias("tp")), "column 'tp' holds values below 1"),
    (
        lambda f: f.with_columns(
            pl.when(pl.int_range(pl.len()) == 0).then(None).otherwise(pl.col("sla")).alias("sla")
        ),
        "column 'sla' is empty in some rows",
    ),
    (
        lambda f: f.with_columns([pl.lit(float("nan")).alias(c) for c in RATES]),
        "column 'max_request_rate_baseline' holds NaN or infinite values",
    ),
    (
        lambda f: f.with_columns([pl.lit(-5.0).alias(c) for c in RATES]),
        "column 'max_request_rate_baseline' holds values below 0",
    ),
]


@pytest.mark.parametrize(("edit", "problem"), TABLE_EDITS, ids=[p for _, p in TABLE_EDITS])
def test_an_edited_capacity_table_is_refused_by_its_column(swept, tmp_path, runner, edit, problem):
    out, generation = _copy(swept, tmp_path)
    table = generation / "capacity.parquet"
    frame = pl.read_parquet(table)
    table.unlink()
    edit(frame).write_parquet(table)
    result = runner.invoke(app, ["best", str(out), "--target", "llama-3.1-8b", *BEST])
    expected = f"error: {out}/capacity.parquet: {problem}: {DAMAGED}\n"
    assert (result.exit_code, result.output) == (2, expected)


MANIFEST_EDITS = [
    (("headroom", "abc"), "capacity.headroom must be in [1, 1000], got 'abc'"),
    (("headroom", float("nan")), "capacity.headroom must be in [1, 1000], got nan"),
    (("headroom", 1e308), "capacity.headroom must be in [1, 1000], got 1e+308"),
    (("requests", 2.5), "capacity.requests must be in 1..1,000,000, got 2.5"),
    ((None, [1, 2]), "capacity is not an object"),
]


@pytest.mark.parametrize(("edit", "problem"), MANIFEST_EDITS, ids=[p for _, p in MANIFEST_EDITS])
@pytest.mark.parametrize(
    "command",
    [
        ["best", "{out}", "--target", "llama-3.1-8b", *BEST],
        ["plot", "capacity", "{out}", "--sla", "interactive", "--workload", "chat"],
        ["report", "{out}"],
    ],
    ids=["best", "plot", "report"],
)
def test_a_damaged_manifest_is_refused_by_its_key(swept, tmp_path, runner, edit, problem, command):
    out, generation = _copy(swept, tmp_path)
    manifest_path = generation / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    key, value = edit
    if key is None:
        manifest["capacity"] = value
    else:
        manifest["capacity"][key] = value
    manifest_path.unlink()
    manifest_path.write_text(json.dumps(manifest))
    args = [a.replace("{out}", str(out)) for a in command]
    args += ["--out", str(tmp_path / "figure.png")] if command[0] == "plot" else []
    args += ["--out", str(tmp_path / "report.html")] if command[0] == "report" else []
    result = runner.invoke(app, args)
    expected = f"error: {out}/manifest.json: damaged ({problem}); run the sweep again\n"
    assert (result.exit_code, result.output) == (2, expected)


@pytest.mark.parametrize(("rate", "shown"), [("1e308", "1e+308"), ("nan", "nan"), ("0", "0")])
def test_a_figures_largest_rate_is_bounded_as_a_target_rate(swept, tmp_path, runner, rate, shown):
    """--max-rate 1e308 overflowed polars' integers while the figure was drawn."""
    args = ["plot", "capacity", str(swept), "--sla", "interactive", "--workload", "chat"]
    result = runner.invoke(app, [*args, "--max-rate", rate, "--out", str(tmp_path / "f.png")])
    assert (result.exit_code, result.output) == (
        2,
        f"error: --max-rate must be a number of requests/s in [1e-06, 1e+09], got {shown}\n",
    )
