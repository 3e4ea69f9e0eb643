"""``tooldeck serve --tools MODULE:ATTR``: your own ``@tool`` functions at the gateway, with
no definitions file, with or without upstream servers.

A real ``tooldeck serve`` subprocess started in the folder that holds the user's module
(as a user runs it), reached with the official MCP client SDK over stdio: it lists, it
searches, it calls the tool by the name the search answered, a call the policy denies is
denied, a WRITE tool asks (by elicitation) and runs once approved. The mistakes (no such
module, a module that raises, a wrong attribute, something that is not a tool) are one
line and exit status 2, through the real CLI.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

from gateway_client import (
    ALLOW_ALL,
    APPROVE,
    Answers,
    audit_lines,
    gateway,
    names,
    result_of,
    stdio,
    text_of,
    write_config,
    write_policy,
)
from tooldeck.cli import app

NOTES = '''
from tooldeck import tool

NOTES: dict[str, list[str]] = {"groceries": ["milk"]}


@tool(read_only=True)
def count_words(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


@tool
def append_line(note: str, line: str) -> list[str]:
    """Append a line to a note and return the note."""
    NOTES.setdefault(note, []).append(line)
    return NOTES[note]


@tool(destructive=True)
def delete_note(note: str) -> str:
    """Delete a note for good."""
    NOTES.pop(note, None)
    return f"deleted {note}"


tools = [count_words, append_line, delete_note]
'''

DENY_DELETE = (
    '[profile]\n[[profile.rules]]\ntools = "delete_note"\naction = "deny"\n'
    'reason = "notes are never deleted from a client"\n'
)


def _found(answer: str) -> list[str]:
    """The tool names a ``tool_search`` answer gives (its ``- name: description`` lines)."""
    return re.findall(r"^- ([A-Za-z0-9_-]+):", answer, re.M)


def test_own_tools_without_any_upstream_server(tmp_path: Path) -> None:
    (tmp_path / "notes_tools.py").write_text(NOTES)
    policy = write_policy(tmp_path, DENY_DELETE)
    state = tmp_path / "state"
    elicit = Answers(APPROVE)

    async def main() -> None:
        args = ("--tools", "notes_tools:tools", "--policy", str(policy))
        async with gateway(None, state, *args, elicit=elicit, cwd=tmp_path) as client:
            assert await names(client) == ["tool_search", "call_tool", "recall_tool_result"]
            answer = text_of(
                await client.call_tool("tool_search", {"query": "count the words of a text"})
            )
            found = _found(answer)
            assert found and found[0] == "count_words", answer
            counted = await client.call_tool(found[0], {"text": "one two three"})
            assert not counted.is_error and text_of(counted) == "3"
            assert found[0] in await names(client)  # listed now, under the same name
            denied = await client.call_tool(
                "call_tool", {"name": "delete_note", "arguments": {"note": "groceries"}}
            )
            assert denied.is_error
            assert "notes are never deleted from a client" in text_of(denied)
            appended = await client.call_tool(
                "call_tool", {"name": "append_line", "arguments": {"note": "x", "line": "hi"}}
            )
            assert not appended.is_error and json.loads(text_of(appended)) == ["hi"]

    anyio.run(main)
    assert len(elicit.asked) == 1 and "append_line" in elicit.asked[0].message
    decisions = [(e["tool"], e["decision"]) for e in audit_lines(state)]
    assert ("count_words", "allow") in decisions
    assert ("delete_note", "deny") in decisions
    assert ("append_line", "ask") in decisions


KINDS = '''
from tooldeck import Toolset, ToolRegistry, tool
from tooldeck.registry import Handlers


@tool(read_only=True)
def shout(text: str) -> str:
    """Shout the text back."""
    return text.upper() + "!"


@tool(read_only=True)
def whisper(text: str) -> str:
    """Whisper the text back."""
    return text.lower() + "..."


handlers = Handlers("rot")


@handlers("rot13")
def rot13(text: str) -> str:
    import codecs

    return codecs.encode(text, "rot13")


SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
registry = ToolRegistry.from_document(
    {"tools": [{"name": "rot13", "category": "rot", "description": "ROT13 a text.",
                "read_only": True, "input_schema": SCHEMA}]},
    [handlers],
)
toolset = Toolset([whisper])
'''


def test_a_tool_a_toolset_and_a_registry_next_to_an_upstream_server(tmp_path: Path) -> None:
    (tmp_path / "kinds.py").write_text(KINDS)
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    policy = write_policy(tmp_path, ALLOW_ALL)

    async def main() -> None:
        args = ["--tools", "kinds:shout", "--tools", "kinds:toolset", "--tools", "kinds:registry"]
        args += ["--policy", str(policy)]
        async with gateway(config, tmp_path / "s", *args, "--core", "*", cwd=tmp_path) as c:
            listed = await names(c)
            assert {"shout", "whisper", "rot13", "alpha__add"} <= set(listed)
            assert listed.index("shout") < listed.index("alpha__add")  # own tools first
            assert text_of(await c.call_tool("shout", {"text": "hi"})) == "HI!"
            assert text_of(await c.call_tool("whisper", {"text": "HI"})) == "hi..."
            assert text_of(await c.call_tool("rot13", {"text": "abc"})) == "nop"
            assert (await c.call_tool("shout", {"text": 3})).is_error  # validated
            assert result_of(await c.call_tool("alpha__add", {"a": 2, "b": 3})) == 5

    anyio.run(main)


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder to run ``tooldeck serve`` in (in this process); sys.path and sys.modules
    are put back afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "modules", dict(sys.modules))
    return tmp_path


def _serve(*args: str) -> Any:
    return CliRunner().invoke(app, ["serve", *args])


def _one_line(result: Any) -> str:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def test_what_cannot_be_served_is_one_line(here: Path) -> None:
    (here / "raises.py").write_text("raise RuntimeError('no database configured')\n")
    (here / "odd.py").write_text(
        textwrap.dedent(
            """
            from tooldeck import tool

            @tool
            def fine(a: int) -> int:
                \"\"\"Fine.\"\"\"
                return a

            @tool
            def bad__name(a: int) -> int:
                \"\"\"Bad.\"\"\"
                return a

            @tool
            def tool_search(a: int) -> int:
                \"\"\"Taken.\"\"\"
                return a

            text = "not a tool"
            mixed = [fine, "nope"]
            empty = []
            clash = [bad__name, tool_search]
            """
        )
    )
    cases = {
        ("nowhere_module:tools",): "no module named 'nowhere_module'",
        ("raises:tools",): "importing raises failed: RuntimeError: no database configured",
        ("odd:nothing",): "odd has no attribute 'nothing'",
        ("odd:fine.deeper",): "odd.fine has no attribute 'deeper'",
        ("odd",): "is not MODULE:ATTR",
        ("odd:text",): "odd:text is str",
        ("odd:mixed",): "odd:mixed[1] is str, not a tool",
        ("odd:empty",): "odd:empty is an empty list",
        ("odd:clash",): "2 problem(s) in the tools to serve",
        ("odd:fine", "odd:fine"): "tool 'fine' is created twice",
    }
    for specs, expected in cases.items():
        args = [a for spec in specs for a in ("--tools", spec)]
        line = _one_line(_serve(*args, "--check"))
        assert expected in line, (specs, line)
    assert "'__'" in _one_line(_serve("--tools", "odd:clash"))
    nothing = _one_line(_serve("--check"))
    assert "--mcp CONFIG" in nothing and "--tools MODULE:ATTR" in nothing


def test_import_failures_show_their_traceback_with_v(here: Path) -> None:
    (here / "raises2.py").write_text("raise RuntimeError('boom at import')\n")
    result = CliRunner().invoke(app, ["-v", "serve", "--tools", "raises2:tools", "--check"])
    assert result.exit_code == 2
    assert "Traceback" in result.stderr and "boom at import" in result.stderr


def test_check_lists_the_own_tools_without_an_upstream(here: Path) -> None:
    (here / "notes_tools2.py").write_text(NOTES)
    result = _serve("--tools", "notes_tools2:tools", "--check", "--json")
    assert result.exit_code == 0, result.output
    assert '"catalog_tools": 3' in result.stdout
