"""Real MCP clients nobody on the project wrote, against a real ``tooldeck serve``: the
official Python SDK's client, fastmcp's ``Client`` and pydantic-ai's ``MCPToolset`` (and
one pydantic-ai agent run), each over stdio and over streamable HTTP. These clients can
elicit, so an approval is asked of their user (an elicitation handler) and the call runs.

Each one lists the tools, calls ``tool_search``, calls the tool by exactly the name the
search answered (directly, and through ``call_tool``), makes a call the policy denies and
sees the denial, and makes a call that needs approval. The gateway is in front of PyPI's
mcp-server-time and tests/mcp_servers/basic.py (tests/real_clients.py). The clients that
cannot elicit (the MCP Inspector's CLI, openai-agents) are in
tests/test_gateway_clients_cli.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from fastmcp import Client as FastMCPClient
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
from mcp.shared.exceptions import MCPError
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelRetry
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from gateway_client import (
    APPROVE,
    PY,
    Answers,
    audit_lines,
    gateway,
    http_client,
    names,
    served_gateway,
    text_of,
)
from real_clients import (
    ASKS,
    DENIAL,
    DENIED,
    FOUND,
    GATEWAY_TOOLS,
    QUERY,
    approvals,
    is_current_time,
    serve_args,
    setup,
    the_found_name,
)
from tooldeck.gateway.approval import CANCELLED

CLOSED = "the approval request failed (the user closed the window)"
USER = "mcp-client-user"  # who approved, in the audit log: the client's user, by elicitation


# -- the official Python SDK (ClientSession) ------------------------------------------------
async def _sdk(client: Any, answers: Answers) -> None:
    assert set(await names(client)) == GATEWAY_TOOLS
    found = await client.call_tool("tool_search", {"query": QUERY})
    name = the_found_name(text_of(found))
    assert name in await names(client)  # announced with list_changed, listed again
    assert is_current_time(text_of(await client.call_tool(name, {"timezone": "UTC"})))
    wrapped = {"name": name, "arguments": {"timezone": "UTC"}}
    assert is_current_time(text_of(await client.call_tool("call_tool", wrapped)))
    denied = await client.call_tool(DENIED, {})
    assert denied.is_error and DENIAL in text_of(denied)
    ran = await client.call_tool(ASKS, {"text": "approved"})
    assert not ran.is_error and text_of(ran) == "approved"
    assert [ASKS in p.message for p in answers.asked] == [True]


def test_the_python_sdk_client_over_stdio(tmp_path: Path) -> None:
    config, policy, state = setup(tmp_path)
    answers = Answers(APPROVE)

    async def main() -> None:
        async with gateway(config, state, "--policy", str(policy), elicit=answers) as c:
            await _sdk(c, answers)

    anyio.run(main)
    assert approvals(state) == [(ASKS, "approve", USER)]


def test_the_python_sdk_client_over_http(tmp_path: Path) -> None:
    config, policy, state = setup(tmp_path)
    answers = Answers(APPROVE)

    async def main(url: str) -> None:
        async with http_client(url, elicit=answers) as c:
            await _sdk(c, answers)

    with served_gateway(config, state, "--policy", str(policy)) as url:
        anyio.run(main, url)
    assert approvals(state) == [(ASKS, "approve", USER)]


# -- fastmcp's Client ------------------------------------------------------------------------
class Approver:
    """A fastmcp (and pydantic-ai) elicitation handler: approves (but a call whose
    arguments say "refuse"), and keeps each message."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, message: str, response_type: Any, params: Any, context: Any) -> Any:
        self.asked.append(message)
        return {"approve": "refuse" not in message}


async def _fastmcp(transport: Any) -> None:
    approver = Approver()
    async with FastMCPClient(transport, elicitation_handler=approver, timeout=120) as c:
        assert {t.name for t in await c.list_tools()} == GATEWAY_TOOLS
        found = await c.call_tool("tool_search", {"query": QUERY})
        name = the_found_name(text_of(found))
        assert name in {t.name for t in await c.list_tools()}
        direct = await c.call_tool(name, {"timezone": "UTC"})
        assert is_current_time(text_of(direct)) and direct.data.timezone == "UTC"
        wrapped = await c.call_tool("call_tool", {"name": name, "arguments": {"timezone": "UTC"}})
        assert is_current_time(text_of(wrapped))
        denied = await c.call_tool(DENIED, {}, raise_on_error=False)
        assert denied.is_error and DENIAL in text_of(denied)
        ran = await c.call_tool(ASKS, {"text": "approved"}, raise_on_error=False)
        assert not ran.is_error and text_of(ran) == "approved"
        await _at_once(c)
    assert [ASKS in m for m in approver.asked] == [True] * 5


async def _at_once(c: FastMCPClient[Any]) -> None:
    """Four calls that ask, at once: each is asked on its own form and gets its own
    answer (two approved, two refused)."""
    got: dict[str, tuple[bool, str]] = {}

    async def call(text: str) -> None:
        result = await c.call_tool(ASKS, {"text": text}, raise_on_error=False)
        got[text] = (result.is_error, text_of(result))

    async with anyio.create_task_group() as tg:
        for text in ("one", "refuse two", "three", "refuse four"):
            tg.start_soon(call, text)
    refused = (True, "Denied by the user: the user did not approve")
    assert got == {
        "one": (False, "one"),
        "refuse two": refused,
        "three": (False, "three"),
        "refuse four": refused,
    }


ANSWERED = [(ASKS, "approve", USER)] * 3 + [(ASKS, "deny", None)] * 2


def test_fastmcp_client_over_stdio(tmp_path: Path) -> None:
    """Over stdio fastmcp speaks MCP 2026-07-28 (no handshake): the approval is an
    ``input_required`` round, which its client answers with the elicitation handler."""
    config, policy, state = setup(tmp_path)
    anyio.run(_fastmcp, StdioTransport(PY, serve_args(config, policy, state)))
    assert sorted(approvals(state), key=str) == sorted(ANSWERED, key=str)


async def _times_out_while_asked(transport: Any) -> None:
    """A call whose approval form its user leaves open past the client's request timeout:
    the client cancels the call (and the form with it); nothing runs, and the session
    keeps serving."""
    asked = anyio.Event()

    async def never(message: str, response_type: Any, params: Any, context: Any) -> Any:
        asked.set()
        await anyio.sleep(120)  # the cancel ends this first
        return {"approve": True}

    async with FastMCPClient(transport, elicitation_handler=never) as c:
        with pytest.raises(MCPError, match="timed out"):
            await c.call_tool(ASKS, {"text": "left open"}, timeout=3)
        assert asked.is_set()
        found = await c.call_tool("tool_search", {"query": QUERY})
        assert the_found_name(text_of(found)) == FOUND


async def _elicitation_fails(transport: Any) -> None:
    """An elicitation handler that raises: fastmcp answers the form request with an error
    (its message), and the call is denied saying so, in the client's words."""

    async def closed(message: str, response_type: Any, params: Any, context: Any) -> Any:
        raise RuntimeError("the user closed the window")

    async with FastMCPClient(transport, elicitation_handler=closed) as c:
        failed = await c.call_tool(ASKS, {"text": "failed"}, raise_on_error=False)
        assert failed.is_error
        assert text_of(failed) == f"Denied: {CLOSED}.", text_of(failed)


def test_fastmcp_client_over_http(tmp_path: Path) -> None:
    """Over HTTP fastmcp speaks the handshake: the approval is an elicitation request
    within the call. A call cancelled while its form is open is audited as a deny, as a
    call cancelled while it waits for tooldeck approve is."""
    config, policy, state = setup(tmp_path)
    with served_gateway(config, state, "--policy", str(policy)) as url:
        anyio.run(_fastmcp, StreamableHttpTransport(url))
        anyio.run(_times_out_while_asked, StreamableHttpTransport(url))
        anyio.run(_elicitation_fails, StreamableHttpTransport(url))
    gave_up = [(ASKS, "deny", None)] * 2  # the form left open; the form that failed
    assert sorted(approvals(state), key=str) == sorted(ANSWERED + gave_up, key=str)
    denied = [e for e in audit_lines(state) if e["level"] == "approval" and e["decision"] == "deny"]
    refused = ["the user did not approve"] * 2
    assert sorted(e["reason"] for e in denied) == sorted([CANCELLED, CLOSED, *refused])
    assert not any("left open" in p.read_text() for p in state.glob("*.calls.jsonl"))


# -- pydantic-ai's MCPToolset, and an agent run ----------------------------------------------
async def _toolset(toolset: MCPToolset[Any], approver: Approver, *, relisted: bool) -> None:
    async with toolset:
        assert {t.name for t in await toolset.list_tools()} == GATEWAY_TOOLS
        name = the_found_name(await toolset.direct_call_tool("tool_search", {"query": QUERY}))
        if relisted:  # its tool cache is dropped on list_changed (handshake sessions only)
            assert name in {t.name for t in await toolset.list_tools()}
        now = await toolset.direct_call_tool(name, {"timezone": "UTC"})
        assert now["timezone"] == "UTC" and "datetime" in now
        wrapped = {"name": name, "arguments": {"timezone": "UTC"}}
        assert (await toolset.direct_call_tool("call_tool", wrapped))["timezone"] == "UTC"
        with pytest.raises(ModelRetry, match=DENIAL):  # what its agent gives the model
            await toolset.direct_call_tool(DENIED, {})
        assert await toolset.direct_call_tool(ASKS, {"text": "approved"}) == "approved"
    assert [ASKS in m for m in approver.asked][:1] == [True]


@pytest.mark.filterwarnings("ignore:`elicitation_handler` will never be called")
def test_pydantic_ai_mcp_toolset_over_stdio(tmp_path: Path) -> None:
    """Over stdio its fastmcp client speaks MCP 2026-07-28: it warns that the elicitation
    handler will never be called (no connection for a server request), yet the gateway's
    approval reaches it as an ``input_required`` round. It opens no
    ``subscriptions/listen`` stream, so its cached listing misses what the search added:
    the found tool is called by its name all the same (the gateway knows every tool), and
    its agent's model calls it through ``call_tool``."""
    config, policy, state = setup(tmp_path)
    approver = Approver()
    transport = StdioTransport(PY, serve_args(config, policy, state))
    toolset: MCPToolset[Any] = MCPToolset(transport, elicitation_handler=approver)

    async def main() -> None:
        await _toolset(toolset, approver, relisted=False)
        await _agent_run(toolset)

    anyio.run(main)
    assert approvals(state) == [(ASKS, "approve", USER)] * 2
    assert len(approver.asked) == 2


class Scripted:
    """A pydantic-ai model (``FunctionModel``) that does what a model would: search, call
    the tool the search named (by its name when listed, else through ``call_tool``), then
    a call the policy denies and one that asks, each through ``call_tool``."""

    def __init__(self) -> None:
        self.listed_found = False

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = sum(isinstance(m, ModelResponse) for m in messages)
        if step == 0:
            return ModelResponse(parts=[ToolCallPart("tool_search", {"query": QUERY})])
        if step == 1:
            answer = next(p for p in messages[-1].parts if isinstance(p, ToolReturnPart))
            name = the_found_name(answer.model_response_str())
            self.listed_found = name in {t.name for t in info.function_tools}
            if self.listed_found:
                return ModelResponse(parts=[ToolCallPart(name, {"timezone": "UTC"})])
            wrapped = {"name": name, "arguments": {"timezone": "UTC"}}
            return ModelResponse(parts=[ToolCallPart("call_tool", wrapped)])
        if step == 2:
            wrapped = {"name": DENIED, "arguments": {}}
            return ModelResponse(parts=[ToolCallPart("call_tool", wrapped)])
        if step == 3:
            wrapped = {"name": ASKS, "arguments": {"text": "approved for the agent"}}
            return ModelResponse(parts=[ToolCallPart("call_tool", wrapped)])
        return ModelResponse(parts=[TextPart("done")])


async def _agent_run(toolset: MCPToolset[Any]) -> Scripted:
    """One pydantic-ai agent run with the gateway as its toolset; the model it ran."""
    model = Scripted()
    run = await Agent(FunctionModel(model), toolsets=[toolset]).run("What time is it in UTC?")
    assert run.output == "done"
    parts = [p for m in run.all_messages() for p in m.parts]
    returned = [p for p in parts if isinstance(p, ToolReturnPart)]
    time_by = FOUND if model.listed_found else "call_tool"
    assert [p.tool_name for p in returned] == ["tool_search", time_by, "call_tool", "call_tool"]
    assert is_current_time(returned[1].model_response_str())
    # the denial goes back to the model as a retry prompt, in the gateway's words
    assert returned[2].content == DENIAL and returned[2].outcome == "retried"
    assert returned[3].content == "approved for the agent"
    return model


def test_pydantic_ai_mcp_toolset_and_an_agent_run_over_http(tmp_path: Path) -> None:
    config, policy, state = setup(tmp_path)
    approver = Approver()

    async def main(url: str) -> None:
        toolset: MCPToolset[Any] = MCPToolset(url, elicitation_handler=approver)
        await _toolset(toolset, approver, relisted=True)
        agent_toolset: MCPToolset[Any] = MCPToolset(url, elicitation_handler=approver)
        model = await _agent_run(agent_toolset)
        assert model.listed_found  # its listing had the found tool (list_changed)

    with served_gateway(config, state, "--policy", str(policy)) as url:
        anyio.run(main, url)
    assert approvals(state) == [(ASKS, "approve", USER)] * 2
    assert len(approver.asked) == 2
