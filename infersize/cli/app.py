"""The Typer application and its error handling: every user mistake (an InfersizeError or a
usage error) ends with exit code 2 and one line on stderr; `--debug` anywhere on the command
line shows the traceback instead. Each command lives in its own module, as its own Typer app
(`command_app`), and is built when it is looked up (`COMMANDS`): `infersize spec` imports and
builds spec alone."""

from __future__ import annotations

import difflib
import importlib
import inspect
import json
import sys
from collections.abc import Iterator, MutableMapping
from typing import Any, NoReturn

import typer
import typer.main
from typer.core import TyperGroup

from infersize import __version__
from infersize.errors import InfersizeError


def flag(field: str) -> str:
    """A library setting's name as its command-line flag (options are named after them)."""
    return "--" + field.replace("_", "-")


def fail(message: str, prefix: str = "error", code: int = 2) -> NoReturn:
    """One line on stderr: control characters a user typed (a newline in a name) are escaped."""
    line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
    typer.echo(f"{prefix}: {line}", err=True)
    sys.exit(code)


def _usage_message(exc: typer.TyperException) -> str:
    """Click's message, with its "Possible options" only when one is close to what was typed
    (click offers the best of a weak lot: --bogus would get --gpu)."""
    message = exc.format_message()
    typed = getattr(exc, "option_name", None)
    possible = getattr(exc, "possibilities", None)
    if typed and possible is not None and "(Possible options:" in message:
        close = difflib.get_close_matches(typed, possible, n=3, cutoff=0.75)
        head = message.split(" (Possible options:")[0]
        return f"{head} (did you mean {', '.join(close)}?)" if close else head
    return message


def _message(exc: InfersizeError) -> str:
    """The error in the command line's words: settings as flags, commands as typed."""
    return exc.render(flag, lambda words: f"'infersize {words}'")


def prose(text: str) -> str:
    """A docstring as the terminal should wrap it: each paragraph on one line. Docstrings are
    wrapped by hand at the source's line length, and Typer keeps those breaks."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


def _plain_flags(params: list[Any]) -> None:
    """Nothing is typed after a flag, so its help shows no type (`<bool>` otherwise)."""
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""


def _tidy(command: Any, ctx: Any) -> None:
    """The help of a command and of every command under it: prose, and flags without a type."""
    if command.help:
        command.help = prose(command.help)
    _plain_flags(command.get_params(ctx))
    for sub in getattr(command, "commands", {}).values():
        _tidy(sub, ctx)


# The commands, in the order the help lists them: each command's module and its Typer app there.
COMMANDS = {
    "alpha": "infersize.cli.alpha:alpha_app",
    "bench": "infersize.cli.bench:bench_app",
    "best": "infersize.cli.best:best_app",
    "capacity": "infersize.cli.capacity:capacity_app",
    "report": "infersize.cli.report:report_app",
    "spec": "infersize.cli.spec:spec_app",
    "schedule": "infersize.cli.schedule:schedule_app",
    "models": "infersize.cli.catalog:models_app",
    "gpus": "infersize.cli.catalog:gpus_app",
    "plot": "infersize.cli.plot:plot_app",
    "sweep": "infersize.cli.sweep:sweep_app",
}


def command_app(name: str, **settings: Any) -> typer.Typer:
    """The Typer app of one of the root's commands (one command, or a group of them): it offers
    no shell completion of its own, the root does."""
    return typer.Typer(name=name, add_completion=False, **settings)


class LazyCommands(MutableMapping[str, Any]):
    """The root's commands by name, each built the first time it is looked up (its module
    imported, its Typer app turned into a click command); the names alone build nothing."""

    def __init__(self, places: dict[str, str]) -> None:
        self._places = dict(places)
        self._built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            module, _, attribute = self._places[name].partition(":")  # KeyError: no such command
            command_app = getattr(importlib.import_module(module), attribute)
            self._built[name] = typer.main.get_command(command_app)
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._places.setdefault(name, "")
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._places[name]
        self._built.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._places)

    def __len__(self) -> int:
        return len(self._places)


class CleanErrors(TyperGroup):
    """Turns usage errors and library errors into `error: <one line>` and exit code 2, and
    tidies the help of every command (`_tidy`), in the list of commands and in its own help.
    Its commands are `COMMANDS`, built as they are looked up."""

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        commands = LazyCommands(COMMANDS)
        commands.update(self.commands)  # any registered on the root app itself
        self.commands = commands

    def get_params(self, ctx: Any) -> Any:
        params = super().get_params(ctx)
        _plain_flags(params)
        return params

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            _tidy(command, ctx)
        return command

    def main(  # type: ignore[override]
        self,
        args: Any = None,
        prog_name: Any = None,
        complete_var: Any = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        from infersize.show.streams import ascii_safe_streams

        ascii_safe_streams()  # a latin-1 or ASCII terminal gets "alpha", not a crash
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
            message = _usage_message(exc)
            if not message:  # bare `infersize`: the help was the answer
                sys.exit(0)
            fail(message)
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
    epilog="Example: infersize spec --target llama-3.1-8b --draft llama-3.2-1b --gpu h100",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    # every subcommand's context inherits these from the root's
    context_settings={"help_option_names": ["-h", "--help"]},
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
    debug: bool = typer.Option(
        False, "--debug", help="On an error, show the traceback (works anywhere on the line)."
    ),
) -> None:
    """Size speculative decoding: will target + draft fit on the GPU, and how much faster?"""


def print_json(obj: Any) -> None:
    typer.echo(json.dumps(obj, indent=2, allow_nan=False))
