"""The command line: parse, call the library, render, map errors to exit codes. No maths here.
One module per command group; each registers its commands on the one Typer app."""

import os

# infersize uses no pydantic plugins; looking for them scans every installed distribution's
# entry points, a sixth of `spec`'s start-up on a full environment
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from infersize.cli import alpha, bench, best, capacity, catalog, plot, report, spec, sweep
from infersize.cli.app import app

__all__ = [
    "alpha",
    "app",
    "bench",
    "best",
    "capacity",
    "catalog",
    "plot",
    "report",
    "spec",
    "sweep",
]
