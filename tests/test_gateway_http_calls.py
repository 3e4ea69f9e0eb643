"""``tools/call`` over streamable HTTP answered by the gateway itself (gateway/http_calls.py).

A real ``tooldeck serve --http`` in front of tests/mcp_servers/basic.py, reached with raw
HTTP (so that every byte of an answer is seen) and with real clients (the official SDK's,
fastmcp's). A plain call of an established session takes the gateway's own path, which
answers at once with one JSON body (the SDK's server here always answers with an SSE
stream): that is how these tests tell the two paths apart. The same call with a
``_meta`` key of its own is left to the SDK's server: the JSON must be the bytes of the
SDK's event, for every protocol version of the handshake; a call that reports progress
gets the SDK's very stream. Auth (a static bearer token; OAuth principals), session ids,
bad bodies, cancellation and disconnects are checked on this path.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from fastmcp import Client as FastMCPClient
from fastmcp.client.transports import StreamableHttpTransport
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from gateway_client import (
    INTROSPECTOR,
    approve,
    audit_lines,
    gateway_process,
    oauth_args,
    pending_file,
    served_gateway,
    stdio,
    write_config,
    write_policy,
)
from oauth_server import OAuthServers, serving

TOKEN = "t" * 40
POLICY = (
    '[profile]\n[[profile.rules]]\ntools = "alpha__wipe"\naction = "deny"\n'
    'reason = "no wiping"\n'
    '[[profile.rules]]\ntools = ["alpha__echo", "alpha__add", "alpha__weather", '
    '"alpha__fail", "alpha__slow"]\naction = "allow"\n'
)
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@contextmanager
def _served(tmp: Path, *args: str) -> Iterator[tuple[str, Path]]:
    config = write_config(tmp, {"alpha": stdio("basic.py")})
    policy = write_policy(tmp, POLICY)
    state = tmp / "state"
    with gateway_process(config, state, "--core", "*", "--policy", str(policy), *args) as (url, _):
        yield url, state


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """One gateway behind a static bearer token, for every test but OAuth's."""
    tmp = tmp_path_factory.mktemp("http-calls")
    (tmp / "token").write_text(TOKEN + "\n")
    with _served(tmp, "--token-file", str(tmp / "token")) as served:
        yield served


class Raw:
    """Raw HTTP to the gateway: one client session of protocol ``version``."""

    def __init__(self, http: httpx.AsyncClient, url: str, token: str | None = TOKEN) -> None:
        self.http = http
        self.url = url
        self.token = token
        self.session: str | None = None
        self.version = ""

    def headers(self, **extra: str) -> dict[str, str]:
        headers = dict(ACCEPT)
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        if self.session is not None:
            headers["Mcp-Session-Id"] = self.session
            headers["Mcp-Protocol-Version"] = self.version
        return {**headers, **extra}

    async def post(self, message: dict[str, Any] | bytes, **extra: str) -> httpx.Response:
        body = (
            message
            if isinstance(message, bytes)
            else httpx.Request("POST", "/", json=message).content
        )
        return await self.http.post(self.url, content=body, headers=self.headers(**extra))

    async def open(self, version: str, capabilities: dict[str, Any] | None = None) -> Raw:
        """``initialize``, ``notifications/initialized``, and a listing (the session is
        the gateway's from then on)."""
        params = {
            "protocolVersion": version,
            "capabilities": capabilities or {},
            "clientInfo": {"name": "raw", "version": "1"},
        }
        opened = await self.post(
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
        )
        assert opened.status_code == 200, opened.text
        self.session, self.version = opened.headers["mcp-session-id"], version
        done = await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert done.status_code == 202
        with anyio.fail_after(60):  # until the upstream is up
            while True:
                listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
                if "alpha__echo" in str(_events(await self.post(listing))):
                    return self
                await anyio.sleep(0.1)

    def call_message(
        self,
        request_id: int | str,
        name: str,
        arguments: dict[str, Any] | None,
        sdk: bool = False,
        progress: bool = False,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        meta: dict[str, Any] = {"progressToken": f"p-{request_id}"} if progress else {}
        if sdk:  # not a plain call: the SDK's server answers it
            meta["tooldeck.test/sdk"] = True
        if meta:
            params["_meta"] = meta
        return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}

    async def call(
        self,
        request_id: int | str,
        name: str,
        arguments: dict[str, Any] | None,
        sdk: bool = False,
        progress: bool = False,
    ) -> httpx.Response:
        return await self.post(self.call_message(request_id, name, arguments, sdk, progress))


def _events(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an answer: an SSE stream's events, or a JSON body."""
    import json

    assert response.status_code == 200, response.text
    if response.headers.get("content-type") == "application/json":
        return [response.json()]
    return [json.loads(data) for data in _data(response)]


def _data(response: httpx.Response) -> list[bytes]:
    """The data of an SSE stream's events, as sent."""
    return [
        line.removeprefix(b"data: ")
        for block in response.content.split(b"\r\n\r\n")
        for line in block.split(b"\r\n")
        if line.startswith(b"data: ")
    ]


def _narrow(response: httpx.Response) -> bool:
    """Whether the gateway's own path answered (see the module docstring; the SDK's
    errors are JSON too, never with 200)."""
    json = response.headers.get("content-type") == "application/json"
    return response.status_code == 200 and json


def _run(main: Any, *args: Any) -> None:
    anyio.run(main, *args)


@asynccontextmanager
async def _http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=60) as http:
        yield http


CALLS: list[tuple[str, dict[str, Any] | None]] = [
    ("alpha__echo", {"text": "hello"}),
    ("alpha__echo", {"text": 'h\u00e9llo \u2603 \u2028 \U0001f600 "q" \\ </script>'}),
    ("alpha__add", {"a": 2, "b": 40}),
    ("alpha__weather", {"city": "Oslo"}),  # structured output
    ("alpha__fail", {"message": "it broke"}),  # the upstream's error result
    ("alpha__wipe", None),  # denied by the policy
    ("alpha__echo", {}),  # arguments the tool refuses
    ("alpha__nope", {"x": 1}),  # no such tool
    ("tool_search", {"query": "add two numbers"}),  # the gateway's own tool
]


@pytest.mark.parametrize("version", HANDSHAKE_PROTOCOL_VERSIONS)
def test_answers_are_the_sdks_bytes_for_every_protocol_version(
    gateway: tuple[str, Path], version: str
) -> None:
    url, state = gateway

    async def main() -> None:
        async with _http() as http:
            c = await Raw(http, url).open(version)
            for n, (name, arguments) in enumerate(CALLS):
                for request_id, progress in ((n + 10, False), (f"s{n}", True)):
                    ours = await c.call(request_id, name, arguments, progress=progress)
                    sdks = await c.call(request_id, name, arguments, sdk=True, progress=progress)
                    assert _narrow(ours) and not _narrow(sdks), (name, ours.headers)
                    # the SDK's one event, its bytes as the JSON body
                    assert [ours.content] == _data(sdks), (name, ours.content, sdks.content)
                    session = sdks.headers["mcp-session-id"]
                    assert dict(ours.headers) == {
                        "date": ours.headers["date"],
                        "server": "uvicorn",
                        "content-type": "application/json",
                        "mcp-session-id": session,
                        "content-length": str(len(ours.content)),
                    }
            # the calls answered here were judged and audited as the SDK's were
            wiped = [a for a in audit_lines(state) if a["tool"] == "alpha__wipe"]
            assert wiped and {a["decision"] for a in wiped} == {"deny"}

    _run(main)


def test_the_bearer_token_is_checked_on_this_path(gateway: tuple[str, Path]) -> None:
    url, _ = gateway

    async def main() -> None:
        async with _http() as http:
            c = await Raw(http, url).open("2025-11-25")
            message = c.call_message(1, "alpha__echo", {"text": "x"})
            for auth in ({}, {"Authorization": f"Bearer {'u' * 40}"}, {"Authorization": TOKEN}):
                headers = {k: v for k, v in c.headers().items() if k != "Authorization"}
                refused = await http.post(url, json=message, headers={**headers, **auth})
                assert refused.status_code == 401, auth
                assert "x" not in refused.text
            assert _narrow(ok := await c.post(message)) and _events(ok)[0]["result"]

    _run(main)


def test_unknown_ended_and_missing_session_ids_are_the_sdks_answers(
    gateway: tuple[str, Path],
) -> None:
    url, _ = gateway

    async def main() -> None:
        async with _http() as http:
            c = await Raw(http, url).open("2025-06-18")
            message = c.call_message(1, "alpha__echo", {"text": "x"})
            unknown = await c.post(message, **{"Mcp-Session-Id": "f" * 32})
            assert unknown.status_code == 404 and "Session not found" in unknown.text
            ended = await Raw(http, url).open("2025-06-18")
            assert ended.session is not None
            closed = await http.delete(url, headers=ended.headers())
            assert closed.status_code == 200
            gone = await ended.post(message)
            assert gone.status_code == 404
            # a modern protocol version header: the SDK's own entry, never this path
            modern = await c.post(message, **{"Mcp-Protocol-Version": "2026-07-28"})
            assert not _narrow(modern)
            # a client that must not get SSE: the SDK's 406
            refused = await c.post(message, Accept="application/json")
            assert refused.status_code == 406
            # and the session still works, here
            assert _narrow(ok := await c.post(message)) and _events(ok)[0]["result"]

    _run(main)


def test_bad_bodies_get_the_sdks_answers(gateway: tuple[str, Path]) -> None:
    url, _ = gateway

    async def main() -> None:
        async with _http() as http:
            c = await Raw(http, url).open("2025-11-25")
            broken = await c.post(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "par')
            assert broken.status_code == 400 and '"code":-32700' in broken.text
            # a bool id, a missing name, an extra key: not plain, the SDK decides
            for bad in (
                {"jsonrpc": "2.0", "id": True, "method": "tools/call", "params": {"name": "x"}},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"arguments": {}}},
                {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": 3}},
            ):
                answer = await c.post(bad)
                assert not _narrow(answer) and answer.status_code in (200, 202, 400), bad
            # over the body limit (4 MiB): 413 before anything is read or parsed
            huge = c.call_message(4, "alpha__echo", {"text": "x" * (5 * 1024 * 1024)})
            assert (await c.post(huge)).status_code == 413

            async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: streamed
                yield b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": '
                for _ in range(5):
                    yield b" " * (1024 * 1024)
                yield b'{"name": "alpha__echo", "arguments": {"text": "x"}}}'

            streamed = await http.post(url, content=chunks(), headers=c.headers())
            assert streamed.status_code == 413
            assert _narrow(ok := await c.call(6, "alpha__echo", {"text": "fine"}))
            assert _events(ok)[0]["result"]["content"][0]["text"] == "fine"

    _run(main)


async def _cancelled(c: Raw, sdk: bool) -> bytes:
    """A slow call, cancelled by the client: its stream's bytes."""
    done: list[httpx.Response] = []
    answered = anyio.Event()

    async def slow() -> None:
        done.append(await c.call(7, "alpha__slow", {"seconds": 30}, sdk=sdk))
        answered.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(slow)
        await anyio.sleep(1.5)  # running, upstream
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
        accepted = await c.post(cancel)
        assert accepted.status_code == 202
        with anyio.fail_after(20):  # long before the 30 s
            await answered.wait()
    (answer,) = done
    assert _events(answer) == [
        {"jsonrpc": "2.0", "id": 7, "error": {"code": -32800, "message": "Request cancelled"}}
    ]
    return answer.content


def test_a_cancelled_call_ends_as_the_sdks_does(gateway: tuple[str, Path]) -> None:
    url, _ = gateway

    async def main() -> None:
        async with _http() as http:
            c = await Raw(http, url).open("2025-11-25")
            ours = await _cancelled(c, sdk=False)
            assert ours == await _cancelled(c, sdk=True)
            # a cancel for an id nobody runs: the SDK's 202, and nothing else happens
            stray = {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 99},
            }
            assert (await c.post(stray)).status_code == 202
            assert _narrow(ok := await c.call(7, "alpha__echo", {"text": "after"}))
            assert _events(ok)[0]["result"]["content"][0]["text"] == "after"

    _run(main)


def test_a_client_that_disconnects_mid_call_cancels_it(gateway: tuple[str, Path]) -> None:
    url, _ = gateway

    async def main() -> None:
        async with _http() as http:
            c = await Raw(http, url).open("2025-11-25")
            message = c.call_message(9, "alpha__slow", {"seconds": 30})
            async with httpx.AsyncClient(timeout=httpx.Timeout(60, read=2.0)) as impatient:
                with pytest.raises(httpx.ReadTimeout):
                    await impatient.post(url, json=message, headers=c.headers())
            # the call ended with the connection: its id is free again at once (a call
            # still running would send a duplicate to the SDK)
            with anyio.fail_after(10):
                while True:
                    again = await c.call(9, "alpha__echo", {"text": "again"})
                    if _narrow(again):
                        break
                    await anyio.sleep(0.1)
            assert _events(again)[0]["result"]["content"][0]["text"] == "again"

    _run(main)


def test_a_long_call_gets_its_headers_early_and_its_answer_chunked(
    gateway: tuple[str, Path],
) -> None:
    url, _ = gateway

    async def main() -> None:
        async with _http() as http:
            c = await Raw(http, url).open("2025-11-25")
            message = c.call_message(3, "alpha__slow", {"seconds": 2.5})
            async with http.stream("POST", url, json=message, headers=c.headers()) as streamed:
                # the headers came before the answer (within the 2.5 s the call sleeps)
                assert streamed.headers["content-type"].startswith("text/event-stream")
                assert "content-length" not in streamed.headers
                body = (await streamed.aread()).decode()
            assert body.startswith('event: message\r\ndata: {"jsonrpc":"2.0","id":3,"result"')
            assert "slept 2.5" in body and body.endswith("\r\n\r\n")

    _run(main)


def test_an_eliciting_client_is_served_by_the_sdk(gateway: tuple[str, Path]) -> None:
    url, _ = gateway

    async def main() -> None:
        async with _http() as http:
            c = await Raw(http, url).open("2025-11-25", {"elicitation": {}})
            answer = await c.call(1, "alpha__echo", {"text": "asked"})
            assert not _narrow(answer)
            assert _events(answer)[-1]["result"]["content"][0]["text"] == "asked"

    _run(main)


def test_progress_while_an_approval_waits_is_the_sdks(tmp_path: Path) -> None:
    """Out-of-band approvals: a waiting call reports progress on its stream; the events
    and the answer are those the SDK's server sends for the same call."""
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    state = tmp_path / "s"

    async def waits(c: Raw, sdk: bool, seen: set[Path]) -> list[str]:
        message = c.call_message("w", "alpha__echo", {"text": "approved"}, sdk, progress=True)
        async with (
            anyio.create_task_group() as tg,
            c.http.stream("POST", c.url, json=message, headers=c.headers()) as streamed,
        ):
            path = await pending_file(state, seen)
            seen.add(path)
            tg.start_soon(anyio.to_thread.run_sync, approve, path, "y\n")
            body = (await streamed.aread()).decode()
        events = [
            re.sub(r'"progress":[-+.e0-9]+|-[0-9]+\.pending', "(varies)", e)  # time, file
            for e in body.split("\r\n\r\n")
            if e and not e.startswith(": ping")
        ]
        assert events[-1].endswith('"isError":false}}'), events
        assert any('"method":"notifications/progress"' in e for e in events), events
        return events

    async def main() -> None:
        with served_gateway(config, state, "--approvals", "out-of-band", "--core", "*") as url:
            async with _http() as http:
                c = await Raw(http, url, token=None).open("2025-11-25")
                seen: set[Path] = set()
                assert await waits(c, False, seen) == await waits(c, True, seen)

    _run(main)


# -- real clients ---------------------------------------------------------------------------
class Seen:
    """An httpx event hook: which path answered each ``tools/call``."""

    def __init__(self) -> None:
        self.paths: list[bool] = []

    async def __call__(self, response: httpx2.Response) -> None:
        if response.request.method == "POST" and b'"tools/call"' in response.request.content:
            json = response.headers.get("content-type") == "application/json"
            self.paths.append(response.status_code == 200 and json)


def test_the_official_sdk_client_calls_through_this_path(gateway: tuple[str, Path]) -> None:
    url, _ = gateway
    seen = Seen()

    async def main() -> None:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            httpx2.AsyncClient(headers=headers, event_hooks={"response": [seen]}) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            await client.list_tools()
            async with anyio.create_task_group() as tg:  # concurrent calls, one session
                for n in range(8):
                    tg.start_soon(_sdk_echo, client, f"call {n}")
            added = await client.call_tool("alpha__add", {"a": 1, "b": 2})
            assert added.structured_content == {"result": 3}
            denied = await client.call_tool("alpha__wipe", {})
            assert denied.is_error and "no wiping" in str(denied.content)

    _run(main)
    assert seen.paths and all(seen.paths), seen.paths


async def _sdk_echo(client: ClientSession, text: str) -> None:
    result = await client.call_tool("alpha__echo", {"text": text})
    assert not result.is_error and result.content[0].text == text  # type: ignore[union-attr]


def test_fastmcps_client_calls_through_the_gateway(gateway: tuple[str, Path]) -> None:
    url, _ = gateway
    seen = Seen()

    def factory(**kwargs: Any) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(**kwargs, event_hooks={"response": [seen]})

    async def main() -> None:
        transport = StreamableHttpTransport(
            url, headers={"Authorization": f"Bearer {TOKEN}"}, httpx_client_factory=factory
        )
        async with FastMCPClient(transport) as client:
            await client.list_tools()
            for n in range(3):
                result = await client.call_tool("alpha__echo", {"text": f"fast {n}"})
                assert result.content[0].text == f"fast {n}"  # type: ignore[union-attr]
            added = await client.call_tool("alpha__add", {"a": 20, "b": 22})
            assert added.structured_content == {"result": 42}

    _run(main)
    # fastmcp declares elicitation only with a handler: none here, so this path
    assert seen.paths and all(seen.paths), seen.paths


# -- OAuth ----------------------------------------------------------------------------------
def test_an_oauth_principal_cannot_use_anothers_session(tmp_path: Path) -> None:
    with (
        serving(introspector=INTROSPECTOR) as servers,
        _served(tmp_path, *oauth_args(servers, tmp_path)) as (url, _),
    ):
        _run(_principals, url, servers)


async def _principals(url: str, servers: OAuthServers) -> None:
    def mint(subject: str, client: str) -> str:
        body = {"resource": url, "subject": subject, "client_id": client}
        return str(servers.control("mint", body)["access_token"])

    alice, bob = mint("alice", "app-a"), mint("bob", "app-b")
    async with _http() as http:
        c = await Raw(http, url, alice).open("2025-11-25")
        message = c.call_message(1, "alpha__echo", {"text": "mine"})
        assert _narrow(ok := await c.post(message)) and _events(ok)[0]["result"]
        stolen = await c.post(message, Authorization=f"Bearer {bob}")
        assert stolen.status_code == 404 and "mine" not in stolen.text
        alice_elsewhere = await c.post(message, Authorization=f"Bearer {mint('alice', 'app-b')}")
        assert alice_elsewhere.status_code == 404  # another OAuth client of the same user
        nobody = {k: v for k, v in c.headers().items() if k != "Authorization"}
        assert (await http.post(url, json=message, headers=nobody)).status_code == 401
        assert _narrow(again := await c.post(message)) and _events(again)[0]["result"]
