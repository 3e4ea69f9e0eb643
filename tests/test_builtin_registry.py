"""The built-in library as a registry: the file, the bindings, the contract fields, assembly."""

from __future__ import annotations

import importlib
import inspect
import json
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest

from tooldeck.assembly import TurnContext
from tooldeck.builtin import CATEGORY_MODULES, DEFINITIONS_PATH, load_builtin_registry
from tooldeck.registry import DEFINITIONS_SCHEMA_PATH, Handlers, ToolRegistry, signature_problems
from tooldeck.schema import PROVIDERS, project

# name: (category, tier, read_only, destructive, execution_mode, requires, async handler)
EXPECTED: dict[str, tuple[str, str, bool, bool, str, tuple[str, ...], bool]] = {
    "read_document": ("files", "STANDARD", True, False, "parallel", (), False),
    "grep_files": ("files", "STANDARD", True, False, "parallel", (), False),
    "list_files": ("files", "STANDARD", True, False, "parallel", (), False),
    "write_file": ("files", "WRITE", False, True, "sequential", (), False),
    "edit_file": ("files", "WRITE", False, True, "sequential", (), False),
    "run_bash": ("shell", "DANGEROUS", False, True, "sequential", (), True),
    "web_search": (
        "web",
        "STANDARD",
        True,
        False,
        "parallel",
        ("web_provider", "web_search"),
        True,
    ),
    "web_fetch": ("web", "STANDARD", True, False, "parallel", ("web_provider",), True),
    "todo": ("session", "WRITE", False, False, "sequential", (), False),
    "status": ("session", "STANDARD", True, False, "parallel", (), True),
    "notes": ("memory", "WRITE", False, True, "sequential", ("memory",), False),
}


def document() -> Any:
    return json.loads(DEFINITIONS_PATH.read_text(encoding="utf-8"))


def test_the_definitions_file_is_valid_against_its_published_schema() -> None:
    validator = jsonschema_rs.validator_for(json.loads(DEFINITIONS_SCHEMA_PATH.read_text()))
    assert [e.message for e in validator.iter_errors(document())] == []


def test_the_registry_loads_with_zero_problems() -> None:
    registry = load_builtin_registry()  # raises RegistryError listing problems otherwise
    assert isinstance(registry, ToolRegistry)
    assert registry.source == str(DEFINITIONS_PATH)
    assert list(registry.tools) == list(EXPECTED)
    assert registry.categories == ("files", "shell", "web", "session", "memory")
    # The same through the generic entry point, from the parsed document.
    again = ToolRegistry.from_document(document(), CATEGORY_MODULES)
    assert list(again.tools) == list(EXPECTED)


def test_category_modules_are_listed_in_file_order_with_their_tables() -> None:
    registry = load_builtin_registry()
    assert [m.rsplit(".", 1)[1] for m in CATEGORY_MODULES] == list(registry.categories)
    for module_name, category in zip(CATEGORY_MODULES, registry.categories, strict=True):
        module = importlib.import_module(module_name)
        table = module.handlers
        assert isinstance(table, Handlers) and table.category == category
        assert table.duplicates == []
        defined = {d.name for d in registry.definitions if d.category == category}
        assert set(table.table) == defined


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_tool_has_the_intended_contract(name: str) -> None:
    category, tier, read_only, destructive, mode, requires, is_async = EXPECTED[name]
    registry = load_builtin_registry()
    tool = registry.tools[name]
    definition = registry.definition(name)
    assert definition.category == category
    assert tool.tier == tier
    assert tool.read_only is read_only
    assert tool.destructive is destructive
    assert tool.execution_mode == mode
    assert definition.requires == requires
    module = importlib.import_module(f"tooldeck.builtin.{category}")
    handler = module.handlers.table[name]
    assert inspect.iscoroutinefunction(handler) is is_async
    assert signature_problems(name, handler, definition.input_schema) == []


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_definition_is_written_for_the_model(name: str) -> None:
    registry = load_builtin_registry()
    raw = registry.definition(name).raw
    assert len(raw["description"]) > 80
    assert raw["activity"]
    schema = raw["input_schema"]
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    for prop, sub in schema.get("properties", {}).items():
        assert sub.get("description"), f"{name}.{prop} has no description"
    for provider in PROVIDERS:
        assert project(registry.tools[name], provider).entry  # every provider accepts it


def test_activity_labels() -> None:
    tools = load_builtin_registry().tools
    assert tools["read_document"].describe_activity({"path": "a.md"}) == "Reading a.md"
    assert tools["grep_files"].describe_activity({"pattern": "TODO"}) == "Searching files for TODO"
    long = "echo " + "x" * 200
    assert tools["run_bash"].describe_activity({"command": long}) == f"Running {long[:80]}"
    assert tools["web_fetch"].describe_activity({"url": "https://a.b/c"}) == "Reading a.b/c"
    assert tools["web_search"].describe_activity({"query": "q"}) == "Searching the web for q"
    assert tools["todo"].describe_activity({"action": "add"}) == "Updating the todo list (add)"
    assert tools["list_files"].describe_activity({}) == "Listing files"
    from tooldeck import ToolResult

    done = tools["write_file"].describe_completed_activity({"path": "x.txt"}, ToolResult("ok"))
    assert done == "Wrote x.txt"


class StubSearch:
    """A search provider object (the assembly only checks that one is bound)."""

    name = "stub"

    async def search(self, query: str, **_: Any) -> Any:
        raise AssertionError("not called by assembly")


def test_assembly_follows_the_turn_facts(tmp_path: Path) -> None:
    registry = load_builtin_registry()
    plain = registry.toolset(TurnContext(session_id="s", home=tmp_path))
    assert list(plain) == [n for n in EXPECTED if n not in ("web_search", "web_fetch")]
    # A name that is no search provider (the bare flag of earlier versions): fetch only.
    fetch_only = registry.toolset(TurnContext(session_id="s", home=tmp_path, web_provider="p"))
    assert list(fetch_only) == [n for n in EXPECTED if n != "web_search"]
    full = registry.toolset(TurnContext(session_id="s", home=tmp_path, web_provider=StubSearch()))
    assert list(full) == list(EXPECTED)
    bare = registry.toolset(
        TurnContext(session_id="s", home=tmp_path, memory_enabled=False, turn_kind="workflow_task")
    )
    assert list(bare) == [n for n in EXPECTED if n not in ("web_search", "web_fetch", "notes")]
    assert full.origin("run_bash") == "registry:shell"


def test_a_broken_copy_of_the_file_reports_every_problem(tmp_path: Path) -> None:
    from tooldeck.registry import RegistryError

    broken = document()
    broken["tools"][0]["input_schema"]["properties"]["offset"]["default"] = 5
    del broken["tools"][-1]  # notes: a handler without a definition
    path = tmp_path / "definitions.json"
    path.write_text(json.dumps(broken))
    with pytest.raises(RegistryError) as info:
        ToolRegistry.load(path, CATEGORY_MODULES)
    problems = info.value.problems
    assert any("default of 'offset' is 5 in the schema but 1 in the handler" in p for p in problems)
    assert any("notes: handler in category 'memory' has no definition" in p for p in problems)
