"""Sweep YAML: schema errors name the file, line and key; expansion is a pure function."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from infersize.cli import app
from infersize.errors import SweepConfigError
from infersize.sweep.config import load_sweep
from infersize.sweep.plan import build_plan

BASE = """\
name: t
targets: [qwen2.5-7b, llama-3.1-8b]
drafts: [qwen2.5-0.5b, llama-3.2-1b]
gpus: [h100]
context_lengths: [4096]
batch_sizes: [1, 4]
acceptance_rates: [0.6, 0.8]
draft_k: {start: 1, stop: 4, step: 1}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def plan_of(path: Path):
    config, doc = load_sweep(path)
    return build_plan(config, doc)


def test_expansion_counts(tmp_path):
    plan = plan_of(write(tmp_path, BASE))
    # pairs by tokenizer: qwen2.5-7b + qwen2.5-0.5b, llama-3.1-8b + llama-3.2-1b
    assert {(s.target, s.draft) for s in plan.settings} == {
        ("qwen2.5-7b", "qwen2.5-0.5b"),
        ("llama-3.1-8b", "llama-3.2-1b"),
    }
    assert plan.total_cells == 2 * 1 * 2 * 2 * 4
    assert plan.skipped == {"pairs with another tokenizer": 2}
    assert plan.axis_counts()["pairs"] == 2


def test_expansion_is_pure_and_deterministic(tmp_path):
    path = write(tmp_path, BASE)
    assert plan_of(path) == plan_of(path)
    assert plan_of(path).config_hash() == plan_of(path).config_hash()
    assert list(tmp_path.iterdir()) == [path]  # wrote nothing


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"batch_sizes": "{start: 1, stop: 64, factor: 2}"}, (1, 2, 4, 8, 16, 32, 64)),
        ({"context_lengths": "{start: 1024, stop: 4096, step: 1024}"}, (1024, 2048, 3072, 4096)),
    ],
    ids=["geometric", "arithmetic"],
)
def test_ranges(tmp_path, extra, expected):
    text = BASE
    for key, value in extra.items():
        text = "\n".join(
            f"{key}: {value}" if line.startswith(f"{key}:") else line for line in text.splitlines()
        )
    plan = plan_of(write(tmp_path, text))
    assert expected in (plan.batches, plan.contexts)


def test_alpha_range_and_per_pair_alphas(tmp_path):
    text = BASE.replace(
        "acceptance_rates: [0.6, 0.8]", "acceptance_rates: {start: 0.5, stop: 0.9, step: 0.1}"
    )
    own = "[0.55, 0.65, 0.75, 0.8, 0.85]"
    text += f"pairs:\n  - {{target: qwen2.5-7b, draft: qwen2.5-1.5b, acceptance_rates: {own}}}\n"
    plan = plan_of(write(tmp_path, text))
    assert plan.scenarios == 5
    assert plan.alphas == (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9)
    pair = [s for s in plan.settings if s.draft == "qwen2.5-1.5b"]
    assert pair and all(s.alphas == (0.55, 0.65, 0.75, 0.8, 0.85) for s in pair)
    assert all(s.alpha_source == "pair" for s in pair)
    others = [s for s in plan.settings if s.draft != "qwen2.5-1.5b"]
    assert others and all(s.alphas == (0.5, 0.6, 0.7, 0.8, 0.9) for s in others)
    assert all(s.alpha_source == "sweep" for s in others)


def test_every_pair_needs_the_same_number_of_scenarios(tmp_path):
    text = BASE + "pairs:\n  - {target: qwen2.5-7b, draft: qwen2.5-1.5b, acceptance_rates: [0.7]}\n"
    with pytest.raises(SweepConfigError, match="pairs have 1 and 2 acceptance rates"):
        plan_of(write(tmp_path, text))


def test_tp_that_does_not_divide_heads_is_skipped(tmp_path):
    text = BASE.replace("gpus: [h100]", "gpus: [{name: h100, tp: [1, 3]}]")
    plan = plan_of(write(tmp_path, text))
    assert {s.tp for s in plan.settings} == {1}
    assert plan.skipped["tp sizes that do not divide the attention heads"] == 2


def test_chunks_keep_gpu_target_groups_whole(tmp_path):
    text = BASE.replace("gpus: [h100]", "gpus: [h100, a100, l40s]") + "chunk_cells: 1000\n"
    plan = plan_of(write(tmp_path, text))
    covered = []
    for chunk in plan.chunks:
        inside = plan.settings[slice(*chunk.settings)]
        covered += list(range(*chunk.settings))
        groups = {(s.gpu, s.target) for s in inside}
        for s in plan.settings:  # no group is split across the chunk's settings range
            if (s.gpu, s.target) in groups:
                assert s in inside
    assert sorted(set(covered)) == list(range(len(plan.settings)))


def test_large_group_is_split_by_context(tmp_path):
    text = BASE.replace("context_lengths: [4096]", "context_lengths: [1024, 2048, 4096, 8192]")
    text = text.replace("stop: 4, step: 1", "stop: 16, step: 1").replace(
        "[0.6, 0.8]", "{start: 0.05, stop: 1.0, step: 0.05}"
    )
    plan = plan_of(write(tmp_path, text + "chunk_cells: 1000\n"))  # one group: 2,560 cells
    pieces = {(c.settings, c.contexts, c.batches) for c in plan.chunks}
    assert len(pieces) == len(plan.chunks) > 2
    cells = sum(
        (c.settings[1] - c.settings[0])
        * (c.contexts[1] - c.contexts[0])
        * (c.batches[1] - c.batches[0])
        * len(plan.alphas)
        * len(plan.ks)
        for c in plan.chunks
    )
    assert cells == plan.total_cells


BAD = [
    ("misspelt key", BASE.replace("targets:", "targts:"), "line 2: key 'targts': unknown key"),
    (
        "misspelt range key",
        BASE.replace("step: 1}", "stpe: 1}"),
        "line 8: key 'draft_k.stpe': unknown key",
    ),
    (
        "wrong type",
        BASE.replace("batch_sizes: [1, 4]", "batch_sizes: big"),
        "line 6: key 'batch_sizes': Input should be a valid list",
    ),
    (
        "empty axis",
        BASE.replace("context_lengths: [4096]", "context_lengths: []"),
        "line 5: key 'context_lengths': List should have at least 1 item after validation, not 0",
    ),
    (
        "unknown model",
        BASE.replace("llama-3.1-8b]", "llama-3.1-8x]"),
        "line 2: key 'targets.1': unknown model 'llama-3.1-8x': did you mean 'llama-3.1-8b'",
    ),
    (
        "unknown gpu",
        BASE.replace("gpus: [h100]", "gpus: [h1000]"),
        "line 4: key 'gpus.0': unknown gpu 'h1000'",
    ),
    (
        "alpha above 1",
        BASE.replace("[0.6, 0.8]", "[0.6, 1.8]"),
        "line 7: key 'acceptance_rates': acceptance rates must be in [0, 1]",
    ),
    (
        "batch zero",
        BASE.replace("batch_sizes: [1, 4]", "batch_sizes: [0, 4]"),
        "line 6: key 'batch_sizes': values must be whole numbers >= 1",
    ),
    (
        "K not consecutive",
        BASE.replace("{start: 1, stop: 4, step: 1}", "[1, 2, 4]"),
        "line 8: key 'draft_k': the K range must be consecutive (got [1, 2, 4])",
    ),
    (
        "no pairs",
        BASE.replace("targets: [qwen2.5-7b, llama-3.1-8b]\n", ""),
        "give targets and drafts (or head methods), or explicit pairs",
    ),
    ("not a mapping", "- 1\n- 2\n", "expected a mapping of sweep keys at the top level"),
    ("bad yaml", "targets: [a, b\n", "invalid YAML"),
    (
        "cross tokenizer pair",
        BASE + "pairs: [{target: qwen2.5-7b, draft: llama-3.2-1b}]\n",
        "key 'pairs.0': draft llama-3.2-1b (llama3 tokenizer) does not share qwen2.5-7b's "
        "tokenizer (qwen2); set allow_cross_tokenizer: true to pair them",
    ),
    (
        "over the size limit",
        BASE + "max_cells: 10\n",
        "the grid's axes multiply to 64 cells (before pairs and settings that do not apply are "
        "left out), over the limit of 10; raise it with --max-cells or max_cells: in the YAML",
    ),
]


@pytest.mark.parametrize(("text", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
@pytest.mark.parametrize("command", ["validate", "run"])
def test_bad_yaml_one_line_exit_2(runner, tmp_path, command, text, message):
    path = write(tmp_path, text)
    out = tmp_path / "out"
    args = ["sweep", command, str(path)] + (["--out", str(out)] if command == "run" else [])
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: {path}: ")
    assert message in result.stderr
    assert result.stderr.count("\n") == 1
    assert not out.exists()  # nothing written


def test_missing_file_and_binary_file(runner, tmp_path):
    missing = tmp_path / "nope.yaml"
    result = runner.invoke(app, ["sweep", "validate", str(missing)])
    assert (result.exit_code, result.stderr) == (2, f"error: {missing}: no such file\n")
    binary = tmp_path / "b.yaml"
    binary.write_bytes(b"\x00\xff\xfe")
    result = runner.invoke(app, ["sweep", "validate", str(binary)])
    assert result.exit_code == 2 and "not a text file" in result.stderr


def test_validate_prints_counts(runner, tmp_path):
    result = runner.invoke(app, ["sweep", "validate", str(write(tmp_path, BASE))])
    assert result.exit_code == 0
    assert "cells (settings × context × batch × α × K)" in result.stdout
    assert "32" in result.stdout and "skipped 2 pairs with another tokenizer" in result.stdout


def test_max_cells_flag_raises_the_limit(runner, tmp_path):
    path = write(tmp_path, BASE + "max_cells: 10\n")
    assert runner.invoke(app, ["sweep", "validate", str(path), "--max-cells", "100"]).exit_code == 0


@pytest.mark.parametrize("sweep", sorted(Path("sweeps").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_sweep_validates(runner, sweep):
    result = runner.invoke(app, ["sweep", "validate", str(sweep)])
    assert result.exit_code == 0, result.stderr
