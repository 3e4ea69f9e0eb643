"""``tooldeck demo``: an offline tour of both halves of tooldeck (its first line says what
tooldeck is).

Shows a few tools projected for each provider with the strict decision and its reason,
then feeds malformed argument strings (the kind models really produce) through
``validate_arguments`` and prints which repair rungs fixed each and which were refused;
then a scripted agent turn, a workflow, and the MCP gateway: ``tooldeck serve`` started
as a client starts it, and a scripted MCP client that searches, calls, is denied and is
asked (:mod:`tooldeck.cli.demo_gateway`).

``tooldeck demo --model KIND:MODEL`` runs one live turn instead of the offline tour. The
model is built first, so a bad model string or a missing key fails at once with one line
(exit 2) before anything runs; a provider that fails during the turn is one line too
(exit 1). The offline tour never needs a key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def demo_command(
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="Run one live turn instead, e.g. openai:gpt-5.4 (needs that provider's API key).",
        ),
    ] = None,
    mcp: Annotated[
        Path | None,
        typer.Option("--mcp", help="An mcpServers JSON config whose tools join the turn."),
    ] = None,
    keep: Annotated[
        bool,
        typer.Option(
            "--keep", help="Keep the demo's folder (its files and workflow database); say where."
        ),
    ] = False,
) -> None:
    from .._extras import require_extra
    from .demo_tour import run_demo  # the tools, the engine and the providers load here

    if model is None:
        require_extra("demo")  # before anything runs: one line naming the extra
    run_demo(model, mcp, keep)
