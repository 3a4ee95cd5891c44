"""Every command documents itself, and the README's commands exist as written."""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path

import pytest

from infersize.cli import app

COMMANDS = [
    ["spec"],
    ["sweep", "validate"],
    ["sweep", "run"],
    ["best"],
    ["models", "list"],
    ["models", "show"],
    ["gpus", "list"],
    ["gpus", "show"],
    ["alpha"],
    ["bench"],
    ["plot", "k"],
    ["plot", "batch"],
    ["plot", "frontier"],
    ["plot", "methods"],
    ["plot", "capacity"],
    ["report"],
    ["capacity"],
    ["schedule"],
]
README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_has_help(runner, command):
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0
    assert "Usage" in result.stdout and len(result.stdout) > 200


def _command_paths() -> set[tuple[str, ...]]:
    """Every command of the application's real command tree, as the words that invoke it."""
    import typer.main

    paths: set[tuple[str, ...]] = set()

    def walk(command, path):
        for name, sub in getattr(command, "commands", {}).items():
            paths.add((*path, name))
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return paths


def _invoked(line: str, groups: set[str]) -> tuple[str, ...]:
    """The command words of one `$ infersize ...` line: a group takes one word more."""
    words = line.split()
    return tuple(words[:2]) if words[0] in groups else tuple(words[:1])


def test_readme_commands_exist():
    """Every `$ infersize ...` line of the README names a command of the real tree (a group
    and one of its commands, or a command); a made-up subcommand fails."""
    paths = _command_paths()
    groups = {p[0] for p in paths if len(p) == 2}
    lines = re.findall(r"\$ infersize ([a-z][^\n]*)", README)
    assert len(lines) >= 20
    for line in lines:
        assert _invoked(line, groups) in paths, line
    assert ("sweep", "bogus") not in paths and _invoked("sweep bogus x.yaml", groups) not in paths


def test_every_command_of_the_tree_is_listed_here():
    """COMMANDS (whose help is checked above) holds every command that is not a group."""
    paths = _command_paths()
    groups = {p[:1] for p in paths if len(p) == 2}
    assert {tuple(c) for c in COMMANDS} == paths - groups


def test_readme_setup_commands_are_the_ci_ones():
    ci = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text()
    assert "pip install . && infersize sweep run sweeps/quickstart.yaml" in README
    assert "pip install -e '.[test]' && pytest -q" in README
    assert "pip install --quiet -e '.[test]'" in ci and "pytest -q" in ci


def test_the_data_dictionary_page_is_current():
    from infersize.sweep.dictionary import markdown

    page = Path(__file__).resolve().parent.parent / "docs" / "tables.md"
    regenerate = "run: python -m infersize.sweep.dictionary > docs/tables.md"
    assert page.read_text() == markdown(), regenerate


def test_the_calibration_page_is_current():
    from infersize.service.calibration import calibration_table, load_measurements, split_table

    root = Path(__file__).resolve().parent.parent
    rows = load_measurements(root / "tests" / "data" / "measurements.csv")
    page = (root / "docs" / "calibration.md").read_text()
    for name, table in (
        ("split table", split_table(rows)),
        ("calibration table", calibration_table(rows)),
    ):
        start, end = f"<!-- {name}: start -->\n", f"<!-- {name}: end -->\n"
        assert page.split(start, 1)[1].split(end, 1)[0] == table, (
            "run: python benchmarks/calibration_table.py --write"
        )


def test_the_tree_table_of_the_modelling_page_is_current():
    from benchmarks.fit_tree_constants import END, PAGE, START, table

    written = PAGE.read_text().split(START, 1)[1].split(END, 1)[0]
    assert written == table(), "run: python benchmarks/fit_tree_constants.py --write"


def test_the_readmes_speed_figures_are_the_generated_performance_pages():
    """The README quotes no speed figure of its own: its summary is docs/performance.md's, as
    benchmarks/performance_doc.py wrote both."""
    root = Path(__file__).resolve().parent.parent
    start, end = "<!-- speed summary: start -->\n", "<!-- speed summary: end -->\n"
    page = (root / "docs" / "performance.md").read_text()
    summary = page.split(start, 1)[1].split(end, 1)[0]
    assert summary.startswith("| what | figure |") and summary.count("\n") >= 6
    assert README.split(start, 1)[1].split(end, 1)[0] == summary


def _make_figures():
    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("make_figures", root / "docs" / "make_figures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _without_outputs(words: list[str]) -> tuple[str, ...]:
    """A command's words less where it writes (`--out FILE`, `--plot FILE`) and the README's
    comment."""
    if "#" in words:
        words = words[: words.index("#")]
    kept, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word in ("--out", "--plot"):
            skip = True
        else:
            kept.append(word)
    return tuple(kept)


def test_every_figure_is_drawn_by_the_command_the_readme_shows_beside_it():
    """docs/make_figures.py draws each figure with the arguments of a command the README shows
    (sweep folders as the README names them, outputs aside), and the README shows the figure: a
    figure redrawn with other settings than its command fails here."""
    make_figures = _make_figures()
    joined = README.replace("\\\n", " ")
    readme_commands = {
        _without_outputs(shlex.split(line)) for line in re.findall(r"\$ infersize ([^\n]*)", joined)
    }
    figures = list(make_figures.figure_commands(Path("outputs/fleet"), Path("docs/figures")))
    assert len(figures) >= 7
    for name, args in figures:
        assert f"(docs/figures/{name})" in README, name
        assert _without_outputs(args) in readme_commands, (name, " ".join(args))
    moved = [*figures[0][1][:3], "0.61", *figures[0][1][4:]]
    assert _without_outputs(moved) not in readme_commands  # another α is another command
