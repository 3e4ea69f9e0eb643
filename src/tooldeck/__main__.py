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
    try:
        with needs_extra("cli"):
            from .cli import main as cli_main
    except MissingExtra as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    cli_main()


if __name__ == "__main__":
    main()
