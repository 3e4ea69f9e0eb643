"""An upstream server's question (``elicitation/create``) through ``tooldeck serve``.

A real gateway over stdio, reached by the official MCP SDK client; upstream, npm's
``@modelcontextprotocol/server-everything``, whose ``trigger-elicitation-request`` tool
asks a form of many fields and reports what it got back. The question reaches the
gateway's client when it declared elicitation (its answer checked against the schema,
the policy judging first, both audited); a client without it gets a decline at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types

from gateway_client import (
    ALLOW_ALL,
    audit_lines,
    gateway,
    http_client,
    node_server,
    npm_server,
    served_gateway,
    text_of,
    write_config,
    write_policy,
)

EVERYTHING = ("@modelcontextprotocol/server-everything", "2026.8.31", "mcp-server-everything")
TRIGGER = "everything__trigger-elicitation-request"
QUESTION = "everything__elicitation_create"
FORM = {"name": "Ada Lovelace", "check": True, "integer": 7, "email": "ada@example.org"}


def upstream(tmp_path: Path) -> Path:
    entry = npm_server(*EVERYTHING)
    server = node_server(entry, "stdio")
    return write_config(tmp_path, {"everything": server})


def serving(tmp_path: Path, policy: str = ALLOW_ALL) -> tuple[Path, str, str, str, str]:
    return upstream(tmp_path), "--core", "*", "--policy", str(write_policy(tmp_path, policy))


async def trigger(client: Any) -> str:
    with anyio.fail_after(60):
        return text_of(await client.call_tool(TRIGGER, {}))


def question_lines(state: Path) -> list[tuple[str, str]]:
    lines = [line for line in audit_lines(state) if line["tool"] == QUESTION]
    return [(line["decision"], line["reason"]) for line in lines]


def test_a_question_reaches_the_client_and_its_answer_the_server(tmp_path: Path) -> None:
    asked: list[types.ElicitRequestParams] = []

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content=FORM)

    async def main() -> None:
        config, *args = serving(tmp_path)
        async with gateway(config, tmp_path / "state", *args, elicit=answer) as client:
            text = await trigger(client)
        assert "User provided the requested information" in text, text
        assert "- Name: Ada Lovelace" in text and "- Favorite Integer: 7" in text
        (params,) = asked  # the server's own question, not an approval form
        assert isinstance(params, types.ElicitRequestFormParams)
        assert params.message == "Please provide inputs for the following fields:"
        assert params.requested_schema["properties"]["integer"]["maximum"] == 100
        decisions = [d for d, _ in question_lines(tmp_path / "state")]
        assert decisions[0] == "allow" and len(decisions) == 2, decisions

    anyio.run(main)


def test_an_answer_outside_the_schema_never_reaches_the_server(tmp_path: Path) -> None:
    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={**FORM, "integer": 1000})

    async def main() -> None:
        config, *args = serving(tmp_path)
        async with gateway(config, tmp_path / "state", *args, elicit=answer) as client:
            text = await trigger(client)
        assert "1000" not in text and "declined" in text.lower(), text

    anyio.run(main)


def test_a_question_declined_by_the_client_is_declined_upstream(tmp_path: Path) -> None:
    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async def main() -> None:
        config, *args = serving(tmp_path)
        async with gateway(config, tmp_path / "state", *args, elicit=answer) as client:
            text = await trigger(client)
        assert "declined" in text.lower() and "Ada" not in text, text

    anyio.run(main)


def test_a_client_without_elicitation_gets_a_decline_at_once(tmp_path: Path) -> None:
    async def main() -> None:
        config, *args = serving(tmp_path)
        async with gateway(config, tmp_path / "state", *args) as client:
            text = await trigger(client)
        assert "declined" in text.lower(), text
        reasons = [r for d, r in question_lines(tmp_path / "state") if d == "deny"]
        assert any("elicitation" in r for r in reasons), question_lines(tmp_path / "state")

    anyio.run(main)


def test_a_policy_rule_denies_the_servers_questions(tmp_path: Path) -> None:
    asked: list[object] = []

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content=FORM)

    deny = ALLOW_ALL + f'[[profile.rules]]\ntools = "{QUESTION}"\naction = "deny"\n'

    async def main() -> None:
        config, *args = serving(tmp_path, deny)
        async with gateway(config, tmp_path / "state", *args, elicit=answer) as client:
            text = await trigger(client)
        assert "declined" in text.lower() and not asked, text

    anyio.run(main)


def test_over_http_a_question_reaches_only_its_own_client_session(tmp_path: Path) -> None:
    """Two clients over HTTP: a question reaches the client whose call asked, never the
    other; while the other's call runs on the same server, which call asked cannot be
    told apart, so it is declined (never sent to the wrong client)."""
    asked: dict[str, list[object]] = {"a": [], "b": []}

    def answering(who: str) -> Any:
        async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            asked[who].append(params)
            return types.ElicitResult(action="accept", content=FORM)

        return answer

    async def main() -> None:
        config, *args = serving(tmp_path)
        with served_gateway(config, tmp_path / "state", *args) as url:
            async with http_client(url, answering("a")) as a, http_client(url, answering("b")) as b:
                text = await trigger(b)
                assert "- Name: Ada Lovelace" in text, text
                assert len(asked["b"]) == 1 and not asked["a"]
                long = {"duration": 4, "steps": 2}
                async with anyio.create_task_group() as tg:
                    tg.start_soon(a.call_tool, "everything__trigger-long-running-operation", long)
                    await anyio.sleep(1.5)  # a's call is running on the same server
                    text = await trigger(b)
                assert "declined" in text.lower() and "Ada" not in text, text
                assert len(asked["b"]) == 1 and not asked["a"]
        reasons = [r for d, r in question_lines(tmp_path / "state") if d == "deny"]
        assert any("another session" in r for r in reasons), reasons

    anyio.run(main)


def test_a_client_that_fails_to_answer_is_a_decline_and_the_call_goes_on(tmp_path: Path) -> None:
    async def broken(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        raise RuntimeError("the form crashed")

    async def main() -> None:
        config, *args = serving(tmp_path)
        async with gateway(config, tmp_path / "state", *args, elicit=broken) as client:
            text = await trigger(client)
            assert "declined" in text.lower(), text
            again = await client.call_tool("everything__echo", {"message": "still here"})
            assert "still here" in text_of(again)
        reasons = [r for d, r in question_lines(tmp_path / "state") if d == "deny"]
        assert any("did not answer" in r for r in reasons), question_lines(tmp_path / "state")

    anyio.run(main)
