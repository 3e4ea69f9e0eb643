"""How the command line reports errors and logs: one line, the traceback only with ``-v``.

A :class:`~tooldeck.errors.ProviderError` escaping any command (a model that cannot be
built, a provider that cannot be reached...) is printed as ``error: <its one line>`` on
stderr; the exit status is 2 when the model could not even be built (a bad model string,
a missing key: the command line is wrong) and 1 otherwise. ``tooldeck -v ...`` prints
the traceback first.

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
from typing import Any

import typer
from typer.core import TyperGroup

from ..errors import ModelConfigError, ProviderError

__all__ = ["CliGroup", "cli_logging", "exit_code", "log_handler", "report", "set_log_format"]

VERBOSE_KEY = "tooldeck.verbose"
HANDLER_KEY = "tooldeck.log_handler"


def exit_code(exc: ProviderError) -> int:
    return 2 if isinstance(exc, ModelConfigError) else 1


def report(exc: ProviderError, *, verbose: bool) -> None:
    """Print ``exc`` the CLI way (see the module docstring)."""
    if verbose:
        typer.echo("".join(traceback.format_exception(exc)).rstrip(), err=True)
    typer.echo(f"error: {exc}", err=True)


class CliGroup(TyperGroup):
    """The root command group: turns a provider error from any command into its line."""

    def invoke(self, ctx: Any) -> Any:  # typer's own click Context
        try:
            return super().invoke(ctx)
        except ProviderError as exc:
            report(exc, verbose=bool(ctx.meta.get(VERBOSE_KEY)))
            raise typer.Exit(exit_code(exc)) from None


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
