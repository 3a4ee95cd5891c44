"""The README's `spec`, `alpha`, `capacity` and `schedule` transcripts are what those commands
print today: each `$ infersize ...` line followed by its output is run, and every line shown
(lines of `...` stand for lines left out) must come out, in order. A transcript that drifts
from the code fails here, so the README cannot show numbers the tool no longer gives."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from infersize.cli import app

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
RUN_HERE = (
    "spec",
    "alpha",
    "capacity",
    "schedule",
)  # commands that need no folder a run made first


def _transcripts(text: str) -> list[tuple[str, list[str]]]:
    """(command, its output lines) for every console block's command followed by output."""
    found = []
    for block in re.findall(r"```console\n(.*?)```", text, re.S):
        lines = block.replace("\\\n", " ").splitlines()
        for i, line in enumerate(lines):
            if not line.startswith("$ infersize "):
                continue
            output = []
            for after in lines[i + 1 :]:
                if after.startswith("$ "):
                    break
                output.append(after)
            command = line.removeprefix("$ infersize ").split("  #")[0].strip()
            words = shlex.split(command)
            shown = [o for o in output if o.strip()]
            if words[0] in RUN_HERE and shown and "--json" not in words and "..." not in words:
                found.append((command, output))
    return found


TRANSCRIPTS = _transcripts(README)


def _in_order(shown: list[str], printed: list[str]) -> str | None:
    """The first shown line that does not come out after the one before it, else None."""
    at = 0
    for line in shown:
        while at < len(printed) and printed[at] != line:
            at += 1
        if at == len(printed):
            return line
        at += 1
    return None


def test_the_readme_has_transcripts_to_check():
    commands = [command.split()[0] for command, _ in TRANSCRIPTS]
    assert commands.count("spec") >= 4 and "capacity" in commands and "alpha" in commands
    assert commands.count("schedule") >= 2


@pytest.mark.parametrize("command, output", TRANSCRIPTS, ids=[c for c, _ in TRANSCRIPTS])
def test_a_readme_transcript_is_what_the_command_prints(runner, monkeypatch, command, output):
    monkeypatch.chdir(ROOT)  # the README's relative paths (tests/data/...) are the checkout's
    monkeypatch.setenv("COLUMNS", "160")  # wide enough that no panel line wraps
    result = runner.invoke(app, shlex.split(command))
    printed = [line.rstrip() for line in result.output.splitlines() if line.strip()]
    shown = [line.rstrip() for line in output if line.strip() and line.strip() != "..."]
    missing = _in_order(shown, printed)
    assert missing is None, f"README shows {missing!r}; the command printed:\n{result.output}"


def test_a_drifted_line_is_found():
    assert _in_order(["a", "c"], ["a", "b", "c"]) is None
    assert _in_order(["c", "a"], ["a", "b", "c"]) == "a"
    assert _in_order(["Optimal K:  5"], ["Optimal K:  4"]) == "Optimal K:  5"
