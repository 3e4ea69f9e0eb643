"""Real MCP clients that cannot elicit, against a real ``tooldeck serve``: the MCP
Inspector's CLI (npm ``@modelcontextprotocol/inspector``, ``--cli``) and openai-agents'
``MCPServerStdio`` / ``MCPServerStreamableHttp``, each over stdio and over streamable HTTP.

Each one lists the tools, calls ``tool_search``, calls the tool the search named by
exactly that name, makes a call the policy denies and sees the denial, and makes a call
that needs approval: with nobody to ask it is denied at once, saying how to allow it;
with a real ``tooldeck approve --watch`` running, the same call waits, the person there
approves it, and it runs. openai-agents also runs one agent (``Runner.run``, a scripted
model) through the gateway, and its default 5 s request timeout is let end a wait for a
watcher who does not answer (the gateway withdraws the approval). The gateway and its
upstream servers are those of tests/real_clients.py.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from agents import Agent, RunConfig, Runner
from agents.items import ModelResponse
from agents.mcp import MCPServer, MCPServerStdio, MCPServerStreamableHttp
from agents.models.interface import Model
from agents.usage import Usage
from mcp.shared.exceptions import MCPError
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from gateway_client import PY, npm_server, served_gateway, text_of
from real_clients import (
    ASKS,
    DENIAL,
    DENIED,
    FOUND,
    GATEWAY_TOOLS,
    QUERY,
    approvals,
    approved_by_watcher,
    is_current_time,
    says_how_to_allow,
    serve_args,
    setup,
    the_found_name,
    watching,
)

WATCHER = "tooldeck approve (out of band)"
INSPECTOR = ("@modelcontextprotocol/inspector", "2.12.0", "mcp-inspector")
NO_TRACING = RunConfig(tracing_disabled=True)  # offline: no traces sent to OpenAI


# -- the MCP Inspector's CLI -----------------------------------------------------------------
@pytest.fixture(scope="module")
def inspector() -> Path:
    """The Inspector's entry script, installed once (pinned) into ~/.cache."""
    return npm_server(*INSPECTOR)


class Inspector:
    """``mcp-inspector --cli`` against one target (a command line, or a URL): each method
    is one process, and one MCP session."""

    def __init__(self, entry: Path, target: list[str], home: Path) -> None:
        self.entry = entry
        self.target = target
        # it keeps a catalog and storage under ~/.mcp-inspector: not the user's home
        self.env = {**os.environ, "HOME": str(home)}

    async def run(self, method: str, tool: str | None = None, **args: Any) -> tuple[int, Any]:
        """Its exit status and the JSON it printed: a result on stdout, or an error of its
        own (``{"error": {"code": ...}}``) on stderr."""
        command = ["node", str(self.entry), "--cli", "--method", method]
        if tool is not None:
            command += ["--tool-name", tool]
        for key, value in args.items():  # a value is parsed as JSON, else kept as text
            text = value if isinstance(value, str) else json.dumps(value)
            command += ["--tool-arg", f"{key}={text}"]
        with anyio.fail_after(180):
            done = await anyio.run_process(
                [*command, "--", *self.target], check=False, env=self.env
            )
        out = done.stdout.decode() or done.stderr.decode()
        try:
            return done.returncode, json.loads(out)
        except ValueError:
            raise AssertionError(f"exit {done.returncode}: {out}\n{done.stderr.decode()}") from None

    async def call(self, tool: str, **args: Any) -> tuple[bool, str]:
        """``tools/call``: whether the result is an error (exit status 5), and its text."""
        status, result = await self.run("tools/call", tool, **args)
        assert status == (5 if result["isError"] else 0), (status, result)
        texts = [c["text"] for c in result["content"] if c["type"] == "text"]
        return result["isError"], "\n".join(texts)


async def _inspected(cli: Inspector, policy: Path, state: Path, *, direct: bool) -> None:
    status, listing = await cli.run("tools/list")
    assert status == 0 and {t["name"] for t in listing["tools"]} == GATEWAY_TOOLS
    error, answer = await cli.call("tool_search", query=QUERY)
    assert not error
    name = the_found_name(answer)
    if direct:  # a new session: the CLI refuses a name its own listing lacks
        status, refused = await cli.run("tools/call", name, timezone="UTC")
        assert status != 0 and refused["error"]["code"] == "tool_not_found", refused
    error, now = await cli.call("call_tool", name=name, arguments={"timezone": "UTC"})
    assert not error and is_current_time(now)
    error, denial = await cli.call("call_tool", name=DENIED, arguments={})
    assert error and DENIAL in denial
    error, nobody = await cli.call("call_tool", name=ASKS, arguments={"text": "asked"})
    assert error and says_how_to_allow(nobody, policy, state), nobody
    error, ran = await approved_by_watcher(
        state, lambda: cli.call("call_tool", name=ASKS, arguments={"text": "approved"})
    )
    assert not error and ran == "approved"


def test_the_inspector_cli_over_stdio(inspector: Path, tmp_path: Path) -> None:
    """Each command starts the gateway anew (its own stdio session)."""
    config, policy, state = setup(tmp_path)
    cli = Inspector(inspector, [PY, *serve_args(config, policy, state)], tmp_path / "home")
    anyio.run(lambda: _inspected(cli, policy, state, direct=False))
    assert approvals(state) == [(ASKS, "deny", None), (ASKS, "approve", WATCHER)]


def test_the_inspector_cli_over_http(inspector: Path, tmp_path: Path) -> None:
    config, policy, state = setup(tmp_path)
    with served_gateway(config, state, "--policy", str(policy)) as url:
        cli = Inspector(inspector, [url], tmp_path / "home")
        anyio.run(lambda: _inspected(cli, policy, state, direct=True))
    assert approvals(state) == [(ASKS, "deny", None), (ASKS, "approve", WATCHER)]


# -- openai-agents ---------------------------------------------------------------------------
async def _names(server: MCPServer) -> set[str]:
    return {t.name for t in await server.list_tools()}


async def _connected(server: MCPServer, policy: Path, state: Path) -> None:
    """The scenario over one openai-agents connection, up to the answer at once."""
    assert await _names(server) == GATEWAY_TOOLS
    name = the_found_name(text_of(await server.call_tool("tool_search", {"query": QUERY})))
    assert name in await _names(server)
    assert is_current_time(text_of(await server.call_tool(name, {"timezone": "UTC"})))
    wrapped = {"name": name, "arguments": {"timezone": "UTC"}}
    assert is_current_time(text_of(await server.call_tool("call_tool", wrapped)))
    denied = await server.call_tool(DENIED, {})
    assert denied.is_error and DENIAL in text_of(denied)
    nobody = await server.call_tool(ASKS, {"text": "asked"})
    assert nobody.is_error and says_how_to_allow(text_of(nobody), policy, state)


class Scripted(Model):
    """An openai-agents model (it has no offline one built in) that does what a model
    would: search, call the tool the search named (by its name when listed, else through
    ``call_tool``), then a call the policy denies and one that asks, through
    ``call_tool``; what it was given is kept (the tools listed, the calls' outputs)."""

    def __init__(self) -> None:
        self.seen: list[tuple[list[str], list[str]]] = []

    async def get_response(
        self, *args: Any, input: list[Any], tools: list[Any], **kwargs: Any
    ) -> ModelResponse:
        outputs = [_output(i) for i in input if i.get("type") == "function_call_output"]
        listed = [t.name for t in tools]
        self.seen.append((listed, outputs))
        step = len(outputs)
        if step == 0:
            return _call(step, "tool_search", {"query": QUERY})
        if step == 1:
            name = the_found_name(outputs[-1])
            if name in listed:
                return _call(step, name, {"timezone": "UTC"})
            return _call(step, "call_tool", {"name": name, "arguments": {"timezone": "UTC"}})
        if step == 2:
            return _call(step, "call_tool", {"name": DENIED, "arguments": {}})
        if step == 3:
            return _call(step, "call_tool", {"name": ASKS, "arguments": {"text": "agent"}})
        text = ResponseOutputText(text="done", type="output_text", annotations=[])
        done = ResponseOutputMessage(
            id="m", content=[text], role="assistant", status="completed", type="message"
        )
        return ModelResponse(output=[done], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def _call(step: int, name: str, arguments: dict[str, Any]) -> ModelResponse:
    call = ResponseFunctionToolCall(
        id=f"fc{step}",
        call_id=f"call{step}",
        name=name,
        arguments=json.dumps(arguments),
        type="function_call",
        status="completed",
    )
    return ModelResponse(output=[call], usage=Usage(), response_id=None)


def _output(item: Any) -> str:
    out = item["output"]
    return out if isinstance(out, str) else "\n".join(part.get("text", "") for part in out)


async def _agent_run(server: MCPServer, policy: Path, state: Path) -> None:
    """One openai-agents agent run with the gateway as its MCP server: its model is given
    the found tool listed, the tool's answer, the denial and the answer at once."""
    model = Scripted()
    agent = Agent(name="assistant", model=model, mcp_servers=[server])
    run = await Runner.run(agent, "What time is it in UTC?", run_config=NO_TRACING)
    assert run.final_output == "done"
    listed, outputs = model.seen[-1]
    assert FOUND in listed  # it lists the tools again each turn
    assert is_current_time(outputs[1]) and DENIAL in outputs[2]
    assert says_how_to_allow(outputs[3], policy, state)


async def _approved(server: MCPServer, state: Path) -> None:
    ran = await approved_by_watcher(state, lambda: server.call_tool(ASKS, {"text": "approved"}))
    assert not ran.is_error and text_of(ran) == "approved"


@pytest.fixture
def gateway_files(tmp_path: Path) -> Iterator[tuple[Path, Path, Path]]:
    yield setup(tmp_path)


def test_openai_agents_over_stdio(gateway_files: tuple[Path, Path, Path]) -> None:
    """The wait for the watcher needs a longer request timeout than its default (5 s):
    ``client_session_timeout_seconds``, as docs/gateway.md says."""
    config, policy, state = gateway_files
    params = {"command": PY, "args": serve_args(config, policy, state)}

    async def main() -> None:
        server = MCPServerStdio(params, client_session_timeout_seconds=120)
        await server.connect()
        try:
            await _connected(server, policy, state)
            await _agent_run(server, policy, state)
            await _approved(server, state)
        finally:
            await server.cleanup()

    anyio.run(main)
    at_once = [(ASKS, "deny", None)] * 2  # the client's call, its agent's
    assert approvals(state) == [*at_once, (ASKS, "approve", WATCHER)]


async def _gives_up(server: MCPServer, state: Path) -> None:
    """A call that waits for a watcher who does not answer, from a client whose request
    timeout (openai-agents' default, 5 s) ends first: the client cancels it, and the
    gateway withdraws the approval (its pending file goes) and keeps serving."""
    async with watching(state) as watcher:
        with pytest.raises(MCPError, match="timed out"):
            await server.call_tool(ASKS, {"text": "nobody answers"})
        await watcher.until(f"Approve {ASKS}")  # it was asked
        with anyio.fail_after(60):
            while True:  # the gateway hears of the cancel, and stops waiting
                if not list((state / "approvals").glob("*.pending.json")):
                    break
                await anyio.sleep(0.05)
    assert not (await server.call_tool("tool_search", {"query": QUERY})).is_error


def test_openai_agents_over_http(gateway_files: tuple[Path, Path, Path]) -> None:
    config, policy, state = gateway_files

    async def main(url: str) -> None:
        server = MCPServerStreamableHttp({"url": url})  # the default timeout, 5 s
        waits = MCPServerStreamableHttp({"url": url}, client_session_timeout_seconds=120)
        await server.connect()
        await waits.connect()
        try:
            await _connected(server, policy, state)
            await _agent_run(server, policy, state)
            await _gives_up(server, state)
            await _approved(waits, state)
        finally:
            await waits.cleanup()
            await server.cleanup()

    with served_gateway(config, state, "--policy", str(policy)) as url:
        anyio.run(main, url)
    gave_up = (ASKS, "deny", None)  # audited as a deny, by nobody
    at_once = [(ASKS, "deny", None)] * 2  # the client's call, its agent's
    assert approvals(state) == [*at_once, gave_up, (ASKS, "approve", WATCHER)]
