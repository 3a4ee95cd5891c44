"""The command line: parse, call the library, render, map errors to exit codes. No maths here.
One module per command or command group, each with its own Typer app; the one root app
(cli/app.py) imports and builds a command's module only when that command is looked up."""

from infersize.cli.app import app

__all__ = ["app"]
