"""The ``tooldeck`` command's entry point (also ``python -m tooldeck``).

The command line lives in :mod:`tooldeck.cli` (typer and rich: the ``cli`` extra). This
module imports nothing optional itself, so that without that extra the command still
answers in one line, ``error: the tooldeck command ... pip install 'tooldeck[cli]'``
(exit status 2), instead of a traceback.
"""

from __future__ import annotations

import sys

from ._extras import needs_extra
from .errors import MissingExtra


def main() -> None:
    """Run the ``tooldeck`` command (:func:`tooldeck.cli.main`)."""
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        _early_initialize()
    try:
        with needs_extra("cli"):
            from .cli import main as cli_main
    except MissingExtra as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    cli_main()


def _early_initialize() -> None:
    """``tooldeck serve`` over stdio: its client's ``initialize`` answered while the command
    line loads (:mod:`tooldeck.gateway._handshake`; nothing when an extra is missing: the
    command says so)."""
    from . import __version__

    try:
        with needs_extra("mcp"):
            from .gateway._handshake import start_for_command
    except MissingExtra:
        return
    start_for_command(sys.argv, __version__)


if __name__ == "__main__":
    main()
