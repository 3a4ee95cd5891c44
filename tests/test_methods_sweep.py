"""A sweep over speculative methods: the `methods` axis adds each target's published
heads and n-gram lookup, drops other methods, and best_pairs ranks the methods against each
other; read back with pyarrow as a BI tool would."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from infersize.cli import app
from infersize.errors import SweepConfigError
from infersize.sweep.config import load_sweep
from infersize.sweep.plan import build_plan

ROOT = Path(__file__).resolve().parent.parent

BASE = """\
name: m
targets: [llama-3.1-8b, qwen2.5-7b]
drafts: [llama-3.2-1b, qwen2.5-0.5b]
gpus: [h100]
context_lengths: [4096]
batch_sizes: [1, 64]
draft_k: {start: 1, stop: 6, step: 1}
"""


def plan_of(tmp_path: Path, text: str):
    path = tmp_path / "sweep.yaml"
    path.write_text(textwrap.dedent(text))
    config, doc = load_sweep(path)
    return build_plan(config, doc)


def test_methods_add_published_heads_and_drop_other_methods(tmp_path):
    plan = plan_of(tmp_path, BASE + "methods: [eagle3]\n")
    assert {(s.target, s.draft, s.method) for s in plan.settings} == {
        ("llama-3.1-8b", "eagle3-llama3.1-8b", "eagle3")
    }
    # heads run at their checkpoint's precision, whatever draft_quants lists
    assert {s.draft_quant for s in plan.settings} == {"fp16"}
    assert plan.skipped["targets without a published eagle3 drafter"] == 1  # qwen2.5-7b
    assert plan.skipped["pairs of methods not asked"] == 2  # the two draft-model pairs


def test_without_methods_the_grid_is_as_before(tmp_path):
    plan = plan_of(tmp_path, BASE)
    assert {s.method for s in plan.settings} == {"draft"}
    assert len({(s.target, s.draft) for s in plan.settings}) == 2


def test_ngram_needs_the_users_acceptance(tmp_path):
    with pytest.raises(SweepConfigError) as error:
        plan_of(tmp_path, BASE + "methods: [ngram]\n")
    assert str(error.value).endswith(
        "(llama-3.1-8b, ngram): n-gram acceptance depends on how much the output repeats the "
        "prompt: give workload_kind (published for chat, code-editing, math, mixed, summarization) "
        "or "
        "acceptance_rate for llama-3.1-8b with ngram; in a sweep, give the pair its "
        "acceptance_rates under pairs, or acceptance_rates for every pair"
    )
    plan = plan_of(tmp_path, BASE + "methods: [ngram]\nacceptance_rates: [0.5]\n")
    assert {(s.draft, s.draft_quant, s.method) for s in plan.settings} == {
        ("ngram", "none", "ngram")
    }


def test_unknown_method_names_the_choices(tmp_path, runner):
    path = tmp_path / "sweep.yaml"
    path.write_text(BASE + "methods: [lookahead]\n")
    result = runner.invoke(app, ["sweep", "validate", str(path)])
    assert result.exit_code == 2
    assert "unknown method 'lookahead': choose draft, eagle, eagle3, mtp, medusa, " in result.stderr


@pytest.fixture(scope="module")
def methods_run(tmp_path_factory):
    from typer.testing import CliRunner

    out = tmp_path_factory.mktemp("methods") / "out"
    sweep = ROOT / "sweeps" / "methods.yaml"
    result = CliRunner().invoke(app, ["sweep", "run", str(sweep), "--out", str(out), "-q"])
    assert result.exit_code == 0, result.output
    yield out
    shutil.rmtree(out, ignore_errors=True)


def test_best_pairs_rank_the_methods_per_gpu(methods_run):
    table = pq.read_table(methods_run / "best_pairs.parquet")
    assert set(table.column("method").to_pylist()) == {"draft", "eagle3", "ngram"}
    one = table.filter(
        pc.and_(
            pc.and_(pc.equal(table["gpu"], "h100-sxm"), pc.equal(table["target"], "llama-3.3-70b")),
            pc.and_(pc.equal(table["batch_size"], 16), pc.equal(table["acceptance_scenario"], 1)),
        )
    ).sort_by("rank")
    methods = one.column("method").to_pylist()
    assert {"draft", "eagle3", "ngram"} <= set(methods)  # every method ranked in one group
    # ranked by what each GPU delivers (speculative tokens/s per GPU), so TP sizes compare
    per_gpu = one.column("speculative_tokens_per_s_per_gpu").to_pylist()
    assert per_gpu == sorted(per_gpu, reverse=True)
    assert one.column("rank").to_pylist() == list(range(1, len(per_gpu) + 1))


def test_best_names_the_method(methods_run, runner):
    result = runner.invoke(app, ["best", str(methods_run), "--gpu", "h100", "--batch-size", "64"])
    assert result.exit_code == 0, result.output
    header = next(line for line in result.stdout.splitlines() if "method" in line)
    assert header.split()[:7] == ["gpu", "target", "tp", "KV", "draft", "method", "K"]


PROFILE_SWEEP = """\
name: p
pairs:
  - target: llama-3.1-8b
    draft: eagle3-llama3.1-8b
    acceptance_profile: [0.7296, 0.5208, 0.3545]
  - {target: llama-3.1-8b, draft: llama-3.2-1b, acceptance_rates: [0.7]}
gpus: [h100]
context_lengths: [4096]
batch_sizes: [1, 32]
draft_k: {start: 1, stop: 6, step: 1}
output: {best_top_n: 5}
"""


def test_a_pair_profile_scores_as_spec_does(tmp_path, runner):
    """vLLM's CI per-position acceptance for EAGLE-3 on Llama-3.1-8B (K=3) as a pair's
    profile: the sweep's best K and speedup equal `spec --acceptance-rates` at each batch."""
    (tmp_path / "p.yaml").write_text(PROFILE_SWEEP)
    out = tmp_path / "out"
    result = runner.invoke(app, ["sweep", "run", str(tmp_path / "p.yaml"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    table = pq.read_table(out / "best_pairs.parquet").to_pylist()
    rows = {
        r["batch_size"]: r
        for r in table
        if r["draft"] == "eagle3-llama3.1-8b" and r["target_quant"] == "bf16"
    }
    assert {r["acceptance_source"] for r in rows.values()} == {"profile"}
    for batch, row in rows.items():
        spec = runner.invoke(
            app,
            [
                "spec",
                "--target",
                "llama-3.1-8b",
                "--draft",
                "eagle3-llama3.1-8b",
                "--gpu",
                "h100",
                "--target-quant",
                "bf16",
                "--acceptance-rates",
                "0.7296,0.5208,0.3545",
                "--batch-size",
                str(batch),
                "--max-k",
                "6",
                "--draft-k",
                "3",
                "--json",
            ],
        )
        data = json.loads(spec.stdout)
        assert row["optimal_k"] == data["optimal_k"]
        assert row["speedup"] == pytest.approx(data["speedup_at_optimal_k"], rel=1e-9)
    # the α column holds the i.i.d. rate with the profile's mean acceptance length at K=3
    assert rows[1]["acceptance_rate"] == pytest.approx(0.7183, abs=1e-4)


def test_profile_and_rates_together_are_refused(tmp_path, runner):
    text = PROFILE_SWEEP.replace(
        "acceptance_profile: [0.7296, 0.5208, 0.3545]",
        "acceptance_profile: [0.7296, 0.5208, 0.3545]\n    acceptance_rates: [0.6]",
    )
    (tmp_path / "p.yaml").write_text(text)
    result = runner.invoke(app, ["sweep", "validate", str(tmp_path / "p.yaml")])
    assert result.exit_code == 2
    assert "give acceptance_rates or acceptance_profile, not both" in result.stderr


def test_the_report_compares_methods_per_gpu_and_target(methods_run, runner):
    out = methods_run / "report.html"
    result = runner.invoke(app, ["report", str(methods_run), "--out", str(out)])
    assert result.exit_code == 0, result.output
    page = out.read_text()
    best = pq.read_table(methods_run / "best_pairs.parquet")
    assert "<th>method</th>" in page
    targets = set(best.column("target").to_pylist())
    gpus = set(best.column("gpu").to_pylist())
    for gpu in gpus:
        for target in targets:
            assert f"{target} on {gpu}: speedup of each method's best row over batch size" in page
