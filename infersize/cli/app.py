"""The Typer application and its error handling: every user mistake (an InfersizeError or a
usage error) ends with exit code 2 and one line on stderr; `--debug` anywhere on the command
line shows the traceback instead."""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import typer
from typer.core import TyperGroup

from infersize import __version__
from infersize.errors import InfersizeError, ValueRangeError


def flag(field: str) -> str:
    """A library setting's name as its command-line flag (options are named after them)."""
    return "--" + field.replace("_", "-")


def fail(message: str, prefix: str = "error", code: int = 2) -> NoReturn:
    """One line on stderr: control characters a user typed (a newline in a name) are escaped."""
    line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
    typer.echo(f"{prefix}: {line}", err=True)
    sys.exit(code)


def _message(exc: InfersizeError) -> str:
    return exc.render(flag) if isinstance(exc, ValueRangeError) else str(exc)


class CleanErrors(TyperGroup):
    """Turns usage errors and library errors into `error: <one line>` and exit code 2."""

    def main(  # type: ignore[override]
        self,
        args: Any = None,
        prog_name: Any = None,
        complete_var: Any = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        debug = "--debug" in argv
        argv = [a for a in argv if a != "--debug"]
        try:
            result = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except typer.Exit as exc:
            sys.exit(exc.exit_code)
        except typer.Abort:
            typer.echo("error: aborted", err=True)
            sys.exit(130)
        except typer.TyperException as exc:  # usage errors: bad option, missing value, ...
            if debug:
                raise
            fail(exc.format_message())
        except InfersizeError as exc:
            if debug:
                raise
            fail(_message(exc))
        except Exception as exc:  # a bug: say so in one line, keep the traceback for --debug
            if debug:
                raise
            fail(
                f"{type(exc).__name__}: {exc} (run again with --debug for the traceback)",
                prefix="internal error",
                code=1,
            )
        sys.exit(result if isinstance(result, int) else 0)


app = typer.Typer(
    cls=CleanErrors,
    help="Size speculative decoding: will target + draft fit on the GPU, and how much faster?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"infersize {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Speculative-decoding sizer. `--debug` anywhere shows tracebacks."""


def print_json(obj: Any) -> None:
    typer.echo(json.dumps(obj, indent=2, allow_nan=False))
