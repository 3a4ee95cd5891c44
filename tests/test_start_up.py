"""Start-up: the command line imports what a command needs when that command runs. Building
the commands and their help reads only the registries (engines, speedup models, methods,
settings, workload kinds), which import no numpy; the sweep's, the figures' and the catalog's
libraries load when a command uses them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# what no command's help, and no import of the command line, may load
HEAVY = (
    "numpy",
    "polars",
    "pyarrow",
    "matplotlib",
    "scipy",
    "joblib",
    "loky",
    "yaml",
    "infersize.catalog.records",  # the catalog's records and store: a catalog being loaded
    "infersize.catalog.store",
)


def _loaded_after(code: str, modules: tuple[str, ...] = (*HEAVY, "pydantic")) -> list[str]:
    """Those of `modules` (the heavy ones and Pydantic) in sys.modules after `code` ran in a
    fresh process."""
    probe = (
        "import json, sys\n" + code + "\nprint(json.dumps(sorted(m for m in "
        f"{modules!r} if m in sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_importing_the_command_line_imports_nothing_heavy():
    assert _loaded_after("import infersize.cli.app") == []


def _run(args: list[str]) -> str:
    return f"from infersize.cli import app\ntry:\n    app({args!r})\nexcept SystemExit:\n    pass"


def test_version_imports_nothing_heavy():
    assert _loaded_after(_run(["--version"])) == []


def test_version_draws_nothing():
    """`--version` prints a line through Typer: it imports no rich (the streams a terminal can
    show are set up without it, show/streams.py), which is a third of its start-up."""
    assert _loaded_after(_run(["--version"]), ("rich", "rich.console", "rich.table")) == []


@pytest.mark.parametrize("command", [["spec"], ["capacity"], ["sweep", "run"], []])
def test_help_imports_nothing_heavy(command):
    """Pydantic may load here: Typer converts every option's value through its adapters."""
    assert _loaded_after(_run([*command, "--help"])) in ([], ["pydantic"])


def test_a_command_builds_no_other_command():
    """The root imports and builds only the command looked up: `spec --help` loads spec's module
    and no other command's."""
    probe = (
        _run(["spec", "--help"])
        + "\nfrom infersize.cli.app import COMMANDS\n"
        + "modules = {place.split(':')[0] for place in COMMANDS.values()}\n"
        + "print(json.dumps(sorted(modules & set(sys.modules))))"
    )
    assert json.loads(_last_line(probe)) == ["infersize.cli.spec"]


def test_the_spec_panel_is_plain_text():
    """The panel's lines and its table are rich Text, never markup: a str would be parsed for
    markup and emoji codes, and the first such str loads rich's table of emoji (3 ms)."""
    seed = ["spec", "--target", "qwen2.5-7b", "--draft", "qwen2.5-0.5b", "--gpu", "a100"]
    assert _loaded_after(_run(seed), ("rich.table", "rich._emoji_codes")) == ["rich.table"]


def test_spec_declares_every_record_with_record():
    """A dataclass compiles its methods when its module is imported (about half a millisecond
    each on Python 3.11: most of `infersize spec`'s start-up beyond Typer's, with sixty of
    them); a `record` compiles none. Every dataclass the spec command loads is a record."""
    probe = (
        _run(["spec", "--target", "qwen2.5-7b", "--draft", "qwen2.5-0.5b", "--gpu", "a100"])
        + "\nimport dataclasses, inspect\n"
        + "loaded = [m for n, m in list(sys.modules.items()) if n.startswith('infersize')]\n"
        + "classes = [c for m in loaded for _, c in inspect.getmembers(m, inspect.isclass)]\n"
        + "plain = {f'{c.__module__}.{c.__qualname__}' for c in classes\n"
        + "         if dataclasses.is_dataclass(c) and not hasattr(c, '__record_plan__')}\n"
        + "print(len(classes), json.dumps(sorted(plain)))"
    )
    count, plain = _last_line(probe).split(" ", 1)
    assert int(count) > 50 and json.loads(plain) == []


def _last_line(probe: str) -> str:
    """The last line `probe` prints, run by a new Python process with json and sys imported."""
    done = subprocess.run(
        [sys.executable, "-c", "import json, sys\n" + probe],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]
