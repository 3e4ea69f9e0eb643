"""``tooldeck serve --definitions``: tooldeck's own tools next to the upstream ones.

A real ``tooldeck serve`` with tests/mcp_servers/basic.py upstream, reached with the
official MCP client SDK over stdio; the tools are the built-in definitions, a trimmed
copy of them, and a definitions file with a handler module of the test's own.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from typer.testing import CliRunner

from gateway_client import (
    ALLOW_ALL,
    gateway,
    names,
    result_of,
    stdio,
    text_of,
    write_config,
    write_policy,
)
from tooldeck.builtin import DEFINITIONS_PATH
from tooldeck.cli import app
from tooldeck.policy import AuditLog

APPROVE = types.ElicitResult(action="accept", content={"approve": True})


async def _approve(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return APPROVE


def _audit(state: Path) -> list[dict[str, Any]]:
    return [e for p in sorted(state.glob("*.audit.jsonl")) for e in AuditLog.read(p)]


def test_builtin_tools_are_served_confined_to_the_home(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    home = tmp_path / "home"
    (home / "secret").mkdir(parents=True)
    (home / "notes.txt").write_text("one\ntwo\n")
    (home / "secret" / "key.txt").write_text("hunter2")
    (tmp_path / "outside.txt").write_text("not yours")
    policy = write_policy(
        tmp_path,
        ALLOW_ALL + '[[profile.rules]]\ntools = "read_document"\naction = "deny"\n'
        'args = { path = { prefix = "secret/" } }\nreason = "secrets stay"\n',
    )
    state = tmp_path / "s"

    async def main() -> None:
        args = ("--definitions", "builtin", "--home", str(home), "--policy", str(policy))
        async with gateway(config, state, *args, "--core", "*", elicit=_approve) as c:
            listed = await names(c)
            # tooldeck's tools under their own names, before the upstream ones
            assert listed.index("read_document") < listed.index("alpha__add")
            assert "web_fetch" not in listed  # it needs a web provider the gateway has not
            read = await c.call_tool("read_document", {"path": "notes.txt"})
            assert not read.is_error and "two" in text_of(read)
            escape = await c.call_tool("read_document", {"path": "../outside.txt"})
            assert escape.is_error and "not yours" not in text_of(escape)
            secret = await c.call_tool("read_document", {"path": "secret/key.txt"})
            assert secret.is_error and "secrets stay" in text_of(secret)
            # WRITE: asked (approved here by elicitation), then confined like the reads
            wrote = await c.call_tool("write_file", {"path": "out.txt", "content": "hi"})
            assert not wrote.is_error, text_of(wrote)
            assert result_of(await c.call_tool("alpha__add", {"a": 2, "b": 3})) == 5

    anyio.run(main)
    assert (home / "out.txt").read_text() == "hi"
    calls = [json.loads(line) for p in state.glob("*.calls.jsonl") for line in p.open()]
    assert [c["tool"] for c in calls] == ["read_document", "write_file", "alpha__add"]
    assert calls[0]["server"] is None and "two" in calls[0]["text"]
    asked = [e["tool"] for e in _audit(state) if e["decision"] == "ask"]
    assert asked == ["write_file"]


def test_without_a_home_file_tools_refuse_and_say_why(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    (tmp_path / "notes.txt").write_text("no")

    async def main() -> None:
        async with gateway(config, tmp_path / "s", "--definitions", "builtin") as c:
            found = await c.call_tool("tool_search", {"query": "read lines of a text file"})
            assert "read_document" in text_of(found)
            refused = await c.call_tool(
                "call_tool", {"name": "read_document", "arguments": {"path": str(tmp_path)}}
            )
            assert refused.is_error and "--home" in text_of(refused)
            listed = await c.call_tool("list_files", {"path": "/"})
            assert listed.is_error and "--home" in text_of(listed)

    anyio.run(main)


def test_a_definitions_file_with_its_own_handlers_and_builtin_ones(tmp_path: Path) -> None:
    """``-c MODULE`` binds the file's own category; its ``files`` entries (a trimmed copy
    of the built-in ones) get tooldeck's handlers without being named."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "shouting.py").write_text(
        textwrap.dedent(
            """
            from tooldeck.registry import Handlers

            handlers = Handlers("shouting")


            @handlers("shout")
            def shout(text: str) -> str:
                return text.upper() + "!"
            """
        )
    )
    builtin = json.loads(DEFINITIONS_PATH.read_text())
    read_document = next(t for t in builtin["tools"] if t["name"] == "read_document")
    shout = {
        "name": "shout",
        "category": "shouting",
        "description": "Shout the text back.",
        "read_only": True,
        "input_schema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    }
    definitions = tmp_path / "tools.json"
    definitions.write_text(json.dumps({"version": 1, "tools": [read_document, shout]}))
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    home = tmp_path / "home"
    home.mkdir()
    (home / "a.txt").write_text("alpha\n")

    async def main() -> None:
        args = ("--definitions", str(definitions), "-c", "shouting", "--home", str(home))
        env = {"PYTHONPATH": str(tmp_path / "pkg")}
        async with gateway(config, tmp_path / "s", *args, "--core", "*", env=env) as c:
            listed = await names(c)
            assert {"shout", "read_document"} <= set(listed) and "write_file" not in listed
            assert text_of(await c.call_tool("shout", {"text": "hi"})) == "HI!"
            assert "alpha" in text_of(await c.call_tool("read_document", {"path": "a.txt"}))
            invalid = await c.call_tool("shout", {"text": 3})
            assert invalid.is_error

    anyio.run(main)


def _serve(*args: str) -> Any:
    return CliRunner().invoke(app, ["serve", *args])


def test_names_that_could_collide_are_refused_in_one_line(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    (tmp_path / "mine.py").write_text(
        "from tooldeck.registry import Handlers\nhandlers = Handlers('mine')\n"
        "@handlers('alpha__add')\ndef a(a: int) -> int:\n    return a\n"
        "@handlers('tool_search')\ndef b(a: int) -> int:\n    return a\n"
    )
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    tools = [
        {"name": n, "category": "mine", "description": "x", "input_schema": schema}
        for n in ("alpha__add", "tool_search")
    ]
    definitions = tmp_path / "tools.json"
    definitions.write_text(json.dumps({"version": 1, "tools": tools}))
    sys.path.insert(0, str(tmp_path))
    try:
        out = _serve("--mcp", str(config), "--definitions", str(definitions), "-c", "mine")
    finally:
        sys.path.remove(str(tmp_path))
    assert out.exit_code == 2, out.output
    line = out.stderr.strip()
    assert len(line.splitlines()) == 1 and "2 problem(s)" in line and "'__'" in line


def test_bad_definitions_options_are_one_line(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    missing = _serve("--mcp", str(config), "--definitions", str(tmp_path / "none.json"))
    assert missing.exit_code == 2 and len(missing.stderr.strip().splitlines()) == 1
    unbound = tmp_path / "tools.json"
    unbound.write_text(
        json.dumps(
            {
                "version": 1,
                "tools": [
                    {
                        "name": "lonely",
                        "category": "nowhere",
                        "description": "x",
                        "input_schema": {"type": "object"},
                    }
                ],
            }
        )
    )
    out = _serve("--mcp", str(config), "--definitions", str(unbound))
    assert out.exit_code == 2 and "no handler is bound" in out.stderr
    assert "tooldeck tools check" in out.stderr
    home = _serve("--mcp", str(config), "--definitions", "builtin", "--home", str(unbound))
    assert home.exit_code == 2 and "is not a folder" in home.stderr
    stray = _serve("--mcp", str(config), "-c", "tooldeck.builtin.files")
    assert stray.exit_code == 2 and "--definitions" in stray.stderr


def test_check_shows_the_own_tools_and_what_was_left_out(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    out = _serve("--mcp", str(config), "--definitions", "builtin", "--check", "--json")
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert report["catalog_tools"] > 10  # the upstream tools and tooldeck's
    assert any(note.startswith("web_fetch: not served") for note in report["left_out"])
