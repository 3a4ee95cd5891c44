"""Help reads as prose at any width: a docstring's paragraph, wrapped by hand in the source,
reaches the terminal as one paragraph that the terminal wraps, in the list of commands and in
the command's own help; flags show no type and file lists show FILE...."""

from __future__ import annotations

import itertools
import re

import pytest
import typer.main
from typer.testing import CliRunner

from infersize.cli import app
from infersize.cli.app import prose

BOX = re.compile(r"[│╭╮╰╯─]")


def _commands(command, path=()):
    """(path, command) for the root and every command under it."""
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _commands(sub, (*path, name))


COMMANDS = list(_commands(typer.main.get_command(app)))
IDS = [" ".join(path) or "infersize" for path, _ in COMMANDS]


def _help(path: tuple[str, ...], columns: int) -> list[str]:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return [" ".join(BOX.sub(" ", line).split()) for line in result.stdout.splitlines()]


def _paragraphs(command) -> list[str]:
    return [" ".join(p.split()) for p in prose(command.help or "").split("\n\n") if p.strip()]


def _shown(command) -> list[str]:
    """Every paragraph of a command's own help and the first of each command it lists."""
    subs = getattr(command, "commands", {}).values()
    return _paragraphs(command) + [_paragraphs(sub)[0] for sub in subs if sub.help]


def _fragments(lines: list[str], paragraph: str, columns: int) -> tuple[list[str], int]:
    """The pieces of `paragraph` as the help shows them, one per line, and the width of the
    column they are shown in (to the panel's border, or to the terminal's edge)."""
    opening = " ".join(paragraph.split()[:4])
    for i, line in enumerate(lines):
        if opening not in line:
            continue
        start = line.index(opening)
        border = line.find("│", start)
        width = (border if border >= 0 else columns) - 1 - start
        pieces = [line[start : start + width].strip()]
        for following in lines[i + 1 :]:
            piece = following[start : start + width].strip()
            if not piece or not paragraph.startswith(" ".join([*pieces, piece])):
                break
            pieces.append(piece)
        if " ".join(pieces) == paragraph:
            return pieces, width
    raise AssertionError(f"not shown whole: {paragraph!r} in {lines}")


@pytest.mark.parametrize("columns", [80, 200])
@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=IDS)
def test_help_paragraphs_break_only_where_the_terminal_wraps(path, command, columns):
    """A line of a paragraph ends only where its next word would not have fitted in the
    column: a docstring's hand-wrap would break it sooner (the same text at 200 columns)."""
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert all(len(line) <= columns for line in lines), result.stdout
    for paragraph in _shown(command):
        pieces, width = _fragments(lines, paragraph, columns)
        for piece, following in itertools.pairwise(pieces):
            assert len(piece) + 1 + len(following.split()[0]) > width, (piece, following)


def test_prose_joins_the_lines_of_a_paragraph_and_keeps_paragraphs():
    text = """First line
        goes on here.

        Second paragraph
        too."""
    assert prose(text) == "First line goes on here.\n\nSecond paragraph too."


def test_flags_show_no_type_and_file_lists_show_file():
    lines = _help(("spec",), 200)
    assert not [line for line in lines if "<bool>" in line]
    json_line = next(line for line in lines if line.startswith("--json"))
    assert json_line == "--json Print one JSON object (stable keys)."
    catalog_line = next(line for line in lines if line.startswith("--catalog"))
    assert catalog_line.startswith("--catalog FILE... Overlay YAML")
    assert not [line for line in _help((), 200) if "<bool>" in line]
