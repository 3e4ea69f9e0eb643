"""How the command line reports errors and logs: one line, the traceback only with ``-v``.

The rule (docs/cli.md): a command never shrugs. A user error (a path that does not
exist, a folder where a file is expected, a file that is not what the command reads, an
unknown value, a command line typer cannot parse) is one line on stderr,
``error: <what is wrong>; <what to do>``, and exit status 2, before anything is created
(see :func:`user_error`, :func:`existing_file`, :func:`read_json`). Exit status 1 means the
command ran and the answer is no (a check found problems, nothing matched, no such id, a
run failed).

A :class:`~tooldeck.errors.ProviderError` escaping any command (a model that cannot be
built, a provider that cannot be reached...) is printed as ``error: <its one line>`` on
stderr; the exit status is 2 when the model could not even be built (a bad model string,
a missing key: the command line is wrong) and 1 otherwise. ``tooldeck -v ...`` prints
the traceback first. A :class:`~tooldeck.errors.MissingExtra` (the command needs an extra
that is not installed) is printed the same way, exit status 2.

While a command runs, log records (tooldeck's and the libraries') go to stderr one line
each, without tracebacks unless ``-v``; records that carry a provider error are left out
without ``-v``, since that error is reported once, as the line above (or, for workflow
tasks, in the run's table). With ``-v`` tooldeck's own debug logs are shown too.
"""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from typer._click.exceptions import NoArgsIsHelpError, UsageError  # click, as typer vendors it
from typer.core import TyperGroup

from ..errors import MissingExtra, ModelConfigError, ProviderError

__all__ = [
    "CliGroup",
    "cli_logging",
    "existing_file",
    "exit_code",
    "json_kind",
    "log_handler",
    "read_json",
    "report",
    "set_log_format",
    "user_error",
]

VERBOSE_KEY = "tooldeck.verbose"
HANDLER_KEY = "tooldeck.log_handler"


def exit_code(exc: ProviderError) -> int:
    return 2 if isinstance(exc, ModelConfigError) else 1


def report(exc: ProviderError | MissingExtra, *, verbose: bool) -> None:
    """Print ``exc`` the CLI way (see the module docstring)."""
    if verbose:
        typer.echo("".join(traceback.format_exception(exc)).rstrip(), err=True)
    typer.echo(f"error: {exc}", err=True)


def user_error(message: str, code: int = 2) -> typer.Exit:
    """Print ``error: message`` on stderr, one line; returns the ``typer.Exit`` to raise."""
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    return typer.Exit(code)


def existing_file(path: Path, what: str) -> Path:
    """``path`` when it is a file; else a :func:`user_error` naming it and ``what`` to give."""
    if path.is_file():
        return path
    where = "is a folder, not a file" if path.is_dir() else "does not exist"
    raise user_error(f"{path} {where}; give {what}")


def read_json(path: Path, what: str) -> Any:
    """The JSON document in ``path`` (a file: :func:`existing_file`), or one line saying why
    not. Read as every config file is (size, depth and encoding limits)."""
    from .._config_files import ConfigFileError, load_json

    existing_file(path, what)
    try:
        return load_json(path)
    except OSError as exc:
        raise user_error(f"{path}: cannot read it ({exc.strerror or exc}); give {what}") from exc
    except ConfigFileError as exc:
        raise user_error(f"{path}: {exc.problem}; give {what}") from exc


def json_kind(value: Any) -> str:
    """What a JSON value is, for a message: 'an object', 'a list', 'a string'..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return "a string" if isinstance(value, str) else "a number"


def _usage_line(exc: UsageError) -> str:
    message = exc.format_message().rstrip(".").replace("Value error, ", "")
    path = exc.ctx.command_path if exc.ctx is not None else "tooldeck"
    return f"{message}; see {path} --help"


class CliGroup(TyperGroup):
    """The root command group: a provider error or a usage error from any command is one
    line (see the module docstring)."""

    def make_context(self, info_name: Any, args: Any, parent: Any = None, **extra: Any) -> Any:
        try:  # the root's own options (``tooldeck --bogus``)
            return super().make_context(info_name, args, parent, **extra)
        except NoArgsIsHelpError:
            raise
        except UsageError as exc:
            raise user_error(_usage_line(exc), exc.exit_code) from None

    def invoke(self, ctx: Any) -> Any:  # typer's own click Context
        try:
            return super().invoke(ctx)
        except ProviderError as exc:
            report(exc, verbose=bool(ctx.meta.get(VERBOSE_KEY)))
            raise typer.Exit(exit_code(exc)) from None
        except MissingExtra as exc:  # the install lacks what the command needs
            report(exc, verbose=bool(ctx.meta.get(VERBOSE_KEY)))
            raise typer.Exit(2) from None
        except NoArgsIsHelpError:
            raise
        except UsageError as exc:
            if ctx.meta.get(VERBOSE_KEY):
                typer.echo("".join(traceback.format_exception(exc)).rstrip(), err=True)
            raise user_error(_usage_line(exc), exc.exit_code) from None


class _Stderr(logging.Handler):
    """Writes each record to whatever ``sys.stderr`` is then (a test runner swaps it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:
            self.handleError(record)


class _OneLine(logging.Formatter):
    def __init__(self, fmt: str, verbose: bool) -> None:
        super().__init__(fmt)
        self.verbose = verbose

    def format(self, record: logging.LogRecord) -> str:
        if self.verbose or not record.exc_info:
            return super().format(record)
        exc = record.exc_info[1]
        saved = record.exc_info, record.exc_text
        record.exc_info, record.exc_text = None, None
        try:
            line = super().format(record)
        finally:
            record.exc_info, record.exc_text = saved
        if exc is not None:
            line += f" ({type(exc).__name__}: {' '.join(str(exc).split())[:300]})"
        return line


def _not_a_provider_error(record: logging.LogRecord) -> bool:
    exc = record.exc_info[1] if record.exc_info else None
    return not isinstance(exc, ProviderError)


DEFAULT_FORMAT = "%(levelname)s %(name)s: %(message)s"


@contextmanager
def cli_logging(verbose: bool, fmt: str = DEFAULT_FORMAT) -> Iterator[logging.Handler]:
    """Install the CLI's log handler on the root logger for the command's duration."""
    root = logging.getLogger()
    ours = logging.getLogger("tooldeck")
    handler = _Stderr()
    handler.setFormatter(_OneLine(fmt, verbose))
    if not verbose:
        handler.addFilter(_not_a_provider_error)
    saved_levels = ours.level, root.level
    root.addHandler(handler)
    if verbose:
        ours.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        ours.setLevel(saved_levels[0])
        root.setLevel(saved_levels[1])


def log_handler(ctx: typer.Context) -> logging.Handler | None:
    """The handler :func:`cli_logging` installed for this command, if any."""
    handler = ctx.meta.get(HANDLER_KEY)
    return handler if isinstance(handler, logging.Handler) else None


def set_log_format(ctx: typer.Context, fmt: str, level: int | None = None) -> None:
    """Change this command's log format (e.g. timestamps) and the root logger's level."""
    handler = log_handler(ctx)
    if handler is None:
        logging.basicConfig(level=level or logging.WARNING, format=fmt)
        return
    formatter = handler.formatter
    verbose = isinstance(formatter, _OneLine) and formatter.verbose
    handler.setFormatter(_OneLine(fmt, verbose))
    if level is not None:
        logging.getLogger().setLevel(level)
