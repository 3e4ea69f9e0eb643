"""``tooldeck serve --http``: two clients of one gateway process over streamable HTTP.

The gateway runs as a subprocess on a free loopback port, in front of
tests/mcp_servers/basic.py; the clients are the official SDK's ``ClientSession`` over
``streamable_http_client``. Sessions are per client: listings, approvals and stored
results never cross.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from typer.testing import CliRunner

from gateway_client import (
    ALLOW_ALL,
    Notes,
    http_client,
    served_gateway,
    stdio,
    text_of,
    write_config,
    write_policy,
)
from tooldeck.cli import app

REF = re.compile(r"ref_[0-9a-f]{16}")


TOKEN = "t0k3n-" + "x" * 40


@pytest.fixture
def served(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    param = getattr(request, "param", None)
    args: list[str] = []
    if param == "token":
        (tmp_path / "token").write_text(TOKEN + "\n")
        args += ["--token-file", str(tmp_path / "token")]
    elif param is not None:
        args += ["--approvals", param]
    with served_gateway(config, tmp_path / "s", *args) as url:
        yield url


async def _approve(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"approve": True})


@pytest.mark.parametrize("served", ["elicit"], indirect=True)
def test_two_http_clients_have_their_own_sessions(served: str) -> None:
    notes = Notes()
    huge = "private to A " * 20_000

    async def main() -> None:
        async with http_client(served, _approve, notes) as a, http_client(served) as b:
            init = await a.list_tools()
            assert [t.name for t in init.tools][:1] == ["tool_search"]
            await a.call_tool("tool_search", {"query": "echo the text back"})
            assert "alpha__echo" in [t.name for t in (await a.list_tools()).tools]
            assert "alpha__echo" not in [t.name for t in (await b.list_tools()).tools]
            # A's user approves by elicitation; B's client has none: denied
            stored = await a.call_tool("alpha__echo", {"text": huge})
            assert not stored.is_error
            denied = await b.call_tool("alpha__echo", {"text": "x"})
            assert denied.is_error and "elicitation" in text_of(denied)
            ref = REF.search(text_of(stored))
            assert ref is not None
            theirs = await b.call_tool("recall_tool_result", {"ref_id": ref.group()})
            assert theirs.is_error and "private to A" not in text_of(theirs)
            mine = await a.call_tool("recall_tool_result", {"ref_id": ref.group()})
            assert "private to A" in text_of(mine)

    anyio.run(main)
    assert notes.list_changed >= 1


def test_http_without_a_token_is_refused_on_a_non_loopback_address(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    out = CliRunner().invoke(
        app, ["serve", "--mcp", str(config), "--http", "8999", "--host", "0.0.0.0"]
    )
    assert out.exit_code == 2 and "loopback" in out.stderr


@pytest.mark.parametrize("served", ["token"], indirect=True)
def test_with_a_token_every_request_needs_it(served: str) -> None:
    async def main() -> None:
        async with httpx2.AsyncClient() as http:
            hello = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
                answer = await http.post(served, json=hello, headers=headers)
                assert answer.status_code == 401
                assert answer.headers["www-authenticate"].startswith("Bearer")
        async with http_client(served, token=TOKEN) as c:
            assert "tool_search" in [t.name for t in (await c.list_tools()).tools]

    anyio.run(main)


def test_a_short_token_is_refused(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    (tmp_path / "token").write_text("short")
    args = [
        "serve",
        "--mcp",
        str(config),
        "--http",
        "8999",
        "--token-file",
        str(tmp_path / "token"),
    ]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 2 and "at least 32" in out.stderr


def test_a_closed_http_session_takes_its_stored_results_along(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    policy = write_policy(tmp_path, ALLOW_ALL)
    offload = tmp_path / "s" / ".tooldeck" / "tool-offload"

    def stored() -> list[Path]:
        return [p for p in offload.iterdir() if any(p.iterdir())] if offload.exists() else []

    async def main(url: str) -> None:
        async with http_client(url) as a, http_client(url) as b:
            await a.call_tool("alpha__echo", {"text": "of A " * 60_000})
            await b.call_tool("alpha__echo", {"text": "of B " * 60_000})
            assert len(stored()) == 2
        # both clients ended their HTTP sessions (DELETE): the gateway, still running,
        # removed what they had stored
        with anyio.fail_after(10):
            while stored():  # noqa: ASYNC110 (files another process removes)
                await anyio.sleep(0.1)

    with served_gateway(config, tmp_path / "s", "--core", "*", "--policy", str(policy)) as url:
        anyio.run(main, url)
