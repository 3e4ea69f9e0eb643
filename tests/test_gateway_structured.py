"""Structured results through the gateway: ``outputSchema`` listed and ``structuredContent``
passed to clients whose protocol version has them, within the guard's limit.

Real processes only: ``tooldeck serve`` reached with the official MCP client SDK (the
handshake's 2025-11-25 and the stateless 2026-07-28), and by a client that speaks
2025-03-26 as plain JSON-RPC lines, in front of tests/mcp_servers/structured.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio

from gateway_client import (
    ALLOW_ALL,
    PY,
    gateway,
    stdio,
    stdio_2026,
    text_of,
    write_config,
    write_policy,
)
from tooldeck.tokens import estimate_tokens

REF = re.compile(r"ref_[0-9a-f]{16}")
ARGS = ("--core", "*")


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    config = write_config(tmp_path, {"wx": stdio("structured.py")})
    return config, write_policy(tmp_path, ALLOW_ALL)


def test_structured_content_and_output_schema_reach_the_sdk_client(tmp_path: Path) -> None:
    config, policy = _setup(tmp_path)

    async def main() -> None:
        async with gateway(config, tmp_path / "s", *ARGS, "--policy", str(policy)) as c:
            listed = {t.name: t for t in (await c.list_tools()).tools}
            schema = listed["wx__forecast"].output_schema
            assert schema is not None and set(schema["properties"]) == {"city", "celsius", "sky"}
            assert listed["wx__loose"].output_schema is None  # the server gave none
            # the SDK client checks the result against the listed schema
            result = await c.call_tool("wx__forecast", {"city": "Oslo"})
            assert not result.is_error
            assert result.structured_content == {"city": "Oslo", "celsius": 21.5, "sky": "clear"}
            assert json.loads(text_of(result)) == result.structured_content  # once, as text
            small = await c.call_tool("wx__loose", {"count": 3})
            assert small.structured_content is not None
            assert [r["id"] for r in small.structured_content["records"]] == [0, 1, 2]

    anyio.run(main)


def test_the_stateless_protocol_gets_them_too(tmp_path: Path) -> None:
    config, policy = _setup(tmp_path)

    async def main() -> None:
        async with stdio_2026(config, tmp_path / "s", *ARGS, "--policy", str(policy)) as c:
            listed = {t.name: t for t in (await c.list_tools()).tools}
            assert listed["wx__records"].output_schema is not None
            result = await c.call_tool("wx__records", {"count": 2})
            assert result.structured_content is not None
            assert result.structured_content["count"] == 2

    anyio.run(main)


def test_a_structured_result_between_offload_and_guard_goes_along_whole(tmp_path: Path) -> None:
    """Offloaded text (the model reads a summary), the object itself within the guard."""
    config, policy = _setup(tmp_path)

    async def main() -> None:
        args = (*ARGS, "--policy", str(policy), "--offload-tokens", "2000")
        async with gateway(config, tmp_path / "s", *args) as c:
            result = await c.call_tool("wx__records", {"count": 200})
            assert not result.is_error
            assert REF.search(text_of(result)) is not None  # the text was offloaded
            assert estimate_tokens(text_of(result)) < 2_000
            assert result.structured_content is not None
            assert len(result.structured_content["records"]) == 200
            sent = json.dumps(result.structured_content, separators=(",", ":"))
            assert 2_000 < estimate_tokens(sent) <= 25_000

    anyio.run(main)


def test_a_huge_structured_result_is_not_sent_and_the_schema_never_rejects_it(
    tmp_path: Path,
) -> None:
    config, policy = _setup(tmp_path)
    guard = 6_000

    async def main() -> None:
        args = (*ARGS, "--policy", str(policy), "--offload-tokens", "3000")
        args += ("--guard-tokens", str(guard))
        async with gateway(config, tmp_path / "s", *args) as c:
            await c.list_tools()  # the client now holds wx__records' outputSchema
            # with an output schema: the SDK client would raise on a result without
            # structured content; the gateway marks it an error, and says why
            big = await c.call_tool("wx__records", {"count": 5_000})
            shown = text_of(big)
            assert big.structured_content is None
            assert big.is_error and "The call did not fail" in shown
            assert "structuredContent not sent" in shown and f"{guard:,} tokens" in shown
            assert estimate_tokens(shown) <= guard
            ref = REF.search(shown)
            assert ref is not None  # the whole of it can still be read
            page = await c.call_tool("recall_tool_result", {"ref_id": ref.group()})
            assert not page.is_error and "record 000000" in text_of(page)
            # without an output schema: not an error, the line says what was held back
            loose = await c.call_tool("wx__loose", {"count": 5_000})
            assert loose.structured_content is None and not loose.is_error
            assert text_of(loose).startswith("[structuredContent not sent")
            assert "did not fail" not in text_of(loose)
            assert estimate_tokens(text_of(loose)) <= guard

    anyio.run(main)


def test_without_offloading_the_guard_still_bounds_what_is_sent(tmp_path: Path) -> None:
    config, policy = _setup(tmp_path)

    async def main() -> None:
        args = (*ARGS, "--policy", str(policy), "--offload-tokens", "0", "--guard-tokens", "3000")
        async with gateway(config, tmp_path / "s", *args) as c:
            result = await c.call_tool("wx__loose", {"count": 2_000})
            assert result.structured_content is None
            assert estimate_tokens(text_of(result)) <= 3_000
            assert "structuredContent not sent" in text_of(result)

    anyio.run(main)


def _rpc(proc: subprocess.Popen[str], ident: int, method: str, params: Any) -> Any:
    assert proc.stdin is not None and proc.stdout is not None
    message = {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}
    proc.stdin.write(json.dumps(message) + "\n")
    proc.stdin.flush()
    while True:
        line = json.loads(proc.stdout.readline())
        if line.get("id") == ident:
            return line["result"]


def test_a_client_of_an_older_protocol_gets_neither(tmp_path: Path) -> None:
    """2025-03-26 has no outputSchema nor structuredContent: it gets the text only."""
    config, policy = _setup(tmp_path)
    serve = ["-m", "tooldeck.cli", "serve", "--mcp", str(config), "--state", str(tmp_path / "s")]
    proc = subprocess.Popen(
        [PY, *serve, "--lexical", *ARGS, "--policy", str(policy)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        hello = {
            "protocolVersion": "2025-03-26",
            "capabilities": {},
            "clientInfo": {"name": "old", "version": "1"},
        }
        assert _rpc(proc, 1, "initialize", hello)["protocolVersion"] == "2025-03-26"
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        proc.stdin.write("\n")
        proc.stdin.flush()
        tools: dict[str, Any] = {}
        for ident in range(2, 600):  # the upstream starts in the background: listed once up
            tools = {t["name"]: t for t in _rpc(proc, ident, "tools/list", {})["tools"]}
            if "wx__forecast" in tools:
                break
            time.sleep(0.05)
        assert "outputSchema" not in tools["wx__forecast"]
        result = _rpc(
            proc, 1000, "tools/call", {"name": "wx__forecast", "arguments": {"city": "X"}}
        )
        assert "structuredContent" not in result
        assert json.loads(result["content"][0]["text"])["city"] == "X"
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(30)
