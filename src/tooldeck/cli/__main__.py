"""``python -m tooldeck.cli``: the ``tooldeck`` command."""

from . import main

main()
