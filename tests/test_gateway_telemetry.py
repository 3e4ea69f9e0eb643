"""OpenTelemetry at the gateway: each client call's ``execute_tool`` span, in the
client's trace, exported over OTLP/HTTP to a real receiver (tests/otlp_receiver.py).

The gateway is a real ``tooldeck serve`` subprocess with ``OTEL_EXPORTER_OTLP_ENDPOINT``
set, in front of tests/mcp_servers/basic.py (stdio) and traced.py (streamable HTTP: it
answers with the trace context its request arrived with). The client is the official
SDK's, sending a W3C ``traceparent`` in the request's ``_meta``.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import anyio
import pytest

from gateway_client import (
    ALLOW_ALL,
    gateway,
    http_client,
    http_server,
    served_gateway,
    stdio,
    text_of,
    write_config,
    write_policy,
)
from otlp_receiver import OtlpReceiver


def _traceparent() -> tuple[str, str, str]:
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return trace_id, span_id, f"00-{trace_id}-{span_id}-01"


def _calls(trace_id: str) -> Any:
    def check(spans: list[dict[str, Any]]) -> bool:
        return len([s for s in spans if s["trace_id"] == trace_id and _is_call(s)]) >= 4

    return check


def _is_call(span: dict[str, Any]) -> bool:
    return str(span["name"]).startswith("execute_tool ")


async def _four_calls(c: Any, traceparent: str) -> str:
    meta: Any = {"traceparent": traceparent}
    traced = await c.call_tool("traced__trace_headers", {}, meta=meta)
    assert not traced.is_error, text_of(traced)
    for name, args in (("alpha__nope", {}), ("alpha__add", {"a": "x"})):
        assert (await c.call_tool(name, args, meta=meta)).is_error
    assert not (await c.call_tool("alpha__add", {"a": 1, "b": 2}, meta=meta)).is_error
    return text_of(traced)


def _check_trace(receiver: OtlpReceiver, trace_id: str, parent: str, seen: str) -> None:
    spans = receiver.wait_for(_calls(trace_id), "the gateway's execute_tool spans")
    mine = [s for s in spans if s["trace_id"] == trace_id]
    calls = {s["name"]: s for s in mine if _is_call(s)}
    assert (
        set(calls)
        == {
            "execute_tool traced__trace_headers",
            "execute_tool alpha__nope",
            "execute_tool alpha__add",
        }
        and len([s for s in mine if _is_call(s)]) == 4
    )
    outcomes = sorted(
        (s["name"], s["attributes"]["tooldeck.tool.outcome"], s["attributes"].get("error.type"))
        for s in mine
        if _is_call(s)
    )
    assert outcomes == [
        ("execute_tool alpha__add", "error", "invalid_arguments"),
        ("execute_tool alpha__add", "ok", None),
        ("execute_tool alpha__nope", "error", "unknown_tool"),
        ("execute_tool traced__trace_headers", "ok", None),
    ]
    traced = calls["execute_tool traced__trace_headers"]
    assert traced["attributes"]["gen_ai.tool.type"] == "extension"
    assert traced["attributes"]["tooldeck.mcp.server"] == "traced"
    assert traced["resource"]["service.name"] == "tooldeck-gateway"
    # the SDK's server span for the request is the client's child; the call is its child
    server = {s["span_id"]: s for s in mine if s["name"] == "tools/call traced__trace_headers"}
    assert [s["parent_span_id"] for s in server.values()] == [parent]
    assert traced["parent_span_id"] in server
    # and the HTTP upstream's request carried the trace on: its parent is the SDK's
    # client span for the request, a child of the call's span
    headers = json.loads(seen)
    _, sent_trace, sent_parent, _ = headers["traceparent"].split("-")
    assert sent_trace == trace_id
    by_id = {s["span_id"]: s for s in mine}
    assert by_id[sent_parent]["name"] == "MCP send tools/call trace_headers"
    assert by_id[sent_parent]["parent_span_id"] == traced["span_id"]
    assert headers["baggage"] is None


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_calls_are_spans_in_the_clients_trace(tmp_path: Path, transport: str) -> None:
    policy = write_policy(tmp_path, ALLOW_ALL)
    trace_id, parent, traceparent = _traceparent()
    with OtlpReceiver() as receiver, http_server("traced.py") as traced_url:
        config = write_config(
            tmp_path,
            {"alpha": stdio("basic.py"), "traced": {"url": traced_url, "startup_timeout": 30}},
        )
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "200"}
        args = ("--core", "*", "--policy", str(policy))
        if transport == "stdio":

            async def over_stdio() -> str:
                async with gateway(config, tmp_path / "s", *args, env=env) as c:
                    return await _four_calls(c, traceparent)

            seen = anyio.run(over_stdio)
        else:
            with served_gateway(config, tmp_path / "s", *args, env=env) as url:

                async def over_http() -> str:
                    async with http_client(url) as c:
                        return await _four_calls(c, traceparent)

                seen = anyio.run(over_http)
        _check_trace(receiver, trace_id, parent, seen)


def test_without_an_endpoint_nothing_is_exported(tmp_path: Path) -> None:
    """No OTEL variables: the gateway exports nothing (and a call carries no context on)."""
    policy = write_policy(tmp_path, ALLOW_ALL)
    with OtlpReceiver() as receiver, http_server("traced.py") as traced_url:
        config = write_config(tmp_path, {"traced": {"url": traced_url, "startup_timeout": 30}})

        async def main() -> str:
            args = ("--core", "*", "--policy", str(policy))
            async with gateway(config, tmp_path / "s", *args) as c:
                return text_of(await c.call_tool("traced__trace_headers", {}))

        seen = json.loads(anyio.run(main))
        assert seen["traceparent"] is None
        assert receiver.spans == []
