"""Names written into the tables (catalog ids and names, local checkpoints' folder and file
names, Hub ids) cannot carry a spreadsheet formula: one starting with =, +, -, @, a tab or a
carriage return is refused where it is read, exit code 2 and one line naming it (OWASP's rule
against CSV injection). And a name that matplotlib would read as mathtext (`$\\frac{1}{$`) is
drawn as written by `report` and `plot frontier`, which crashed on it."""

from __future__ import annotations

import pytest

from infersize.cli import app
from tests.support.checkpoints import TINY, llama_tensors, write_folder, write_gguf

RULE = (
    "which a spreadsheet runs as a formula: names written into tables may not start with =, +, "
    "-, @, a tab or a carriage return"
)
GPU = """\
gpus:
  - id: our-h100
    name: NAME
    aliases: [ALIAS]
    memory_bytes: 85029027840
    memory_source: test
    bandwidth_gb_per_s: 3350
    fp16_tflops: 989.4
"""
SPEC = ["spec", "--target", "qwen2.5-7b", "--draft", "none", "--gpu", "our-h100"]


@pytest.mark.parametrize(
    ("name", "alias", "key", "first"),
    [
        ('\'=HYPERLINK("http://x","y")\'', "ours", "gpus.0.name", "="),
        ("Ours", '"@SUM(1+1)"', "gpus.0.aliases", "@"),
        ("\"+cmd|' /C calc'!A0\"", "ours", "gpus.0.name", "+"),
        ('"-2+3"', "ours", "gpus.0.name", "-"),
        ('"\\tx"', "ours", "gpus.0.name", "\\t"),
    ],
    ids=[
        "overlay_gpu_name_equals",
        "overlay_alias_at",
        "overlay_name_plus_dde",
        "overlay_name_minus",
        "overlay_name_tab",
    ],
)
def test_an_overlay_name_read_as_a_formula_is_refused(runner, tmp_path, name, alias, key, first):
    overlay = tmp_path / "ours.yaml"
    overlay.write_text(GPU.replace("NAME", name).replace("ALIAS", alias))
    result = runner.invoke(app, [*SPEC, "--catalog", str(overlay)])
    assert result.exit_code == 2, result.output
    line = 3 if key.endswith("name") else 4
    assert result.stderr == (
        f"error: {overlay}: line {line}: key '{key}': Value error, starts with '{first}', {RULE}\n"
    )


def test_a_checkpoint_folder_named_as_a_formula_is_refused(runner, tmp_path):
    """`+cmd`: a folder name that reached best_pairs.csv as it was."""
    folder = write_folder(tmp_path / "+cmd", TINY, llama_tensors(TINY))
    result = runner.invoke(app, ["spec", "--target", str(folder), "--draft", "none", "--gpu", "l4"])
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: {folder}: its file or folder name starts with '+', {RULE}\n"


def test_a_gguf_file_named_as_a_formula_is_refused(runner, tmp_path):
    path = tmp_path / "=1+1.gguf"
    write_gguf(path, TINY)
    result = runner.invoke(app, ["models", "show", str(path)])
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: {path}: its file or folder name starts with '=', {RULE}\n"


def test_a_hub_id_named_as_a_formula_is_refused_before_any_download(runner):
    result = runner.invoke(app, ["models", "show", "hf:@evil/model"])
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: hf:@evil/model: its organisation starts with '@', {RULE}\n"


def test_a_sweep_draft_folder_named_as_a_formula_is_refused(runner, tmp_path, monkeypatch):
    """In a sweep a checkpoint is named in the tables by the name given: `-x` as given."""
    monkeypatch.chdir(tmp_path)
    write_folder(tmp_path / "-x", TINY, llama_tensors(TINY))
    sweep = tmp_path / "s.yaml"
    sweep.write_text(
        "targets: [llama-3.1-8b]\ndrafts: ['-x']\ngpus: [l4]\ncontext_lengths: [256]\n"
        "allow_cross_tokenizer: true\n"
    )
    result = runner.invoke(app, ["sweep", "run", str(sweep), "--out", "out", "-q"])
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"error: {sweep}: line 2: key 'drafts.0': -x: its name starts with '-', {RULE}\n"
    )
    assert not (tmp_path / "out").exists()


def test_a_mathtext_name_is_drawn_as_written(runner, tmp_path, monkeypatch):
    """A draft folder named `d$\\frac{1}{$` reaches the frontier figures' legends: `report`
    and `plot frontier` draw it as written (they ended in a mathtext ParseSyntaxException)."""
    monkeypatch.chdir(tmp_path)
    name = "d$\\frac{1}{$"
    write_folder(tmp_path / name, TINY, llama_tensors(TINY))
    sweep = tmp_path / "s.yaml"
    sweep.write_text(
        f"targets: [llama-3.1-8b]\ndrafts: ['{name}']\ngpus: [l4]\ncontext_lengths: [256]\n"
        "allow_cross_tokenizer: true\n"
    )
    assert runner.invoke(app, ["sweep", "run", str(sweep), "--out", "out", "-q"]).exit_code == 0
    report = runner.invoke(app, ["report", "out", "--out", "r.html"])
    assert report.exit_code == 0, report.output
    assert f"{name} bf16 K=" in (tmp_path / "r.html").read_text()  # the legend, as written
    figure = runner.invoke(app, ["plot", "frontier", "out", "--gpu", "l4", "--out", "f.png"])
    assert figure.exit_code == 0, figure.output
    assert (tmp_path / "f.png").stat().st_size > 1000
