"""A stdio MCP server gets the network variables (CA bundle, proxies, index) it needs.

On top of the MCP SDK's minimal set, and nothing else: an API key in tooldeck's own
environment never reaches a server unless the server's ``env`` passes it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from tooldeck.mcp import McpSource
from tooldeck.mcp.connection import NETWORK_VARIABLES, network_environment

SERVER = Path(__file__).parent / "mcp_servers" / "env.py"
ASKED = ["SSL_CERT_FILE", "HTTPS_PROXY", "no_proxy", "UV_INDEX_URL", "OPENAI_API_KEY", "ONLY_MINE"]


def test_network_variables_reach_the_server_and_secrets_do_not(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ca = tmp_path / "corporate-ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp.example:3128")
    monkeypatch.setenv("no_proxy", "localhost,.corp.example")
    monkeypatch.setenv("UV_INDEX_URL", "https://pypi.corp.example/simple")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-servers")
    config = {
        "env": {
            "command": sys.executable,
            "args": [str(SERVER), "stdio"],
            "env": {"ONLY_MINE": "yes", "UV_INDEX_URL": "https://own.example/simple"},
        }
    }

    async def main() -> dict[str, str | None]:
        async with McpSource(config) as source:
            result = await source.call("env", "getenv", {"names": ASKED})
        return json.loads(result.text())  # type: ignore[no-any-return]

    seen = asyncio.run(main())
    assert seen == {
        "SSL_CERT_FILE": str(ca),
        "HTTPS_PROXY": "http://proxy.corp.example:3128",
        "no_proxy": "localhost,.corp.example",
        "UV_INDEX_URL": "https://own.example/simple",  # the server's own env wins
        "OPENAI_API_KEY": None,
        "ONLY_MINE": "yes",
    }


def test_only_set_network_variables_are_passed() -> None:
    environ = {"HTTP_PROXY": "http://p:1", "SECRET": "x", "SSL_CERT_DIR": ""}
    assert network_environment(environ) == {"HTTP_PROXY": "http://p:1"}
    assert "SECRET" not in NETWORK_VARIABLES
