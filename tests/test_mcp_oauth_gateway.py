"""``tooldeck serve --http`` as an OAuth resource server, end to end (no mocks).

The authorization server is tests/oauth_server.py (the SDK's own server auth, in a
thread); the gateway is a real ``tooldeck serve`` subprocess in front of
tests/mcp_servers/basic.py, checking tokens by RFC 7662 introspection at that server;
the clients are the official SDK's ``Client`` with its ``OAuthClientProvider``
(discovery from the gateway's 401, dynamic registration, PKCE, the ``resource``
parameter), and raw HTTP for the tokens the gateway must refuse.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from typer.testing import CliRunner

from gateway_client import (
    INTROSPECTOR,
    oauth_args,
    oauth_client,
    served_gateway,
    stdio,
    write_config,
)
from oauth_server import OAuthServers, serving
from tooldeck.cli import app
from tooldeck.gateway.http_auth import IntrospectionVerifier, resource_server

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


class Gateway:
    def __init__(self, url: str, servers: OAuthServers) -> None:
        self.url = url
        self.servers = servers

    def mint(self, **body: Any) -> str:
        return str(self.servers.control("mint", {"resource": self.url, **body})["access_token"])

    def post(self, token: str | None, session: str | None = None) -> httpx.Response:
        headers = dict(ACCEPT)
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        if session is not None:
            headers["Mcp-Session-Id"] = session
        return httpx.post(self.url, json=INITIALIZE, headers=headers, timeout=30)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    tmp = tmp_path_factory.mktemp("oauth-gateway")
    config = write_config(tmp, {"alpha": stdio("basic.py")})
    with (
        serving(introspector=INTROSPECTOR) as servers,
        served_gateway(config, tmp / "s", *oauth_args(servers, tmp)) as url,
    ):
        yield Gateway(url, servers)


def test_an_sdk_client_logs_in_and_two_clients_have_separate_sessions(gateway: Gateway) -> None:
    async def main() -> None:
        async with (
            # the handshake era: the gateway's sessions are its HTTP sessions
            oauth_client(gateway.url, "alice", "legacy") as (alice, alice_storage, alice_sessions),
            oauth_client(gateway.url, "bob", "legacy") as (bob, bob_storage, _),
        ):
            listed = [t.name for t in (await alice.list_tools()).tools]
            assert listed[0] == "tool_search"
            found = await alice.call_tool("tool_search", {"query": "echo the text back"})
            listed = [t.name for t in (await alice.list_tools()).tools]
            assert "alpha__echo" in listed, found
            assert "alpha__echo" not in [t.name for t in (await bob.list_tools()).tools]

            # the tokens were issued for the gateway, to two registered clients
            assert alice_storage.client and bob_storage.client
            assert alice_storage.client.client_id != bob_storage.client.client_id
            assert alice_storage.tokens and bob_storage.tokens
            # bob's token on alice's session: as if the session did not exist
            stolen = gateway.post(bob_storage.tokens.access_token, alice_sessions[-1])
            assert stolen.status_code == 404
            # and the session still works for alice
            assert "alpha__echo" in [t.name for t in (await alice.list_tools()).tools]

    anyio.run(main)
    stats = gateway.servers.control("stats")
    assert stats["registered"] >= 2 and stats["exchanged"] >= 2


def test_no_token_gets_401_with_the_resource_metadata(gateway: Gateway) -> None:
    answer = gateway.post(None)
    assert answer.status_code == 401
    challenge = answer.headers["www-authenticate"]
    base = gateway.url.removesuffix("/mcp")
    metadata_url = f"{base}/.well-known/oauth-protected-resource/mcp"
    assert challenge.startswith("Bearer ") and f'resource_metadata="{metadata_url}"' in challenge
    metadata = httpx.get(metadata_url).json()
    assert metadata["resource"] == gateway.url
    assert [s.rstrip("/") for s in metadata["authorization_servers"]] == [gateway.servers.issuer]
    assert metadata["scopes_supported"] == ["mcp"]


def test_tokens_the_gateway_refuses(gateway: Gateway) -> None:
    assert gateway.post(gateway.mint()).status_code == 200  # the control: a good token
    other = gateway.servers.mcp  # a token issued for another resource
    assert gateway.post(gateway.mint(resource=other)).status_code == 401
    assert gateway.post(gateway.mint(resource=None)).status_code == 401  # no audience
    assert gateway.post(gateway.mint(ttl=-5)).status_code == 401  # expired
    assert gateway.post("at_made-up-token").status_code == 401  # inactive
    revoked = gateway.mint()
    gateway.servers.control("expire-access")
    assert gateway.post(revoked).status_code == 401  # the AS no longer says active
    narrow = gateway.post(gateway.mint(scopes=["other"]))
    assert narrow.status_code == 403
    assert 'error="insufficient_scope"' in narrow.headers["www-authenticate"]


# -- the verifier on its own, against the same authorization server ----------------------
def test_the_introspection_verifier_checks_what_the_as_says() -> None:
    with serving(introspector=INTROSPECTOR) as servers:
        resource = "http://127.0.0.1:1/mcp"
        settings = resource_server(
            servers.issuer, f"{servers.issuer}/introspect", resource, ["mcp"], *INTROSPECTOR
        )
        good = servers.control("mint", {"resource": resource})["access_token"]

        async def main() -> None:
            verifier = IntrospectionVerifier(settings)
            for _ in range(3):  # each request introspected, over one kept connection
                token = await verifier.verify_token(good)
                assert token is not None and token.resource == resource
                assert token.scopes == ["mcp"] and token.subject == "user-minted"
            await verifier.aclose()
            ports = servers.control("stats")["introspected_from"]
            assert len(ports) == 3 and len(set(ports)) == 1, ports
            assert await verifier.verify_token(good) is not None  # a new client after aclose
            await verifier.aclose()
            wrong = resource_server(
                servers.issuer, f"{servers.issuer}/introspect", resource, (), "gateway", "nope"
            )
            elsewhere = resource_server(
                "http://127.0.0.1:2", f"{servers.issuer}/introspect", resource, (), *INTROSPECTOR
            )
            gone = resource_server(
                servers.issuer, "http://127.0.0.1:1/introspect", resource, (), *INTROSPECTOR
            )
            for refused in (wrong, elsewhere, gone):  # the client, the iss, the AS gone
                verifier = IntrospectionVerifier(refused)
                assert await verifier.verify_token(good) is None
                await verifier.aclose()

        anyio.run(main)
    verifier = IntrospectionVerifier(settings)
    base = {"active": True, "aud": [resource, "x"], "iss": settings.issuer + "/"}
    assert verifier._refusal(base) is None
    assert verifier._refusal({**base, "active": "true"}) == "not active"
    assert verifier._refusal({**base, "exp": time.time() - 1}) == "expired"
    assert verifier._refusal({**base, "exp": "soon"}) == "expired"
    assert "another audience" in str(verifier._refusal({**base, "aud": resource + "x"}))
    assert "another audience" in str(verifier._refusal({**base, "aud": None}))


# -- the command line --------------------------------------------------------------------
ISSUER = "https://as.example.com"
INTROSPECT = ("--oauth-introspect", "https://as.example.com/i")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--http", "1", "--token-file", "{t}/token", "--oauth-issuer", "http://127.0.0.1:1"],
            "--oauth-issuer and a static token (--token-file or $TOOLDECK_GATEWAY_TOKEN) are "
            "two ways to authenticate clients; give one",
        ),
        (
            ["--http", "1", "--oauth-introspect", "http://127.0.0.1:1/i"],
            "--oauth-introspect is part of OAuth resource-server mode; give --oauth-issuer too",
        ),
        (
            ["--http", "1", "--oauth-issuer", "https://as.example.com"],
            "--oauth-introspect is needed with --oauth-issuer: the authorization server's "
            "token introspection endpoint (RFC 7662)",
        ),
        (
            ["--http", "1", "--oauth-issuer", "http://as.example.com", *INTROSPECT],
            "--oauth-issuer must be https:// (plain http only on a loopback address)",
        ),
        (
            ["--http", "1", "--host", "0.0.0.0", "--oauth-issuer", ISSUER, *INTROSPECT],
            "give --oauth-resource, the URL clients reach the gateway at (not 0.0.0.0)",
        ),
        (
            ["--oauth-issuer", "https://as.example.com"],
            "--oauth-issuer is for --http; a stdio client needs no token",
        ),
        (
            ["--http", "1", "--oauth-issuer", ISSUER, *INTROSPECT, "--oauth-scope", "a b"],
            "--oauth-scope takes one scope without spaces, got 'a b'",
        ),
    ],
)
def test_resource_server_flags_are_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    monkeypatch.delenv("TOOLDECK_GATEWAY_TOKEN", raising=False)
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    (tmp_path / "token").write_text("t" * 40)
    argv = ["serve", "--mcp", str(config), *(a.replace("{t}", str(tmp_path)) for a in args)]
    out = CliRunner().invoke(app, argv)
    assert out.exit_code == 2
    assert out.output.strip() == f"error: {message}"
