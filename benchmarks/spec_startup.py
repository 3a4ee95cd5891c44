"""`infersize spec` start-up against its floor, in one run: the median wall time of the seed
example as a user runs it (a fresh process each time), and of a bare Typer app with the same
options that imports numpy and rich and prints one JSON line (generated here from the spec
command's own parameters). Both run as an installed program does: with Python's bytecode cache
(pip compiles it at install), whatever PYTHONDONTWRITEBYTECODE says in this shell.
Usage: python benchmarks/spec_startup.py [RUNS]."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SEED = [
    "spec",
    "--target",
    "qwen2.5-7b",
    "--target-quant",
    "fp16",
    "--draft",
    "qwen2.5-0.5b",
    "--draft-quant",
    "int4",
    "--gpu",
    "a100",
    "--context-length",
    "4096",
    "--acceptance-rate",
    "0.72",
    "--draft-k",
    "4",
]


def bare_app(path: Path) -> None:
    """A Typer app with the same options as `infersize spec` (names and types), which imports
    numpy and rich and prints a JSON line: what any command of this shape costs to start."""
    import typer.main

    from infersize.cli import app

    command = typer.main.get_command(app).commands["spec"]  # type: ignore[attr-defined]
    params = []
    for p in command.params:
        bare = p.bare_type()  # a type, or its name (as Typer's newer releases give it)
        kind = bare if isinstance(bare, str) else getattr(bare, "__name__", "str")
        kind = "list[str]" if "list" in str(bare) else kind.replace("Path", "str")
        flags = ", ".join(repr(o) for o in p.opts)
        default = "False" if p.is_flag else "None"
        annotation = kind if p.is_flag else f"{kind} | None"
        params.append(f"    {p.name}: {annotation} = typer.Option({default}, {flags}),")
    source = "\n".join(
        [
            "import json",
            "import numpy",
            "import rich.console",
            "import typer",
            "app = typer.Typer()",
            "@app.command()",
            "def spec(",
            *params,
            "):",
            "    rich.console.Console()",
            "    print(json.dumps({'target': target, 'k': int(numpy.int64(draft_k or 4))}))",
            "@app.command()",
            "def other() -> None: ...",
            "app()",
        ]
    )
    path.write_text(source + "\n")


CACHED = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def median_wall(argv: list[str], runs: int) -> tuple[float, float, float]:
    subprocess.run(argv, capture_output=True, check=True, env=CACHED)  # page cache, .pyc
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True, env=CACHED)
        times.append(time.perf_counter() - start)
    times.sort()
    return statistics.median(times), times[0], times[-1]


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    exe = shutil.which("infersize")
    if exe is None:
        sys.exit("infersize is not on PATH: install the project first")
    with tempfile.TemporaryDirectory() as tmp:
        bare = Path(tmp) / "bare.py"
        bare_app(bare)
        floor = median_wall([sys.executable, str(bare), *SEED], runs)
        spec = median_wall([exe, *SEED], runs)
    for label, (median, low, high) in (
        ("infersize spec (seed example)", spec),
        ("bare Typer app, same options", floor),
    ):
        print(f"{label}, {runs} runs: median {median:.3f} s, min {low:.3f} s, max {high:.3f} s")
    print(f"spec / bare Typer: {spec[0] / floor[0]:.2f}x")


if __name__ == "__main__":
    main()
