"""What a new user meets on the command line: examples in every help that run,
completion, a bare `infersize`, unknown options, a terminal that is not UTF-8, summaries that fit
the terminal, and the panel's lines."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from infersize.cli import app
from tests.support.commands import SEED_ARGS
from tests.support.sweeps import SWEEP as FLEET_SWEEP

ROOT = Path(__file__).resolve().parent.parent


def _commands(group=None, path=()):
    group = group or typer.main.get_command(app)
    for name, command in sorted(group.commands.items()):
        if hasattr(command, "commands"):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name), command


COMMANDS = list(_commands())
# a sweep's commands need its tables: run the examples in this order
ORDER = ["sweep validate", "sweep run", "best", "report", "plot frontier"]


def _example(command) -> list[str]:
    match = re.search(r"Example: (infersize .+)", " ".join((command.epilog or "").split()))
    assert match, f"{command.name}: no example in its help"
    return shlex.split(match.group(1))[1:]


def test_every_command_has_an_example_that_runs(runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sweeps").mkdir()
    shutil.copy(ROOT / "sweeps" / "quickstart.yaml", tmp_path / "sweeps")
    shutil.copy(ROOT / "sweeps" / "methods.yaml", tmp_path / "sweeps")
    methods = runner.invoke(app, ["sweep", "run", "sweeps/methods.yaml", "-q"])  # plot methods
    assert methods.exit_code == 0, methods.output
    fleet = tmp_path / "sweeps" / "fleet.yaml"  # plot capacity: a small capacity sweep
    fleet.write_text(FLEET_SWEEP + "output: {dir: outputs/capacity}\n")
    capacity = runner.invoke(app, ["sweep", "run", str(fleet), "-q"])
    assert capacity.exit_code == 0, capacity.output
    examples = {" ".join(path): _example(command) for path, command in COMMANDS}
    assert _example(typer.main.get_command(app))  # the top-level help has one too
    for name in sorted(
        examples, key=lambda n: (n not in ORDER, ORDER.index(n) if n in ORDER else 0)
    ):
        if name == "bench":
            examples[name] = [*examples[name][:-1], "100"]  # the same command, a shorter loop
        result = runner.invoke(app, examples[name])
        assert result.exit_code == 0, (name, result.output)


def test_help_lists_debug_and_shows_no_python_types(runner):
    top = runner.invoke(app, ["--help"]).stdout
    assert "--debug" in top and "--install-completion" in top
    spec = runner.invoke(app, ["spec", "--help"]).stdout
    assert "<bool>" not in spec and "<list[Path]>" not in spec and "FILE..." in spec


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_installs(tmp_path, shell):
    exe = shutil.which("infersize")
    if exe is None:
        pytest.skip("the console script is not installed")
    env = {**os.environ, "HOME": str(tmp_path), "SHELL": f"/bin/{shell}"}
    shown = subprocess.run(
        [exe, "--show-completion", shell], capture_output=True, text=True, env=env, check=False
    )
    assert shown.returncode == 0, shown.stderr
    assert "_INFERSIZE_COMPLETE" in shown.stdout
    installed = subprocess.run(
        [exe, "--install-completion", shell], capture_output=True, text=True, env=env
    )
    assert installed.returncode == 0, installed.stderr
    assert any(
        p.is_file() for p in tmp_path.rglob("*") if "infersize" in p.read_text(errors="ignore")
    )


def test_bare_infersize_prints_the_help_and_no_empty_error(runner):
    result = runner.invoke(app, [])
    assert result.exit_code == 0 and "Usage" in result.stdout and result.stderr == ""


def test_an_unknown_option_suggests_only_what_is_close(runner):
    result = runner.invoke(app, [*SEED_ARGS, "--bogus"])
    assert (result.exit_code, result.stderr) == (2, "error: No such option: --bogus\n")
    result = runner.invoke(app, [*SEED_ARGS, "--draftk", "4"])
    assert result.stderr.startswith("error: No such option: --draftk (did you mean --draft-k")


def test_a_terminal_that_is_not_utf8_gets_ascii(tmp_path):
    env = {**os.environ, "PYTHONIOENCODING": "latin-1", "COLUMNS": "100"}
    cmd = [sys.executable, "-c", "from infersize.cli import app; app()", *SEED_ARGS]
    result = subprocess.run(cmd, capture_output=True, env=env)
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    text = result.stdout.decode("latin-1")
    assert "Acceptance Rate alpha:" in text and "Latency Ratio gamma:" in text
    assert "─" not in text and "internal error" not in result.stderr.decode("latin-1")


def test_the_panel_states_the_overhead_and_each_speedup_model(runner):
    text = runner.invoke(app, SEED_ARGS).stdout
    assert re.search(
        r"Combined VRAM: +[\d.]+ GiB = target [\d.]+ \+ draft [\d.]+ \+ overhead", text
    )
    linear = runner.invoke(
        app, [*SEED_ARGS, "--speedup-model", "linear", "--latency-ratio", "12.4"]
    )
    lines = linear.stdout.splitlines()
    assert "LINEAR-FORMULA SPEEDUP" in linear.stdout and "LEVIATHAN" not in lines[1]
    label = next(line for line in lines if "wall-clock" in line)
    assert re.match(r"^[A-Za-z ]+: +\d", label) and len(label.split(":")[0]) <= 19


def test_a_folder_that_does_not_exist_says_so(runner, tmp_path):
    result = runner.invoke(
        app, ["spec", "--target", str(tmp_path / "nowhere"), "--draft", "none", "--gpu", "h100"]
    )
    assert result.exit_code == 2
    assert result.stderr == f"error: {tmp_path / 'nowhere'}: no such folder\n"


def test_the_sweep_summary_fits_an_80_column_terminal(tmp_path):
    sweep = ROOT / "sweeps" / "fleet.yaml"
    env = {**os.environ, "COLUMNS": "80", "LINES": "40"}
    cmd = [
        sys.executable,
        "-c",
        "from infersize.cli import app; app()",
        "sweep",
        "run",
        str(sweep),
        "--out",
        str(tmp_path / "out"),
        "--jobs",
        "1",
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    lines = [line for line in result.stdout.splitlines() if str(tmp_path) not in line]
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    assert len(lines) <= 40
    assert "…" not in result.stdout  # no name is cut
    assert f"infersize best {tmp_path / 'out'}" in result.stdout  # where the rest is
