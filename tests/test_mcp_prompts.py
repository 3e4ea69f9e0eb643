"""MCP prompts: listed and fetched with arguments, from Python and from the CLI.

Real servers only: npm's ``@modelcontextprotocol/server-everything`` (its prompts
``simple-prompt``, ``args-prompt`` with a required ``city`` and an optional ``state``,
``resource-prompt`` that embeds a resource) and tests/mcp_servers/basic.py, which has
no prompts.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gateway_client import node_server, npm_server
from tooldeck.cli import app
from tooldeck.mcp import McpSource, PromptArgument, PromptError
from tooldeck.result import TextPart

SERVERS = Path(__file__).parent / "mcp_servers"
EVERYTHING = ("@modelcontextprotocol/server-everything", "2026.8.31", "mcp-server-everything")


def config() -> dict[str, Any]:
    entry = npm_server(*EVERYTHING)
    return {
        "mcpServers": {
            "everything": node_server(entry, "stdio"),
            "basic": {"command": sys.executable, "args": [str(SERVERS / "basic.py"), "stdio"]},
        }
    }


def test_prompts_are_listed_with_their_arguments() -> None:
    async def main() -> None:
        async with McpSource(config()) as source:
            prompts = {p.name: p for p in await source.list_prompts()}
            assert {"simple-prompt", "args-prompt", "resource-prompt"} <= set(prompts)
            assert {p.server for p in prompts.values()} == {"everything"}  # basic has none
            args = prompts["args-prompt"]
            assert args.description == "A prompt with two arguments, one required and one optional"
            assert args.arguments == (
                PromptArgument("city", "Name of the city", required=True),
                PromptArgument("state", None, required=False),
            )
            assert await source.list_prompts("basic") == []

    asyncio.run(main())


def test_a_prompt_fetched_with_arguments() -> None:
    async def main() -> None:
        async with McpSource(config()) as source:
            result = await source.get_prompt("everything", "args-prompt", {"city": "Paris"})
            assert [(m.role, m.content) for m in result.messages] == [
                ("user", TextPart("What's weather in Paris?"))
            ]
            both = await source.get_prompt(
                "everything", "args-prompt", {"city": "Austin", "state": "Texas"}
            )
            assert both.text() == "user: What's weather in Austin, Texas?"
            embedded = await source.get_prompt(
                "everything", "resource-prompt", {"resourceType": "Text", "resourceId": "2"}
            )
            parts = [m.content for m in embedded.messages]
            assert all(isinstance(p, TextPart) for p in parts)
            assert any(
                p.text.startswith("[embedded resource — uri: demo://resource/dynamic/text/2")
                and "Resource 2: This is a plaintext resource" in p.text
                for p in parts
                if isinstance(p, TextPart)
            )

    asyncio.run(main())


@pytest.mark.parametrize(
    ("name", "arguments", "error"),
    [
        ("args-prompt", {}, "the prompt 'args-prompt' of 'everything' needs the argument 'city'"),
        (
            "args-prompt",
            {"city": "Paris", "country": "France"},
            "the prompt 'args-prompt' of 'everything' takes no argument 'country'; "
            "it takes: city, state",
        ),
        (
            "no-such-prompt",
            {},
            "no prompt 'no-such-prompt' on 'everything'; its prompts: simple-prompt, "
            "args-prompt, completable-prompt, resource-prompt",
        ),
    ],
)
def test_a_wrong_prompt_or_argument_is_one_line(
    name: str, arguments: dict[str, str], error: str
) -> None:
    async def main() -> None:
        async with McpSource(config()) as source:
            with pytest.raises(PromptError) as caught:
                await source.get_prompt("everything", name, arguments)
            assert str(caught.value) == error

    asyncio.run(main())


def invoke(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    path = tmp_path / "mcp.json"
    if not path.exists():
        path.write_text(json.dumps(config()))
    env = {"HOME": str(tmp_path / "home"), "COLUMNS": "200"}
    result = CliRunner().invoke(app, ["mcp", *args[:1], str(path), *args[1:]], env=env)
    return result.exit_code, result.stdout, result.stderr


def test_the_cli_lists_and_fetches_prompts(tmp_path: Path) -> None:
    code, out, _ = invoke(tmp_path, "prompts")
    assert code == 0, out
    assert "args-prompt" in out and "city, state?" in out and "resource-prompt" in out

    code, out, _ = invoke(tmp_path, "prompts", "--json", "--server", "everything")
    listed = {p["name"]: p for p in json.loads(out)["prompts"]}
    assert listed["args-prompt"]["arguments"][0] == {
        "name": "city",
        "description": "Name of the city",
        "required": True,
    }

    code, out, _ = invoke(tmp_path, "prompt", "everything", "args-prompt", "city=Paris")
    assert (code, out) == (0, "user: What's weather in Paris?\n")
    code, out, _ = invoke(tmp_path, "prompt", "everything", "args-prompt", "city=Lyon", "--json")
    assert json.loads(out)["messages"] == [
        {"role": "user", "type": "text", "text": "What's weather in Lyon?"}
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mcp.json"]  # nothing created


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            ("everything", "args-prompt"),
            "error: the prompt 'args-prompt' of 'everything' needs the argument 'city'\n",
        ),
        (
            ("everything", "args-prompt", "Paris"),
            "error: 'Paris' is not key=value; give each prompt argument as key=value\n",
        ),
        (
            ("nowhere", "args-prompt"),
            "error: no MCP server 'nowhere' in {tmp}/mcp.json; configured: everything, basic\n",
        ),
    ],
)
def test_a_cli_user_error_is_one_line_and_exit_2(
    tmp_path: Path, args: tuple[str, ...], error: str
) -> None:
    code, out, err = invoke(tmp_path, "prompt", *args)
    assert (code, out, err) == (2, "", error.replace("{tmp}", str(tmp_path)))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mcp.json"]


def test_a_prompt_the_server_refuses_is_exit_1(tmp_path: Path) -> None:
    code, out, err = invoke(
        tmp_path, "prompt", "everything", "resource-prompt", "resourceType=Video", "resourceId=1"
    )
    assert (code, out) == (1, "")
    assert err.startswith(
        "error: the MCP server 'everything' refused the prompt 'resource-prompt': "
    )
    assert "Invalid resourceType: Video" in err and err.count("\n") == 1
