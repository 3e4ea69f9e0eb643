"""The registry: definitions file as the single source of truth, handlers bound by name."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tooldeck import ArgumentError, ToolContext, validate_arguments
from tooldeck.assembly import TurnContext, assemble
from tooldeck.registry import Handlers, RegistryError, ToolRegistry, check_document


def definition(name: str, category: str = "demo", **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": name,
        "description": f"The {name} tool.",
        "category": category,
        "input_schema": {
            "type": "object",
            "properties": {"text": {"type": "string"}, "times": {"type": "integer", "default": 1}},
            "required": ["text"],
        },
    }
    base.update(extra)
    return base


def write(tmp_path: Path, tools: list[dict[str, Any]]) -> Path:
    path = tmp_path / "definitions.json"
    path.write_text(json.dumps({"tools": tools}))
    return path


def demo_handlers() -> Handlers:
    handlers = Handlers("demo")

    @handlers("echo")
    def echo(text: str, times: int = 1) -> str:
        return text * times

    @handlers("shout")
    async def shout(text: str, ctx: ToolContext, times: int = 1) -> str:
        return f"{ctx.call_id}:{text.upper() * times}"

    return handlers


def test_load_binds_handlers_and_validates_through_validate_arguments(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        [
            definition("echo", read_only=True, activity="Echoing {text}"),
            definition("shout", tier="WRITE", execution_mode="parallel"),
        ],
    )
    registry = ToolRegistry.load(path, categories=[demo_handlers()])
    echo, shout = registry.tools["echo"], registry.tools["shout"]
    assert (echo.read_only, echo.execution_mode, echo.tier) == (True, "parallel", "STANDARD")
    assert (shout.read_only, shout.execution_mode, shout.tier) == (False, "parallel", "WRITE")
    args = validate_arguments(echo, '{"text": "ab", "times": 2}')
    assert echo.describe_activity(args.params) == "Echoing ab"
    assert asyncio.run(echo.invoke(args.params, ToolContext())).text() == "abab"
    args = validate_arguments(shout, '{"text": "hi"}')
    ctx = ToolContext(call_id="c9")
    assert asyncio.run(shout.invoke(args.params, ctx)).text() == "c9:HI"
    with pytest.raises(ArgumentError, match=r"\$\.times"):
        validate_arguments(echo, '{"text": "a", "times": "many"}')


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    handlers = Handlers("demo")

    @handlers("echo")
    def echo(text: str, times: int = 1) -> str:
        return text

    @handlers("orphan")
    def orphan(text: str) -> str:
        return text

    @handlers("badsig")
    def badsig(text: int, extra: str, times: int = 2) -> str:
        return "x"

    tools = [
        definition("echo"),
        definition("echo"),  # duplicate
        definition("bad name!"),  # name pattern
        definition("unbound"),  # no handler
        definition("rooted", input_schema={"type": "array"}),  # not an object root
        definition("invalid", input_schema={"type": "object", "properties": {"a": {"type": 5}}}),
        definition("badsig"),  # signature does not fit
        {"name": "incomplete", "category": "demo"},  # missing fields
        definition("typo", tier="SUPER"),
    ]
    with pytest.raises(RegistryError) as caught:
        ToolRegistry.load(write(tmp_path, tools), categories=[handlers])
    text = "\n".join(caught.value.problems)
    expected = [
        "tools[1] (echo): duplicate name",
        "tools[2] (bad name!).name",
        "unbound: defined but no handler is bound",
        "tools[4] (rooted).input_schema: the root must be 'type: object'",
        "tools[5] (invalid).input_schema['properties']['a']['type']",
        "badsig: 'text' is 'string' in the schema but annotated int",
        "badsig: handler parameter 'extra' is not in the input schema",
        "badsig: default of 'times' is 1 in the schema but 2 in the handler",
        "tools[7] (incomplete)",
        "orphan: handler in category 'demo' has no definition",
        "tools[8] (typo).tier",
    ]
    for fragment in expected:
        assert fragment in text, fragment
    assert str(caught.value).startswith(str(tmp_path / "definitions.json"))


def test_handler_in_the_wrong_category_and_bound_twice(tmp_path: Path) -> None:
    one, two = Handlers("one"), Handlers("two")
    one.add("echo", lambda text, times=1: text)
    two.add("echo", lambda text, times=1: text)
    with pytest.raises(RegistryError) as caught:
        ToolRegistry.load(write(tmp_path, [definition("echo", category="two")]), [one, two])
    text = "\n".join(caught.value.problems)
    assert "bound by category 'one' and by 'two'" in text
    assert "defined in category 'two' but bound in 'one'" in text


def test_missing_required_parameter_and_missing_property(tmp_path: Path) -> None:
    handlers = Handlers("demo")

    @handlers("echo")
    def echo(times: int = 1, loud: bool = False) -> str:
        return ""

    with pytest.raises(RegistryError) as caught:
        ToolRegistry.load(write(tmp_path, [definition("echo")]), [handlers])
    text = "\n".join(caught.value.problems)
    assert "schema property 'text' has no handler parameter" in text
    assert "handler parameter 'loud' is not in the input schema" in text


def test_broken_json_and_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "definitions.json"
    path.write_text('{"tools": [}')
    with pytest.raises(RegistryError, match="line 1 column 12"):
        ToolRegistry.load(path, [])
    with pytest.raises(RegistryError, match="cannot read"):
        ToolRegistry.load(tmp_path / "absent.json", [])


def test_category_modules_by_import_path_and_import_failures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg = tmp_path / "mytools"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "good.py").write_text(
        textwrap.dedent("""
        from tooldeck.registry import Handlers
        handlers = Handlers("demo")

        @handlers("echo")
        def echo(text: str, times: int = 1) -> str:
            return text
    """)
    )
    (pkg / "broken.py").write_text("raise RuntimeError('database not configured')\n")
    (pkg / "plain.py").write_text("x = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    path = write(tmp_path, [definition("echo")])
    registry = ToolRegistry.load(path, ["mytools.good"])
    assert list(registry.tools) == ["echo"]
    with pytest.raises(RegistryError) as caught:
        ToolRegistry.load(path, ["mytools.good", "mytools.broken", "mytools.plain"])
    text = "\n".join(caught.value.problems)
    assert "'mytools.broken' failed to import: RuntimeError: database not configured" in text
    assert "'mytools.plain' has no module-level `handlers" in text
    for name in ("mytools", "mytools.good", "mytools.broken", "mytools.plain"):
        sys.modules.pop(name, None)


def test_check_document_without_handlers() -> None:
    definitions, problems = check_document({"tools": [definition("a"), definition("a")]})
    assert [d.name for d in definitions] == ["a"]
    assert problems == ["tools[1] (a): duplicate name, first at tools[0]"]
    _, problems = check_document({"tool": []})
    assert any("tools" in p for p in problems)


def test_published_schema_is_valid_json_schema() -> None:
    import jsonschema_rs

    from tooldeck.registry import DEFINITIONS_SCHEMA_PATH

    jsonschema_rs.meta.validate(json.loads(DEFINITIONS_SCHEMA_PATH.read_text()))


def test_category_sources_follow_the_turns_facts(tmp_path: Path) -> None:
    handlers = Handlers("demo")
    names = ["plain", "web", "jobs", "textonly", "memory"]
    for name in names:
        handlers.add(name, lambda text, times=1: text)
    requires = {
        "web": ["web_provider"],
        "jobs": ["background_jobs"],
        "textonly": ["text_turn"],
        "memory": ["memory"],
    }
    tools = [definition(n, requires=requires.get(n, [])) for n in names]
    registry = ToolRegistry.load(write(tmp_path, tools), [handlers])
    bare = TurnContext(session_id="s", home=tmp_path, memory_enabled=False)
    assert registry.toolset(bare).names == ("plain", "textonly")
    full = TurnContext(
        session_id="s",
        home=tmp_path,
        web_provider="brave",
        can_create_jobs=True,
        memory_enabled=True,
    )
    assert registry.toolset(full).names == tuple(names)
    task = TurnContext(
        session_id="s", home=tmp_path, turn_kind="workflow_task", web_provider="brave"
    )
    assert registry.toolset(task).names == ("plain", "web", "memory")
    toolset = assemble(full, registry.by_category(["demo"]))
    assert toolset.origin("web") == "registry:demo"
    with pytest.raises(KeyError):
        registry.category("nope")
