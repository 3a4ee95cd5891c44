"""The command line: parse, call the library, render, map errors to exit codes. No maths here.
One module per command group; each registers its commands on the one Typer app."""

from infersize.cli import (
    alpha,
    bench,
    best,
    capacity,
    catalog,
    plot,
    report,
    schedule,
    spec,
    sweep,
)
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
    "schedule",
    "spec",
    "sweep",
]
