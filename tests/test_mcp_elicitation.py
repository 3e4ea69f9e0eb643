"""MCP elicitation as a client: a server's question reaches the session's approver.

Real server: npm's ``@modelcontextprotocol/server-everything``, whose
``trigger-elicitation-request`` tool (registered only for a client that declares
elicitation) asks a form of many fields and reports what it got back.
"""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

from gateway_client import audit_lines, node_server, npm_server
from tooldeck import ApprovalAnswer, ApprovalRequest, Protection, Session, TurnContext
from tooldeck.mcp import ElicitationRequest, McpSource
from tooldeck.policy import Policy, SessionPolicy
from tooldeck.policy.prompt import PromptApprover
from tooldeck.providers.scripted import ScriptedModel, call, reply

EVERYTHING = ("@modelcontextprotocol/server-everything", "2026.8.31", "mcp-server-everything")
TRIGGER = "mcp__everything__trigger-elicitation-request"
QUESTION = "mcp__everything__elicitation_create"
FORM = {"name": "Ada Lovelace", "check": True, "integer": 7, "email": "ada@example.org"}


def config(**options: Any) -> dict[str, Any]:
    entry = npm_server(*EVERYTHING)
    return {"mcpServers": {"everything": node_server(entry, "stdio")}}


def allowing(tmp_path: Path, *rules: dict[str, Any], headless: bool = False) -> SessionPolicy:
    policy = Policy.from_dict(
        {"profile": {"rules": [{"tools": TRIGGER, "action": "allow"}, *rules]}}
    )
    return SessionPolicy(policy, session_id="s1", directory=tmp_path, headless=headless)


async def turn(source: McpSource, protect: Protection) -> str:
    model = ScriptedModel([reply(call(TRIGGER, {})), reply("done")])
    session = Session(model, [source], session_id="s1", turn=TurnContext("s1"), protect=protect)
    result = await session.run("ask me")
    (output,) = result.tool_outputs
    return output.result.text()


def test_a_question_is_answered_by_the_sessions_approver_and_audited(tmp_path: Path) -> None:
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> ApprovalAnswer:
        asked.append(request)
        return ApprovalAnswer(True, arguments=FORM)

    async def main() -> None:
        async with McpSource(config()) as source:
            policy = allowing(tmp_path)
            text = await turn(source, Protection.policy(policy, approver=approver))
            assert "User provided the requested information" in text, text
            assert "- Name: Ada Lovelace" in text and "- Favorite Integer: 7" in text
            (request,) = asked
            assert request.tool.name == QUESTION
            question = request.params
            assert isinstance(question, ElicitationRequest)
            assert question.server == "everything" and question.mode == "form"
            assert question.message == "Please provide inputs for the following fields:"
            assert question.requested_schema["properties"]["integer"]["maximum"] == 100
            shown = request.display
            assert shown["question"] == question.message
            assert shown["answer with"]["email"]["format"] == "email"
            lines = [line for line in audit_lines(tmp_path) if line["tool"] == QUESTION]
            assert [(line["decision"], line["approved_by"]) for line in lines] == [
                ("allow", "policy"),  # the policy judged the question first (STANDARD)
                ("edit", "human"),  # then the human answered it
            ]

    asyncio.run(main())


def test_an_answer_outside_the_schema_is_declined_never_sent(tmp_path: Path) -> None:
    async def main() -> None:
        async with McpSource(config()) as source:
            for wrong in ({**FORM, "integer": 500}, {**FORM, "untitledSingleSelectEnum": "Bob"}):
                answer = ApprovalAnswer(True, arguments=wrong)
                protect = Protection.policy(allowing(tmp_path), approver=lambda r, a=answer: a)
                text = await turn(source, protect)
                assert "User declined to provide the requested information" in text, text
                assert "does not match the requested schema" in text  # the reason, in _meta
                assert "500" not in text.split("Raw result")[1] and "Bob" not in text

    asyncio.run(main())


def test_a_question_is_declined_by_the_user_by_policy_and_when_headless(tmp_path: Path) -> None:
    async def main() -> None:
        async with McpSource(config()) as source:
            no = Protection.policy(
                allowing(tmp_path), approver=lambda r: ApprovalAnswer(False, "not telling")
            )
            text = await turn(source, no)
            assert "User declined" in text and "not telling" in text

            rule = {"tools": "mcp__*__elicitation_create", "action": "deny", "reason": "no forms"}
            asked: list[Any] = []
            denied = Protection.policy(allowing(tmp_path, rule), approver=asked.append)
            text = await turn(source, denied)
            assert "User declined" in text and "denied by policy: no forms" in text
            assert asked == []  # nobody was asked

            headless = Protection.policy(allowing(tmp_path, headless=True))
            text = await turn(source, headless)
            assert "User declined" in text and "headless" in text
            lines = [line for line in audit_lines(tmp_path) if line["tool"] == QUESTION]
            assert any("headless" in line["reason"] for line in lines)

            outside = await source.call("everything", "trigger-elicitation-request", {})
            assert "User declined" in outside.text() and "no approver" in outside.text()

    asyncio.run(main())


def test_the_console_shows_the_schema_and_takes_the_answer(tmp_path: Path) -> None:
    typed = io.StringIO("e\n" + json.dumps(FORM) + "\n")
    console = PromptApprover(stream=typed, offer_always=False)

    async def main() -> None:
        async with McpSource(config()) as source:
            text = await turn(source, Protection.policy(allowing(tmp_path), approver=console))
            assert "- Name: Ada Lovelace" in text and "- Email: ada@example.org" in text

    asyncio.run(main())


def test_a_source_approver_answers_outside_a_session() -> None:
    async def approve(requests: Any) -> list[ApprovalAnswer]:
        return [ApprovalAnswer(True, arguments={"name": "Grace"}) for _ in requests]

    async def main() -> None:
        async with McpSource(config(), approver=approve) as source:
            result = await source.call("everything", "trigger-elicitation-request", {})
            assert "- Name: Grace" in result.text()
        async with McpSource(config(), elicitation=False) as quiet:
            names = [t.mcp.tool for t in quiet.tools()]
            assert "trigger-elicitation-request" not in names  # the capability is not declared

    asyncio.run(main())


class Interrupted(BaseException):
    """Not an Exception: what an approver might raise that is not a plain error."""


def test_an_approver_that_fails_is_a_decline_and_the_turn_goes_on(tmp_path: Path) -> None:
    def broken(request: ApprovalRequest) -> ApprovalAnswer:
        raise RuntimeError("the form crashed: secret detail")

    async def interrupted(requests: Any) -> list[ApprovalAnswer]:
        raise Interrupted()

    async def main() -> None:
        async with McpSource(config()) as source:
            text = await turn(source, Protection.policy(allowing(tmp_path), approver=broken))
            assert "User declined" in text and "secret detail" not in text, text
            text = await turn(source, Protection.policy(allowing(tmp_path), approver=interrupted))
            assert "User declined" in text and "the approver failed: Interrupted" in text, text

    asyncio.run(main())
