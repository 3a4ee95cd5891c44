"""Capacity sweeps: the capacity table written beside the decode tables (its data dictionary in
the Parquet fields and schema.json), a simulated row equal to `infersize capacity` for the same
deployment, workload and SLA, the same bytes whatever the workers, and `best --request-rate`
answering from the table."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from infersize.cli import app
from infersize.sweep.capacity.columns import CAPACITY_COLUMNS
from infersize.sweep.config import load_sweep
from infersize.sweep.plan import build_plan
from infersize.sweep.run import RunOptions, run_sweep
from infersize.sweep.upgrade import TABLES_SCHEMA
from tests.support.sweeps import SWEEP

TABLES = ("frontier", "best_pairs", "coverage", "capacity")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """The sweep run once with one worker: (its file, its output folder, its plan)."""
    folder = tmp_path_factory.mktemp("fleet")
    path = folder / "fleet.yaml"
    path.write_text(SWEEP)
    plan = build_plan(*load_sweep(path))
    run_sweep(plan, folder / "jobs1", RunOptions(jobs=1))
    return path, folder / "jobs1", plan


@pytest.fixture(scope="module")
def table(fleet):
    return pl.read_parquet(fleet[1] / "capacity.parquet")


def test_the_capacity_table_has_a_row_per_case_and_rate_with_its_dictionary(fleet):
    _path, out, plan = fleet
    parquet = pq.read_table(out / "capacity.parquet")
    # 2 GPUs x 2 drafters (settings) x 1 workload's 2 rates x 2 SLAs x 3 α scenarios
    assert parquet.num_rows == plan.capacity_rows == 2 * 2 * 2 * 2 * 3 == 48
    assert parquet.schema.names == [c.name for c in CAPACITY_COLUMNS]
    for column in CAPACITY_COLUMNS:
        metadata = parquet.schema.field(column.name).metadata
        assert metadata[b"description"].decode() == column.description
        assert metadata[b"unit"].decode() == column.unit
    schema = json.loads((out / "schema.json").read_text())
    assert list(schema) == list(TABLES)
    assert [c["name"] for c in schema["capacity"]] == parquet.schema.names
    csv = pl.read_csv(out / "capacity.csv")
    assert csv.columns == parquet.schema.names and csv.height == 48
    manifest = json.loads((out / "manifest.json").read_text())
    simulated = int((pl.from_arrow(parquet)["capacity_source"] == "simulator").sum())
    assert manifest["rows"]["capacity"] == 48
    assert manifest["capacity"] == {
        "rows": 48,
        "simulated_rows": simulated,
        "requests": 300,
        "seed": 0,
        "simulate_top": 1,
        "headroom": 1.0,
    }
    assert 0 < simulated < 48  # the screen answered the rest


def test_a_decode_sweep_writes_no_capacity_table(tmp_path):
    quickstart = Path(__file__).resolve().parent.parent / "sweeps" / "quickstart.yaml"
    run_sweep(build_plan(*load_sweep(quickstart)), tmp_path / "out", RunOptions(jobs=1))
    assert not (tmp_path / "out" / "capacity.parquet").exists()
    assert "capacity" not in json.loads((tmp_path / "out" / "schema.json").read_text())
    assert "capacity" not in json.loads((tmp_path / "out" / "manifest.json").read_text())


def test_each_arm_needs_the_gpus_its_capacity_gives(table):
    """GPUs = ⌈rate / capacity per replica⌉ × TP (headroom 1), null where no rate meets the
    SLA; speculation saves the difference; $/hour is GPUs × the catalog's price."""
    for row in table.iter_rows(named=True):
        for arm in ("baseline", "speculative"):
            top = row[f"max_request_rate_{arm}"]
            gpus = None if top <= 0 else math.ceil(row["target_request_rate"] / top - 1e-12)
            assert row[f"gpus_{arm}"] == gpus
            assert row[f"replicas_{arm}"] == gpus
            price = row["price_usd_per_hour"]
            usd = None if gpus is None else round(gpus * price, 2)  # to the cent
            assert row[f"usd_per_hour_{arm}"] == usd
        if row["gpus_baseline"] is not None and row["gpus_speculative"] is not None:
            assert row["speculation_saves_gpus"] == row["gpus_baseline"] - row["gpus_speculative"]
    assert table["price_usd_per_hour"].null_count() == 0  # H100 and L40S have catalog prices


def test_where_speculation_does_not_pay_the_row_says_k_0(table):
    plain = table.filter(pl.col("draft_k") == 0)
    assert plain.height > 0  # the draft at α = 0.1
    assert (plain["max_request_rate_speculative"] == plain["max_request_rate_baseline"]).all()
    paying = table.filter(pl.col("draft_k") > 0)
    assert (paying["max_request_rate_speculative"] > paying["max_request_rate_baseline"]).all()


def test_the_leaders_of_each_group_are_simulated(table):
    """Per (GPU, target, workload, SLA): the row of most requests/s per GPU with speculation
    was answered by the simulator (simulate_top: 1)."""
    for _key, group in table.group_by(["gpu", "target", "workload", "sla"]):
        best = group.sort("max_request_rate_speculative", descending=True).row(0, named=True)
        assert best["capacity_source"] == "simulator", best


def _capacity_json(runner, row: dict, plan, *extra: str) -> dict:
    draft = ["--draft", row["draft"]]
    if row["draft_quant"] != "none":
        draft += ["--draft-quant", row["draft_quant"]]
    args = [
        "capacity",
        "--target",
        row["target"],
        "--gpu",
        row["gpu"],
        "--tp",
        str(row["tp"]),
        "--target-quant",
        row["target_quant"],
        "--kv-dtype",
        row["kv_dtype"],
        *draft,
        "--engine",
        row["engine"],
        "--acceptance-rate",
        repr(row["acceptance_rate"]),
        "--input-tokens",
        "512",
        "--output-tokens",
        "128",
        "--sla",
        row["sla_terms"],
        "--requests",
        "300",
        "--seed",
        "0",
        "--max-k",
        str(max(plan.ks)),
        "--allow-cross-tokenizer",
        "--json",
        *extra,
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_simulated_row_equals_infersize_capacity(fleet, table, runner):
    """The same deployment, workload and SLA given to `infersize capacity --draft-k auto` gives
    the row's K, capacities, replicas and dollars to the digit, and, served at each arm's load
    per replica (target rate / replicas), the row's p50/p99 TTFT and TPOT."""
    plan = fleet[2]
    rows = table.filter((pl.col("capacity_source") == "simulator") & (pl.col("draft_k") > 0))
    row = rows.filter(pl.col("target_request_rate") == 40).row(0, named=True)
    answer = _capacity_json(
        runner,
        row,
        plan,
        "--draft-k",
        "auto",
        "--request-rate",
        "5",
        "--target-request-rate",
        "40",
    )
    assert answer["speculative"]["draft_k"] == row["draft_k"]
    for arm in ("baseline", "speculative"):
        assert answer["max_request_rate"][arm] == row[f"max_request_rate_{arm}"]
        assert answer["replicas"][arm] == row[f"replicas_{arm}"]
        assert answer["gpus"][arm] == row[f"gpus_{arm}"]
        assert answer["usd_per_hour"][arm] == row[f"usd_per_hour_{arm}"]
    assert answer["speculation_saves_gpus"] == row["speculation_saves_gpus"]
    for arm in ("baseline", "speculative"):
        load = 40 / row[f"replicas_{arm}"]
        served = _capacity_json(
            runner, row, plan, "--draft-k", str(row["draft_k"]), "--request-rate", repr(load)
        )[arm]
        for metric in ("ttft", "tpot"):
            for statistic in ("p50", "p99"):
                assert served[f"{metric}_ms"][statistic] == row[f"{metric}_{statistic}_ms_{arm}"]


def test_fewest_gpus_per_gpu_type_for_any_rate(fleet, table, runner):
    """`best --request-rate 25`: per GPU type, the fewest GPUs over the table's rows at the
    middle α scenario, for each arm (⌈25 / capacity⌉ × TP), whatever rate was swept."""
    out = fleet[1]
    result = runner.invoke(
        app, ["best", str(out), "--request-rate", "25", "--sla", "interactive", "--json"]
    )
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["acceptance_scenario"] == 1 and answer["workload"] == "chat"
    rows = table.filter(
        (pl.col("sla") == "interactive") & (pl.col("acceptance_scenario") == 1)
    ).to_dicts()
    assert [entry["gpu"] for entry in answer["rows"]] == ["h100-sxm", "l40s"]
    for entry in answer["rows"]:
        for arm, key in (("baseline", "baseline"), ("speculative", "speculative")):
            needs = [
                math.ceil(25 / r[f"max_request_rate_{arm}"] - 1e-12) * r["tp"]
                for r in rows
                if r["gpu"] == entry["gpu"] and r[f"max_request_rate_{arm}"] > 0
            ]
            assert entry[key]["gpus"] == min(needs)
        assert (
            entry["speculation_saves_gpus"]
            == entry["baseline"]["gpus"] - entry["speculative"]["gpus"]
        )
    text = runner.invoke(
        app, ["best", str(out), "--request-rate", "25", "--sla", "interactive", "--by", "cost"]
    )
    assert text.exit_code == 0, text.output
    assert (
        "Fewest dollars per GPU type for llama-3.1-8b: chat at 25 requests/s, SLA interactive"
        in text.stdout
    )


def test_the_tables_are_the_same_bytes_with_two_workers(fleet, tmp_path):
    _path, out, plan = fleet
    # one per (GPU, target) group, workload and SLA, the first of a group scoring its cells
    assert [(c.capacity, c.decode) for c in plan.chunks] == [
        ((0, 0), True),
        ((0, 1), False),
        ((0, 0), True),
        ((0, 1), False),
    ]
    run_sweep(plan, tmp_path / "jobs2", RunOptions(jobs=2))
    for name in TABLES:
        for kind in ("parquet", "csv"):
            file = f"{name}.{kind}"
            assert (tmp_path / "jobs2" / file).read_bytes() == (out / file).read_bytes(), file


def test_the_tables_are_the_same_bytes_on_a_dask_cluster(fleet, tmp_path, runner):
    distributed = pytest.importorskip("distributed")
    path, out, _plan = fleet
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        result = runner.invoke(
            app,
            [
                "sweep",
                "run",
                str(path),
                "--out",
                str(tmp_path / "dask"),
                "--backend",
                "dask",
                "--scheduler",
                cluster.scheduler_address,
                "-q",
            ],
        )
    assert result.exit_code == 0, result.output
    for name in TABLES:
        file = f"{name}.parquet"
        assert (tmp_path / "dask" / file).read_bytes() == (out / file).read_bytes(), file


def test_the_run_summary_counts_capacity_rows_not_cells_per_second(fleet, tmp_path, runner):
    """A capacity sweep's time goes to its simulations, so the summary counts its rows and the
    simulated share instead of a cells/s figure (the manifest holds the same counts)."""
    path, out, _plan = fleet
    result = runner.invoke(app, ["sweep", "run", str(path), "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    figures = json.loads((out / "manifest.json").read_text())["capacity"]
    lines = result.output.splitlines()
    assert re.fullmatch(
        rf"\d+ cells and {figures['rows']} capacity rows in [\d.]+ s; frontier \d+ rows, "
        r"best_pairs \d+ rows",
        lines[0],
    ), lines[0]
    assert lines[1].startswith(
        f"capacity: {figures['simulated_rows']} of {figures['rows']} rows answered by the "
        "simulator; fewest GPUs for a load: infersize best "
    ), lines[1]
    assert "cells/s" not in result.output


# Each bad workload or SLA entry: the sweep file, the line and the key of the mistake.
BAD_ENTRIES = [
    (
        ('interactive: "ttft:p99<=1000ms;tpot:p99<=40ms"', 'interactive: "ttft:p99<=fast"'),
        "line 20: key 'slas.interactive': Value error, term 'ttft:p99<=fast' is not a target: "
        "write metric:statistic<=limit with a unit, e.g. ttft:p99<=2000ms;tpot:p99<=50ms",
    ),
    (
        ('relaxed: "ttft:p99<=5s;tpot:p99<=100ms"', "relaxed: 5"),
        "line 21: key 'slas.relaxed': Input should be a valid string",
    ),
    (
        ("input_tokens: 512", "input_tokens: -5"),
        "line 18: key 'workloads.0.input_tokens': Input should be greater than or equal to 1",
    ),
    (
        ("output_tokens: 128}", 'output_tokens: 128, arrival: "gamma:cv=-1"}'),
        "line 18: key 'workloads.0.arrival': Value error, gamma's coefficient of variation must "
        "be in [0.01, 100], got 'cv=-1'",
    ),
    (
        ("input_tokens: 512, output_tokens: 128", "lengths: nothere.csv"),
        "line 18: key 'workloads.0.lengths': {folder}/nothere.csv: no such file",
    ),
    (
        ("input_tokens: 512, output_tokens: 128", "input_tokens: 512"),
        "line 18: key 'workloads.0': Value error, needs input_tokens and output_tokens, or "
        "lengths (a trace file)",
    ),
    (
        (
            "  - {name: chat,",
            "  - {name: chat, input_tokens: 9, output_tokens: 9}\n  - {name: chat,",
        ),
        "line 17: key 'workloads': Value error, workload name 'chat' is used twice; names must "
        "differ",
    ),
    (
        ("target_request_rates: [5, 40]", "target_request_rates: [0]"),
        "line 22: key 'target_request_rates': Value error, request rates must be numbers in "
        "[1e-06, 1e+09]",
    ),
    (
        ("slas:", "slax:"),
        "line 19: key 'slax': unknown key",
    ),
    (
        ("capacity: {requests: 300, simulate_top: 1}", "capacity: {requests: 0}"),
        "line 23: key 'capacity.requests': Input should be greater than or equal to 1",
    ),
    (
        ("output_tokens: 128}", "output_tokens: 128, kind: chatt}"),
        "line 18: key 'workloads.0.kind': Value error, unknown workload kind 'chatt': did you "
        "mean 'chat'?",
    ),
    (
        ("capacity: {requests: 300, simulate_top: 1}", "capacity: {replications: 31}"),
        "line 23: key 'capacity.replications': Input should be less than or equal to 30",
    ),
]


def test_tp_auto_answers_every_size_of_one_node_that_divides_the_heads(tmp_path):
    """`tp: auto` is TP 1, 2, 4 and 8 for Llama-3.1-8B's 32 heads: the plan holds a setting at
    each, so `best --request-rate` picks the layout of fewest GPUs among them."""
    path = tmp_path / "fleet.yaml"
    path.write_text(SWEEP.replace("tp: [1]", "tp: auto", 1))
    plan = build_plan(*load_sweep(path))
    assert sorted({s.tp for s in plan.settings if s.gpu == "h100-sxm"}) == [1, 2, 4, 8]


@pytest.mark.parametrize(("change", "message"), BAD_ENTRIES, ids=lambda v: str(v)[:30])
def test_a_bad_workload_or_sla_entry_names_its_file_line_and_key(runner, tmp_path, change, message):
    old, new = change
    assert old in SWEEP
    path = tmp_path / "fleet.yaml"
    path.write_text(SWEEP.replace(old, new, 1))
    result = runner.invoke(app, ["sweep", "validate", str(path)])
    assert result.exit_code == 2
    assert result.stderr == f"error: {path}: {message.format(folder=tmp_path)}\n"


# llama-2-7b holds 4,096 positions (its config.json's max_position_embeddings); a 6,000-token
# prompt with a 300-token answer is beyond it, within llama-3.1-8b's 131,072.
LONG_PROMPTS = """\
name: long-prompts
pairs:
  - {target: llama-3.1-8b, draft: ngram, acceptance_rates: [0.5]}
  - {target: llama-2-7b, draft: ngram, acceptance_rates: [0.5]}
methods: [ngram]
target_quants: [fp16]
draft_quants: [fp16]
gpus: [{name: h100, tp: [1]}]
context_lengths: [4096]
batch_sizes: [1]
draft_k: {start: 1, stop: 2, step: 1}
engine: vllm
workloads:
  - {name: rag, input_tokens: 6000, output_tokens: 300}
slas:
  relaxed: "ttft:p99<=5s;tpot:p99<=100ms"
target_request_rates: [2]
capacity: {requests: 200, simulate_top: 1}
"""


def test_a_workload_beyond_a_models_context_never_answers_best(tmp_path, runner):
    path = tmp_path / "long.yaml"
    path.write_text(LONG_PROMPTS)
    out = tmp_path / "out"
    result = runner.invoke(app, ["sweep", "run", str(path), "--out", str(out), "-q"])
    assert result.exit_code == 0, result.output
    table = pl.read_parquet(out / "capacity.parquet")
    held = dict(zip(table["target"], table["within_max_context"], strict=True))
    assert held == {"llama-3.1-8b": True, "llama-2-7b": False}
    limits = dict(zip(table["target"], table["target_max_context_tokens"], strict=True))
    assert limits == {"llama-3.1-8b": 131072, "llama-2-7b": 4096}
    args = ["best", str(out), "--request-rate", "2", "--sla", "relaxed", "--json"]
    answer = json.loads(runner.invoke(app, args).output)
    chosen = {row[arm]["target"] for row in answer["rows"] for arm in ("baseline", "speculative")}
    assert chosen == {"llama-3.1-8b"}
    assert (
        "llama-2-7b cannot hold the rag workload's requests (max_position_embeddings)"
        in (answer["notes"])
    )
    alone = runner.invoke(app, [*args[:-1], "--target", "llama-2-7b"])
    assert alone.exit_code == 2
    assert alone.output.strip().endswith(
        "no deployment holds the rag workload's longest request (prompt plus answer) within "
        "its models' max_position_embeddings"
    ), alone.output


def _as_schema_1(out: Path, tmp_path: Path) -> Path:
    """A copy of the sweep's folder as schema 1 wrote it: no tables_schema in the manifest, and
    the tables without the columns added during schema 1's life."""
    older = tmp_path / "older"
    shutil.copytree(out, older)
    dropped = {
        "capacity": ["within_max_context", "target_max_context_tokens", "draft_max_context_tokens"],
        "best_pairs": ["method"],
        "coverage": [
            "target_max_context_tokens",
            "beyond_max_context_rows",
            "fitting_within_max_context_rows",
        ],
    }
    for table, columns in dropped.items():
        path = older / f"{table}.parquet"
        pl.read_parquet(path).drop(columns).write_parquet(path)
    manifest = json.loads((older / "manifest.json").read_text())
    del manifest["tables_schema"]
    (older / "manifest.json").write_text(json.dumps(manifest))
    return older


def test_tables_from_before_the_schema_number_read_as_they_did(fleet, tmp_path, runner):
    """Schema 1's tables, upgraded at read time: every request held, every pair a draft model,
    and the same answers as today's tables give."""
    from infersize.sweep.capacity.best import FleetAsk, fewest_gpus

    _path, out, _plan = fleet
    older = _as_schema_1(out, tmp_path)
    ask = FleetAsk(request_rate=5.0, sla="relaxed", workload=None)
    assert fewest_gpus(older, ask).rows == fewest_gpus(out, ask).rows
    today = runner.invoke(app, ["best", str(out), "--json"])
    before = runner.invoke(app, ["best", str(older), "--json"])
    assert before.exit_code == 0, before.output
    rows = json.loads(before.stdout)["rows"]
    assert rows and {row["method"] for row in rows} == {"draft"}
    assert len(rows) == len(json.loads(today.stdout)["rows"])


def test_tables_of_a_newer_schema_are_refused_in_one_line(fleet, tmp_path, runner):
    _path, out, _plan = fleet
    newer = tmp_path / "newer"
    shutil.copytree(out, newer)
    manifest = json.loads((newer / "manifest.json").read_text())
    manifest["tables_schema"] = TABLES_SCHEMA + 1
    (newer / "manifest.json").write_text(json.dumps(manifest))
    result = runner.invoke(app, ["best", str(newer)])
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: the tables were written by a newer infersize (tables schema {TABLES_SCHEMA + 1}; "
        f"this one reads up to {TABLES_SCHEMA}): install that release to read them\n"
    )


def test_simulated_rows_put_the_k_schedules_capacity_beside_the_static_ks(table):
    simulated = table.filter((pl.col("capacity_source") == "simulator") & (pl.col("draft_k") > 0))
    assert simulated.height > 0
    assert simulated["max_request_rate_k_schedule"].null_count() == 0
    assert (simulated["max_request_rate_k_schedule"] > 0).all()
    screened = table.filter(pl.col("capacity_source") == "mean-field")
    assert screened["max_request_rate_k_schedule"].null_count() == screened.height


def test_every_row_says_where_speculation_stops_paying(table):
    """0 where the draft never pays (α 0.1), and no lower for a pair at a higher α (null: it
    pays at every rate both arms sustain)."""
    assert (table.filter(pl.col("acceptance_rate") == 0.1)["break_even_request_rate"] == 0).all()
    assert table["break_even_request_rate"].drop_nulls().len() > 0
    keys = ["gpu", "target", "draft", "draft_quant", "workload", "sla", "target_request_rate"]
    for _key, group in table.group_by(keys):
        rates = group.sort("acceptance_rate")["break_even_request_rate"].fill_null(math.inf)
        assert rates.to_list() == sorted(rates.to_list()), group


def test_simulate_all_has_the_simulator_answer_every_row(fleet, table, tmp_path):
    """capacity: {simulate_all: true}: every row the simulator's, each row the screened run
    simulated the same to the bit, the manifest saying so; the run's hash moves with it, and
    a sweep that leaves it out hashes as before (its resolved capacity has no such key)."""
    path, _, plan = fleet
    every = tmp_path / "every.yaml"
    every.write_text(
        path.read_text().replace("simulate_top: 1", "simulate_top: 1, simulate_all: true")
    )
    assert every.read_text() != path.read_text()
    all_plan = build_plan(*load_sweep(every))
    assert all_plan.capacity is not None and all_plan.capacity.simulate_all
    run_sweep(all_plan, tmp_path / "out", RunOptions(jobs=1))
    simulated = pl.read_parquet(tmp_path / "out" / "capacity.parquet")
    assert (simulated["capacity_source"] == "simulator").all()
    both = table["capacity_source"] == "simulator"
    assert table.filter(both).equals(simulated.filter(both))
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["capacity"]["simulate_all"] is True
    assert manifest["capacity"]["simulated_rows"] == simulated.height
    assert "simulate_all" not in plan.resolved()["capacity"]
    assert all_plan.resolved()["capacity"]["simulate_all"] is True
