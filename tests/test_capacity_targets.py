"""A capacity sweep of two target models: no answer mixes them. `best --request-rate` answers
for one target, named in its header, and asks which when the table holds several; `plot
capacity` draws one panel per target (or the one `--target` names), each titled with it; the
report has a section per target."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest

from infersize.cli import app
from infersize.sweep.config import load_sweep
from infersize.sweep.plan import build_plan
from infersize.sweep.run import RunOptions, run_sweep
from tests.support.sweeps import TWO_TARGETS

TARGETS = ["llama-3.1-8b", "llama-3.2-3b"]
ASK = ["--request-rate", "40", "--sla", "interactive"]


@pytest.fixture(scope="module")
def two_targets(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("two-targets")
    (folder / "two.yaml").write_text(TWO_TARGETS)
    run_sweep(build_plan(*load_sweep(folder / "two.yaml")), folder / "out", RunOptions(jobs=1))
    return folder / "out"


def _best(runner, out: Path, *args: str) -> dict:
    result = runner.invoke(app, ["best", str(out), *ASK, *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("extra", [[], ["--json"], ["--gpu", "l40s"]], ids=str)
def test_best_asks_which_target_when_the_table_holds_several(runner, two_targets, extra):
    result = runner.invoke(app, ["best", str(two_targets), *ASK, *extra])
    assert (result.exit_code, result.stdout, result.stderr) == (
        2,
        "",
        "error: the sweep has several targets (llama-3.1-8b, llama-3.2-3b): choose one with "
        "--target\n",
    )


def test_best_names_the_target_it_answers_for(runner, two_targets, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")  # one line per row
    result = runner.invoke(app, ["best", str(two_targets), *ASK, "--target", "llama-3.2-3b"])
    assert result.exit_code == 0, result.output
    assert [line.rstrip() for line in result.stdout.splitlines()] == [
        "Fewest GPUs per GPU type for llama-3.2-3b: chat at 40 requests/s, SLA interactive; "
        "α scenario 0; headroom 1",
        "",
        "  gpu                  plain decoding   GPUs    $/h                   with speculation "
        "  K    GPUs    $/h   saves",
        " " + "─" * 113,
        "  h100-sxm   llama-3.2-3b fp8 kv fp16      1   3.49   llama-3.2-3b fp8 kv fp16 + ngram "
        "  0       1   3.49      +0",
        "  l40s       llama-3.2-3b fp8 kv fp16      1   1.09   llama-3.2-3b fp8 kv fp16 + ngram "
        "  0       1   1.09      +0",
        "",
    ]
    other = runner.invoke(app, ["best", str(two_targets), *ASK, "--target", "llama-3.1-8b"])
    assert other.stdout.startswith(
        "Fewest GPUs per GPU type for llama-3.1-8b: chat at 40 requests/s, SLA interactive;"
    )
    assert "llama-3.2-3b" not in other.stdout


def test_best_json_adds_the_target_and_keeps_its_keys(runner, two_targets):
    """Every key `best --request-rate --json` printed before, plus the target answered for;
    each target's GPUs are the fewest over its own rows (⌈40 / capacity⌉ × TP)."""
    table = pl.read_parquet(two_targets / "capacity.parquet").filter(pl.col("sla") == "interactive")
    for target in TARGETS:
        answer = _best(runner, two_targets, "--target", target)
        assert list(answer) == [
            "request_rate",
            "sla",
            "workload",
            "target",
            "by",
            "acceptance_scenario",
            "rows",
            "notes",
        ]
        assert answer["target"] == target
        assert [entry["gpu"] for entry in answer["rows"]] == ["h100-sxm", "l40s"]
        for entry in answer["rows"]:
            for arm, key in (("baseline", "baseline"), ("speculative", "speculative")):
                rows = table.filter((pl.col("target") == target) & (pl.col("gpu") == entry["gpu"]))
                fewest = min(
                    -(-40 // r) * tp
                    for r, tp in zip(rows[f"max_request_rate_{arm}"], rows["tp"], strict=True)
                )
                assert (entry[key]["target"], entry[key]["gpus"]) == (target, fewest)
    l40s = [
        _best(runner, two_targets, "--target", t)["rows"][1]["speculative"]["gpus"] for t in TARGETS
    ]
    assert l40s == [2, 1]  # the sweep's point: the targets' answers differ


@pytest.mark.parametrize(
    ("asked", "message"),
    [
        (
            "llama-3.2-3c",
            "unknown target 'llama-3.2-3c': did you mean 'llama-3.2-3b', 'llama-3.1-8b'?",
        ),
        (
            "qwen2.5-7b",
            "--target qwen2.5-7b is not in this sweep; it has llama-3.1-8b, llama-3.2-3b",
        ),
    ],
)
@pytest.mark.parametrize("command", ["best", "plot"])
def test_a_target_not_in_the_table_is_one_line(
    runner, two_targets, tmp_path, command, asked, message
):
    args = {
        "best": ["best", str(two_targets), *ASK],
        "plot": [
            "plot",
            "capacity",
            str(two_targets),
            "--sla",
            "interactive",
            "--out",
            str(tmp_path / "f.png"),
        ],
    }[command]
    result = runner.invoke(app, [*args, "--target", asked])
    assert (result.exit_code, result.stderr) == (2, f"error: {message}\n")
    assert not (tmp_path / "f.png").exists()


def test_a_catalog_alias_in_any_case_names_the_target(runner, two_targets):
    assert _best(runner, two_targets, "--target", "LLAMA-3.2-3B")["target"] == "llama-3.2-3b"
    rows = _best(runner, two_targets, "--target", "llama-3.1-8b", "--gpu", "h100")["rows"]
    assert [entry["gpu"] for entry in rows] == ["h100-sxm"]


@pytest.fixture
def drawn(monkeypatch):
    """The Figure objects `plot capacity` saves."""
    from infersize.show import figures

    shown = []
    save = figures.save

    def keep(fig, out):
        shown.append(_shown(fig))  # before saving clears the figure
        return save(fig, out)

    monkeypatch.setattr(figures, "save", keep)
    return shown


def _shown(fig) -> dict:
    """What a reader sees of a fleet figure: its title, each visible panel's title and the
    y of every line at 40 requests/s (by GPU, speculation then plain), the legend's texts."""
    panels = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        lines = [
            (line.get_color(), list(line.get_xdata()), list(line.get_ydata()))
            for line in ax.get_lines()
        ]
        at_40 = [ys[max(i for i, x in enumerate(xs) if x <= 40)] for _c, xs, ys in lines]
        colors = [color for color, _xs, _ys in lines]
        panels.append((ax.get_title(), colors, at_40))
    legend = fig.legends[0]
    names = [text.get_text() for text in legend.get_texts()]
    colors = dict(zip(names, (h.get_color() for h in legend.legend_handles), strict=True))
    suptitle = fig._suptitle.get_text() if fig._suptitle is not None else None
    return {"suptitle": suptitle, "panels": panels, "legend": names, "colors": colors}


def test_plot_capacity_draws_a_panel_per_target(runner, two_targets, tmp_path, drawn):
    out = tmp_path / "fleet.png"
    args = ["plot", "capacity", str(two_targets), "--sla", "interactive", "--max-rate", "100"]
    result = runner.invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stdout == f"{out}\n" and out.stat().st_size > 20_000
    (shown,) = drawn
    assert shown["suptitle"] == "GPUs needed: chat, SLA interactive (α scenario 0)"
    assert [title for title, _c, _y in shown["panels"]] == TARGETS
    assert shown["legend"] == ["h100-sxm", "l40s", "speculation", "plain decoding"]
    for target, (_title, colors, at_40) in zip(TARGETS, shown["panels"], strict=True):
        answer = _best(runner, two_targets, "--target", target)
        expected = []
        for entry in answer["rows"]:  # each GPU's colour, its speculative line then its plain
            color = shown["colors"][entry["gpu"]]
            expected += [(color, entry["speculative"]["gpus"]), (color, entry["baseline"]["gpus"])]
        assert list(zip(colors, at_40, strict=True)) == expected


def test_plot_capacity_target_draws_one_panel_titled_with_it(runner, two_targets, tmp_path, drawn):
    args = [
        "plot",
        "capacity",
        str(two_targets),
        "--sla",
        "interactive",
        "--target",
        "llama-3.2-3b",
        "--max-rate",
        "100",
        "--out",
        str(tmp_path / "fleet.svg"),
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    (shown,) = drawn
    assert shown["suptitle"] is None
    assert [title for title, _c, _y in shown["panels"]] == [
        "GPUs needed for llama-3.2-3b: chat, SLA interactive (α scenario 0)"
    ]
    answer = _best(runner, two_targets, "--target", "llama-3.2-3b")
    at_40 = [entry[arm]["gpus"] for entry in answer["rows"] for arm in ("speculative", "baseline")]
    assert shown["panels"][0][2] == at_40  # each GPU's speculative line, then its plain


def test_the_report_has_a_section_per_target(runner, two_targets, tmp_path):
    out = tmp_path / "report.html"
    result = runner.invoke(app, ["report", str(two_targets), "--out", str(out)])
    assert result.exit_code == 0, result.output
    page = out.read_text()
    sections = re.findall(r'<section class="capacity" id="([^"]+)">(.*?)</section>', page, re.S)
    assert [anchor for anchor, _body in sections] == [
        f"capacity-chat-interactive-{target}" for target in TARGETS
    ]
    for target, (_anchor, body) in zip(TARGETS, sections, strict=True):
        other = next(t for t in TARGETS if t != target)
        assert re.search(r"<h3>([^<]*)</h3>", body)[1] == f"{target}: chat under SLA interactive"
        assert f"GPUs needed for {target}: chat under SLA interactive" in body  # the figure
        assert body.count(f"{target} fp8 kv fp16") == 8  # 2 rates × 2 GPUs × 2 arms
        assert other not in body
