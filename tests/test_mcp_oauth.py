"""OAuth for upstream MCP servers, end to end over real HTTP (no mocks).

The authorization server and the protected MCP server are tests/oauth_server.py: the
SDK's own server-side auth (DCR, PKCE checked by the SDK's token handler, rotation of
refresh tokens, short-lived access tokens) in a thread. The client side is tooldeck's:
``tooldeck mcp login`` (a real subprocess, following the URL it prints), then
``tooldeck mcp list/call`` and ``McpSource`` using the stored tokens, refreshing them,
and failing with one line when they are gone. ``webbrowser.open`` is a tripwire in every
non-interactive step.
"""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import subprocess
import sys
import threading
import time
import webbrowser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import pytest
from typer.testing import CliRunner

from oauth_server import serving
from tooldeck.cli import app
from tooldeck.mcp import McpConfig, McpSource
from tooldeck.mcp.oauth import login_command
from tooldeck.mcp.oauth_login import LoginFailed, login
from tooldeck.mcp.oauth_store import TokenFile, token_file

NAME = "prot"
TOOLDECK = (sys.executable, "-m", "tooldeck.cli")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """$XDG_CONFIG_HOME for this test; the token folder is <it>/tooldeck/oauth."""
    config_home = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))
    return config_home / "tooldeck" / "oauth"


@pytest.fixture
def tripwire(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``webbrowser.open`` records instead of opening; non-interactive steps must not call it."""
    opened: list[str] = []

    def never(url: str, *args: Any, **kwargs: Any) -> bool:
        opened.append(url)
        return False

    monkeypatch.setattr(webbrowser, "open", never)
    return opened


def write_config(tmp_path: Path, url: str, oauth: Any = True) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {NAME: {"url": url, "oauth": oauth}}}))
    return path


def approve(url: str) -> httpx.Response:
    """What the user's browser does: open the authorization URL (the test AS approves at
    once) and follow its redirect to tooldeck's loopback callback."""
    return httpx.get(url, follow_redirects=True, timeout=30)


def login_in_process(config: Path, **options: Any) -> Any:
    """``login()`` with a browser that approves (in a thread, as a real browser would)."""
    cfg = McpConfig.load(config)
    lines: list[str] = []

    def say(line: str) -> None:
        lines.append(line)
        if line.startswith("  http"):
            threading.Thread(target=approve, args=(line.strip(),), daemon=True).start()

    async def run() -> Any:
        return await login(
            cfg[NAME], hint=login_command(str(config), NAME), say=say, open_browser=False, **options
        )

    return anyio.run(run)


def call(config: Path, tool: str, args: dict[str, Any]) -> Any:
    """One call through ``McpSource`` (what an agent turn and the gateway use): its value."""

    async def run() -> Any:
        async with McpSource(McpConfig.load(config)) as source:
            result = await source.call(NAME, tool, args)
            status = source.server_status(NAME)
            assert not result.is_error, (result.text(), status.error)
            return json.loads(result.text())["result"]

    return anyio.run(run)


def secrets_of(file: TokenFile) -> list[str]:
    data = json.loads(file.path.read_text())
    tokens = data.get("tokens") or {}
    found = [tokens.get("access_token"), tokens.get("refresh_token")]
    found.append((data.get("client_info") or {}).get("client_secret"))
    return [s for s in found if s]


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def one_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    return lines[0]


# -- login through the command line, then list and call -----------------------------------
def _read_until(stream: Any, pattern: str, seen: list[str], seconds: float = 120) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            break
        seen.append(line)
        if re.search(pattern, line):
            return line
    raise AssertionError(f"no line matching {pattern!r} in {seen!r}")


def test_login_with_the_cli_then_list_and_call(
    tmp_path: Path, home: Path, tripwire: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    marker = tmp_path / "a-browser-ran"
    browser = tmp_path / "browser.sh"
    browser.write_text(f"#!/bin/sh\ntouch {marker}\n")
    browser.chmod(0o755)
    with serving() as servers:
        config = write_config(tmp_path, servers.mcp)
        before_login = cli("mcp", "list", str(config), "--json")
        assert before_login.exit_code == 1
        error = json.loads(before_login.output)["servers"][0]["error"]
        assert (
            error == f"server '{NAME}' needs you to log in: run tooldeck mcp login {config} {NAME}"
        )
        assert servers.control("stats")["registered"] == 0  # nothing was asked of the AS

        proc = subprocess.Popen(
            [*TOOLDECK, "mcp", "login", str(config), NAME, "--no-browser", "--timeout", "120"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "BROWSER": str(browser)},
        )
        seen: list[str] = []
        try:
            url = _read_until(proc.stdout, r"^  http", seen).strip()
            query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
            assert query["code_challenge_method"] == "S256"
            assert query["resource"] == servers.mcp
            assert query["scope"] == "mcp"
            callback = query["redirect_uri"]
            assert re.fullmatch(r"http://127\.0\.0\.1:\d+/callback", callback)

            # a redirect that is not this login's (wrong state) is refused, and ignored
            forged = httpx.get(callback, params={"code": "stolen", "state": "not-the-state"})
            assert forged.status_code == 400 and "state" in forged.text

            # the AS approves; the code is in the redirect, not yet delivered
            redirect = httpx.get(url, follow_redirects=False)
            assert redirect.status_code == 302
            location = redirect.headers["location"]
            code = parse_qs(urlsplit(location).query)["code"][0]

            # PKCE: with the code (and even the client's secret) but not the verifier, the
            # token endpoint refuses
            file = token_file(servers.mcp)
            client = json.loads(file.path.read_text())["client_info"]
            stolen = {
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": callback,
                "client_id": client["client_id"],
                "client_secret": client["client_secret"],
                "code_verifier": "x" * 64,
            }
            refused = httpx.post(f"{servers.issuer}/token", data=stolen)
            assert refused.status_code == 400
            assert refused.json()["error"] == "invalid_grant"
            assert "code_verifier" in refused.json()["error_description"]

            delivered = httpx.get(location)
            assert delivered.status_code == 200
            assert proc.wait(120) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        rest = proc.stdout.read() if proc.stdout else ""
        output = "".join(seen) + rest
        assert f"Logged in to '{NAME}' (2 tools)" in output
        assert not marker.exists()

        # stored privately, outside the config
        assert stat.S_IMODE(file.path.stat().st_mode) == 0o600
        assert stat.S_IMODE(file.path.parent.stat().st_mode) == 0o700
        assert file.path.parent == home
        kept = secrets_of(file)
        assert len(kept) == 3
        assert not any(s in config.read_text() or s in output for s in kept)

        # non-interactive use of the stored tokens
        listed = cli("mcp", "list", str(config), "--json")
        assert listed.exit_code == 0, listed.output
        server = json.loads(listed.output)["servers"][0]
        assert server["state"] == "connected" and len(server["tools"]) == 2
        called = cli("mcp", "call", str(config), NAME, "whoami")
        assert called.exit_code == 0, called.output
        assert client["client_id"] in called.output
        stats = servers.control("stats")
        assert (stats["registered"], stats["exchanged"], stats["refreshed"]) == (1, 1, 0)
        for text in (listed.output, called.output, caplog.text):
            assert not any(s in text for s in kept)
    assert tripwire == []


# -- refresh -------------------------------------------------------------------------------
def test_login_opens_the_browser_and_an_expired_token_is_refreshed_silently(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []

    def browser(url: str, *args: Any, **kwargs: Any) -> bool:
        opened.append(url)
        threading.Thread(target=approve, args=(url,), daemon=True).start()
        return True

    with serving(access_ttl=2) as servers:
        config = write_config(tmp_path, servers.mcp)
        monkeypatch.setattr(webbrowser, "open", browser)
        cfg = McpConfig.load(config)
        lines: list[str] = []

        async def run() -> Any:
            return await login(cfg[NAME], hint="", say=lines.append, wait_seconds=60)

        result = anyio.run(run)
        assert result.tools == 2 and len(opened) == 1
        assert lines[0].startswith("Opening a browser") and lines[1].strip() == opened[0]

        opened.clear()
        monkeypatch.setattr(webbrowser, "open", lambda *a, **k: opened.append(a[0]))
        assert call(config, "add", {"a": 1, "b": 2}) == 3
        time.sleep(2.5)  # the access token expired (by the clock the file keeps)
        assert call(config, "add", {"a": 2, "b": 2}) == 4
        stats = servers.control("stats")
        assert stats["refreshed"] >= 1 and stats["refused_refresh"] == 0
        assert stats["authorized"] == 1
    assert opened == []


def test_a_token_the_server_stops_taking_is_refreshed_then_revocation_is_one_line(
    tmp_path: Path, home: Path, tripwire: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    with serving() as servers:
        config = write_config(tmp_path, servers.mcp)
        login_in_process(config)
        tripwire.clear()  # (login printed the URL; the test's "browser" followed it)
        file = token_file(servers.mcp)

        # the server answers 401 to a token the client still thinks valid: refreshed once
        servers.control("expire-access")
        assert call(config, "add", {"a": 1, "b": 2}) == 3
        assert servers.control("stats")["refreshed"] == 1

        # the user revoked the grant: no refresh can work, and no browser opens
        servers.control("expire-access")
        servers.control("revoke-refresh")
        failed = cli("mcp", "call", str(config), NAME, "add", "--args", '{"a": 1, "b": 1}')
        assert failed.exit_code == 1
        expected = (
            f"error: the token for '{NAME}' was revoked or expired and could not be "
            f"refreshed; run tooldeck mcp login {config} {NAME}"
        )
        assert one_line(failed.output) == expected
        data = json.loads(file.path.read_text())
        assert "tokens" not in data and data["revoked"]["reason"] == "invalid_grant"
        refused = servers.control("stats")["refused_refresh"]

        # said again from the file, without asking the authorization server
        again = cli("mcp", "list", str(config), "--json")
        assert again.exit_code == 1
        status = json.loads(again.output)["servers"][0]
        assert status["error"] == expected.removeprefix("error: ")
        assert status["needs_login"] is True
        assert servers.control("stats")["refused_refresh"] == refused
        assert "Traceback" not in caplog.text

        # logging in again works
        login_in_process(config)
        assert call(config, "add", {"a": 2, "b": 3}) == 5
    assert tripwire == []


def _call_in_a_process(config: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*TOOLDECK, "mcp", "call", str(config), NAME, "add", "--args", '{"a": 20, "b": 22}'],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_two_processes_refreshing_at_once_keep_a_valid_token(tmp_path: Path, home: Path) -> None:
    # the refresh grant takes 3 s: the second process arrives while the first refreshes
    with serving(refresh_delay=3.0) as servers:
        config = write_config(tmp_path, servers.mcp)
        login_in_process(config)
        servers.control("expire-access")  # both processes will get a 401, then refresh
        procs = [_call_in_a_process(config), _call_in_a_process(config)]
        outputs = [p.communicate(timeout=180)[0] for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outputs
        assert all(json.loads(out) == {"result": 42} for out in outputs), outputs
        stats = servers.control("stats")
        # one refresh; the other process waited, read the new token and used it
        assert (stats["refreshed"], stats["refused_refresh"]) == (1, 0)
        assert call(config, "add", {"a": 1, "b": 1}) == 2
        assert servers.control("stats")["refreshed"] == 1


# -- a client registered beforehand ------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_a_server_without_dynamic_registration_and_a_configured_client(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch, tripwire: list[str]
) -> None:
    port = _free_port()
    secret = "configured-secret-" + "s" * 20
    client = ("tooldeck-cli", secret, f"http://127.0.0.1:{port}/callback")
    with serving(dcr=False, clients=[client]) as servers:
        # without a client id there is nothing to log in with: one line saying what to do
        bare = write_config(tmp_path, servers.mcp)
        with pytest.raises(LoginFailed, match=r"no dynamic client registration.*client_id"):
            login_in_process(bare)

        monkeypatch.setenv("PROT_SECRET", secret)
        oauth = {"client_id": "tooldeck-cli", "client_secret": "${PROT_SECRET}"}
        config = write_config(tmp_path, servers.mcp, {**oauth, "callback_port": port})
        result = login_in_process(config)
        assert result.tools == 2
        assert call(config, "whoami", {}) == "tooldeck-cli"
        stored = token_file(servers.mcp).path.read_text()
        assert secret not in stored and "client_info" not in json.loads(stored)
        assert servers.control("stats")["registered"] == 0
    tripwire.clear()


# -- the store refuses what it cannot trust -------------------------------------------------
def test_token_files_that_cannot_be_trusted_are_errors_that_say_what_to_do(
    tmp_path: Path, home: Path, tripwire: list[str]
) -> None:
    url = "http://127.0.0.1:9/mcp"  # never reached: the file is checked first
    config = write_config(tmp_path, url)
    file = token_file(url)

    def error() -> str:
        out = cli("mcp", "list", str(config), "--json")
        assert out.exit_code == 1
        return str(json.loads(out.output)["servers"][0]["error"])

    assert error() == f"server '{NAME}' needs you to log in: run tooldeck mcp login {config} {NAME}"
    assert not home.exists()  # a read creates nothing

    home.mkdir(parents=True, mode=0o700)
    file.path.write_text("{not json")
    file.path.chmod(0o644)
    assert f"run chmod 600 {file.path}" in error()
    file.path.chmod(0o600)
    assert "is not a tooldeck token file (not valid JSON: " in error()
    file.path.write_text("[" * 5000 + "]" * 5000)  # read as any file given to tooldeck
    assert "is not a tooldeck token file (nested more than 100 levels deep" in error()
    assert "tooldeck mcp logout, then tooldeck mcp login" in error()
    file.path.write_text(json.dumps({"format": 1, "server_url": "http://elsewhere/mcp"}))
    assert "belongs to 'http://elsewhere/mcp'" in error()
    file.path.unlink()
    home.chmod(0o755)
    logout = cli("mcp", "logout", str(config), NAME)
    assert logout.exit_code == 0 and "Not logged in" in logout.output
    home.chmod(0o700)
    file.update(lambda d: {**d, "tokens": {"access_token": "a", "refresh_token": "r"}})
    home.chmod(0o755)
    assert f"run chmod 700 {home}" in error()
    out = cli("mcp", "logout", str(config), NAME)
    assert out.exit_code == 1 and one_line(out.output).startswith(f"error: {home} can be read")
    assert tripwire == []


def test_login_refusals(tmp_path: Path, home: Path) -> None:
    servers_json = {
        NAME: {"url": "http://127.0.0.1:9/mcp"},
        "local": {"command": sys.executable, "args": ["-c", "pass"]},
    }
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": servers_json}))
    out = cli("mcp", "login", str(config), NAME)
    assert out.exit_code == 2
    assert one_line(out.output) == (
        f"error: server '{NAME}' does not use OAuth; add \"oauth\": true to its entry in {config}"
    )
    out = cli("mcp", "login", str(config), "local")
    assert out.exit_code == 2 and "stdio server; OAuth is for HTTP servers" in out.output
    out = cli("mcp", "login", str(config), "nope")
    assert out.exit_code == 2 and "no MCP server 'nope'" in out.output
    assert not home.exists()


def test_a_login_nobody_completes_ends_after_its_timeout(tmp_path: Path, home: Path) -> None:
    with serving() as servers:
        config = write_config(tmp_path, servers.mcp)
        cfg = McpConfig.load(config)

        async def run() -> Any:
            return await login(
                cfg[NAME], hint="", say=lambda _: None, open_browser=False, wait_seconds=1
            )

        with pytest.raises(LoginFailed, match=r"no redirect from the browser within 1s"):
            anyio.run(run)
        assert "tokens" not in token_file(servers.mcp).read()


def test_the_callback_listener_answers_only_its_login(tmp_path: Path) -> None:
    from tooldeck.mcp.oauth_login import CallbackServer

    async def main() -> None:
        async with CallbackServer() as callback:
            callback.expect("the-state")
            base = f"http://127.0.0.1:{callback.port}"
            async with httpx.AsyncClient() as http:
                assert (await http.get(f"{base}/other")).status_code == 404
                assert (await http.post(f"{base}/callback")).status_code == 405
                bad = await http.get(f"{base}/callback", params={"code": "c", "state": "x"})
                assert bad.status_code == 400
                denied = await http.get(
                    f"{base}/callback",
                    params={"error": "access_denied", "state": "the-state"},
                )
                assert denied.status_code == 400
                late = await http.get(
                    f"{base}/callback", params={"code": "c", "state": "the-state"}
                )
                assert late.status_code == 409
            with pytest.raises(LoginFailed, match="refused the login: access_denied"):
                await callback.wait(5)
            assert callback.refused == 1
            # a client that connects and sends nothing does not block the listener
            with socket.create_connection(("127.0.0.1", callback.port)) as idle:
                async with httpx.AsyncClient() as http:
                    assert (await http.get(f"{base}/other")).status_code == 404
                idle.close()

    anyio.run(main)


def test_servers_fixture_is_the_sdks_auth(home: Path) -> None:
    """The test AS is the SDK's: RFC 8414 metadata, DCR, S256 only; the MCP server answers
    401 with RFC 9728 resource metadata."""
    with serving() as servers:
        meta = httpx.get(f"{servers.issuer}/.well-known/oauth-authorization-server").json()
        assert meta["code_challenge_methods_supported"] == ["S256"]
        assert meta["registration_endpoint"].endswith("/register")
        answer = httpx.post(servers.mcp, json={})
        assert answer.status_code == 401
        assert "resource_metadata=" in answer.headers["www-authenticate"]


def test_oauth_config_entries_are_checked() -> None:
    from tooldeck.mcp import McpConfigError, OAuthSettings

    url = "https://mcp.example.com/mcp"
    good = {
        "url": url,
        "oauth": {
            "client_id": "${ID}",
            "client_secret": "${SECRET}",
            "scopes": ["a", "b"],
            "callback_port": 8976,
            "token_endpoint_auth_method": "client_secret_basic",
        },
    }
    env = {"ID": "the-client", "SECRET": "the-secret-value"}
    server = McpConfig.from_dict({"mcpServers": {"s": good}}, environ=env)["s"]
    assert server.oauth == OAuthSettings(
        client_id="the-client",
        client_secret="the-secret-value",
        scopes=("a", "b"),
        callback_port=8976,
        token_endpoint_auth_method="client_secret_basic",
    )
    assert "the-secret-value" not in repr(server)
    plain = McpConfig.from_dict({"s": {"url": url, "oauth": True}})["s"]
    assert plain.oauth == OAuthSettings()
    assert McpConfig.from_dict({"s": {"url": url, "oauth": False}})["s"].oauth is None

    bad = {
        "a": {"command": "x", "oauth": True},
        "b": {"url": url, "oauth": "yes"},
        "c": {"url": url, "oauth": {"client": "x"}},
        "d": {"url": url, "oauth": {"client_secret": "s"}},
        "e": {"url": url, "oauth": {"callback_port": 70000}},
        "f": {"url": url, "oauth": {"token_endpoint_auth_method": "private_key_jwt"}},
        "g": {"url": url, "oauth": True, "headers": {"authorization": "Bearer x"}},
        "h": {"url": url, "oauth": {"client_id": "x", "client_secret": "${UNSET_SECRET}"}},
        "i": {"url": url, "oauth": {"scopes": ["two words"]}},
    }
    with pytest.raises(McpConfigError) as caught:
        McpConfig.from_dict({"mcpServers": bad}, environ={})
    assert list(caught.value.problems) == [
        "server 'a': oauth apply to http servers, not stdio",
        "server 'b': oauth must be true or an object, got a string",
        "server 'c': unknown oauth key(s) 'client'",
        "server 'd': oauth.client_secret needs oauth.client_id",
        "server 'e': oauth.callback_port must be a port number (0-65535)",
        "server 'f': oauth.token_endpoint_auth_method must be one of none, "
        "client_secret_post, client_secret_basic, got 'private_key_jwt'",
        "server 'g': give either oauth or an Authorization header, not both",
        "server 'h': oauth.client_secret: environment variable UNSET_SECRET is not set "
        "(set it, or write ${UNSET_SECRET:-default})",
        "server 'i': oauth.scopes must be non-empty words without spaces",
    ]
