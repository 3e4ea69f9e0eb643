"""Help that reads well: value placeholders such as ``TEXT``, ``PATH`` or ``[a|b|c]``.

typer shows a parameter's Python type as its placeholder (``<bool>`` on a flag,
``<list[Path]>`` on a repeatable option); :func:`tidy_help` rewrites them, for every
parameter of a command tree: a flag shows none, a repeatable option its item's, a choice
its values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["placeholder", "tidy_help"]

_NAMES = {
    "str": "TEXT",
    "int": "INTEGER",
    "float": "FLOAT",
    "bool": "BOOLEAN",
    "path": "PATH",
    "file": "FILE",
    "directory": "DIR",
    "dir": "DIR",
}


def placeholder(raw: str | None) -> str | None:
    """typer's ``<list[Path]>``-style label as a placeholder (``PATH``); ``None`` kept."""
    if raw is None:
        return None
    text, dots = (raw[:-3], "...") if raw.endswith("...") else (raw, "")
    if not (text.startswith("<") and text.endswith(">")):
        return raw  # an explicit metavar
    inner = text[1:-1]
    while inner.startswith("list[") and inner.endswith("]"):
        inner = inner[5:-1]
    if "|" in inner:
        return f"[{inner}]{dots}"
    word = inner.split()[0] if inner.split() else inner  # "int range" -> "int"
    return _NAMES.get(word.lower(), word.upper()) + dots


def _tidy_param(param: Any) -> None:
    if getattr(param, "_tooldeck_tidy", False) or not hasattr(param, "display_type_rich"):
        return
    original: Callable[[Any], str | None] = param.display_type_rich
    flag = bool(getattr(param, "is_flag", False)) and not getattr(param, "count", False)

    def display_type_rich(ctx: Any) -> str | None:
        return None if flag else placeholder(original(ctx))

    param.display_type_rich = display_type_rich
    param._tooldeck_tidy = True


def tidy_help(command: Any) -> Any:
    """Tidy the placeholders of ``command`` and its subcommands (in place); returns it."""
    for param in getattr(command, "params", []):
        _tidy_param(param)
    if not getattr(command, "_tooldeck_tidy", False) and hasattr(command, "get_help_option"):
        original = command.get_help_option

        def get_help_option(ctx: Any) -> Any:
            option = original(ctx)
            if option is not None:
                _tidy_param(option)
            return option

        command.get_help_option = get_help_option
        command._tooldeck_tidy = True
    for sub in getattr(command, "commands", {}).values():
        tidy_help(sub)
    return command


def print_group_help(group: Any, ctx: Any) -> None:
    """A group's help in typer's look, drawn with rich's console, panel and table only.

    ``tooldeck --help`` uses it instead of typer's own (``typer.rich_utils`` imports
    rich's Markdown, syntax highlighting and tracebacks: more than the whole rest of the
    command's start-up).
    """
    import os

    from rich.console import Console
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    width = os.environ.get("TERMINAL_WIDTH")
    console = Console(width=int(width) if width else None, highlight=False)
    usage = " ".join(group.collect_usage_pieces(ctx))
    console.print()
    console.print(
        Text.assemble(" ", ("Usage: ", "yellow"), (f"{ctx.command_path} {usage}", "bold"))
    )
    console.print()
    console.print(Text(f" {group.help or ''}".rstrip()))
    console.print()

    def table() -> Table:
        return Table(show_header=False, box=None, expand=True, pad_edge=False, padding=(0, 1))

    options = table()
    options.add_column(style="bold cyan", no_wrap=True)
    options.add_column(style="bold green", no_wrap=True)
    options.add_column(ratio=10)
    for param in group.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        long = ",".join(o for o in param.opts if o.startswith("--"))
        short = ",".join(o for o in param.opts if not o.startswith("--"))
        help_text = Text(getattr(param, "help", None) or "")
        envvar = getattr(param, "envvar", None)
        if envvar and getattr(param, "show_envvar", False):
            help_text.append(f"\n[env var: {envvar}]", style="dim yellow")
        options.add_row(long, short, help_text)
    console.print(Panel(options, border_style="dim", title="Options", title_align="left"))

    commands = table()
    names = [n for n in group.list_commands(ctx) if not group.get_command(ctx, n).hidden]
    commands.add_column(style="bold cyan", no_wrap=True, width=max(map(len, names), default=0))
    commands.add_column(ratio=10)
    for name in names:
        command = group.get_command(ctx, name)
        commands.add_row(name, command.short_help or command.help or "")
    console.print(Panel(commands, border_style="dim", title="Commands", title_align="left"))
