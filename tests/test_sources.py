"""Tool sources: one protocol (``tools_for``), every collection one, four small combinators.

Every source and combinator is checked the way a user's program uses it: through a real
Session run, the ScriptedModel calling the names it was shown (a renamed tool is called
by its new name), real MCP servers over stdio (tests/mcp_servers/basic.py), a real
registry bound from a definitions document, a real skills folder, the real approval
path.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

import tooldeck
from tooldeck import (
    ApprovalRequest,
    Protection,
    Session,
    Tool,
    Toolset,
    ToolSource,
    TurnContext,
    tool,
)
from tooldeck.agents.skills import SkillCatalog
from tooldeck.agents.toolkits import ToolkitManifest
from tooldeck.assembly import AssemblyError
from tooldeck.errors import ToolDefinitionError
from tooldeck.mcp import McpSource
from tooldeck.plan import ToolPlanner
from tooldeck.registry import Handlers, ToolRegistry
from tooldeck.testing import ScriptedModel, call, reply

SERVERS = Path(__file__).parent / "mcp_servers"
BASIC = {"basic": {"command": sys.executable, "args": [str(SERVERS / "basic.py"), "stdio"]}}


@tool(read_only=True)
def search(query: str) -> str:
    """Search the issues."""
    return f"found {query}"


@tool
def close(number: int) -> str:
    """Close an issue."""
    return f"closed #{number}"


@tool(tier="DANGEROUS")
def wipe() -> str:
    """Wipe everything."""
    return "wiped"


ISSUES = Toolset([search, close])


def texts(result: tooldeck.RunResult) -> list[str]:
    return [o.result.text() for o in result.tool_outputs]


def shown(model: ScriptedModel, step: int = 0) -> list[str]:
    return [t.name for t in model.requests[step].tools]


# -- the combinators, through a real run -------------------------------------------------------
def test_prefixed_names_are_what_the_model_sees_and_calls() -> None:
    model = ScriptedModel(
        [reply(call("gh_search", {"query": "crash"}), call("search", {"query": "x"})), reply("ok")]
    )
    result = Session(model, [ISSUES.prefixed("gh_")]).run_sync("go")
    assert shown(model) == ["gh_search", "gh_close"]
    found, unknown = result.tool_outputs
    assert found.result.text() == "found crash" and found.name == "gh_search"
    assert unknown.result.is_error and "gh_search" in unknown.result.text()  # the old name
    assert search.name == "search"  # the original is untouched


def test_renamed_tools_run_the_original_under_the_new_name() -> None:
    model = ScriptedModel(
        [reply(call("find", {"query": "bug"}), call("close", {"number": 2})), reply("ok")]
    )
    result = Session(model, [ISSUES.renamed({"search": "find"})]).run_sync("go")
    assert shown(model) == ["find", "close"]  # unmapped names stay
    assert texts(result) == ["found bug", "closed #2"]
    with pytest.raises(ToolDefinitionError, match="no tool name"):
        ISSUES.renamed({"search": "has space"})


def test_filtered_hides_and_refuses_what_it_leaves_out() -> None:
    model = ScriptedModel([reply(call("close", {"number": 1})), reply("ok")])
    result = Session(model, [ISSUES.filtered(lambda t: t.read_only)]).run_sync("go")
    assert shown(model) == ["search"]
    assert result.tool_outputs[0].result.is_error  # not shown, so not callable


def test_with_approval_asks_before_the_tools_it_wraps_only() -> None:
    asked: list[str] = []

    def human(request: ApprovalRequest) -> bool:
        asked.append(request.tool.name)
        return False

    model = ScriptedModel(
        [reply(call("search", {"query": "a"}), call("gh_close", {"number": 3})), reply("ok")]
    )
    guarded = ISSUES.filtered(lambda t: t.name == "close").prefixed("gh_").with_approval()
    result = Session(
        model, [search, guarded], protect=Protection.ask("DANGEROUS", approver=human)
    ).run_sync("go")
    assert asked == ["gh_close"]  # search is STANDARD: never asked about
    found, denied = texts(result)
    assert found == "found a" and "Denied" in denied
    assert close.tier == "WRITE"  # the original keeps its tier


def test_with_approval_makes_a_policy_that_allows_a_tool_ask_a_human() -> None:
    from tooldeck.policy import Policy, SessionPolicy

    allows = SessionPolicy(
        Policy.from_dict({"profile": {"rules": [{"tools": "*search", "action": "allow"}]}})
    )
    asked: list[str] = []

    def human(request: ApprovalRequest) -> bool:
        asked.append(request.tool.name)
        return True

    model = ScriptedModel(
        [reply(call("search", {"query": "a"}), call("x_search", {"query": "b"})), reply("ok")]
    )
    guarded = Toolset([search]).prefixed("x_").with_approval()
    result = Session(
        model, [search, guarded], protect=Protection.policy(allows, approver=human)
    ).run_sync("go")
    assert asked == ["x_search"]  # DANGEROUS: never allowed without a human
    assert texts(result) == ["found a", "found b"]


def test_with_approval_raises_a_tier_and_never_lowers_it() -> None:
    ctx = TurnContext("s")
    raised = {t.name: t.tier for t in Toolset([search, wipe]).with_approval("WRITE").tools_for(ctx)}
    assert raised == {"search": "WRITE", "wipe": "DANGEROUS"}
    with pytest.raises(ToolDefinitionError, match="tier must be one of"):
        ISSUES.with_approval("HIGH")  # type: ignore[arg-type]


def test_a_renamed_name_is_the_one_policy_rules_match() -> None:
    asked: list[str] = []
    model = ScriptedModel([reply(call("gh_close", {"number": 1})), reply("ok")])
    Session(
        model,
        [ISSUES.prefixed("gh_")],
        protect=Protection.ask("gh_close", approver=lambda r: asked.append(r.tool.name) or True),
    ).run_sync("go")
    assert asked == ["gh_close"]


def test_combinators_keep_one_copy_per_tool_across_steps() -> None:
    source = ISSUES.prefixed("gh_")
    ctx = TurnContext("s")
    first, again = source.tools_for(ctx), source.tools_for(ctx)
    assert [a is b for a, b in zip(first, again, strict=True)] == [True, True]


def test_a_prefix_that_makes_a_name_too_long_is_named_at_the_step() -> None:
    long = Toolset([Tool.from_function(lambda: "x", name="x" * 60, description="d")])
    session = Session(ScriptedModel([reply("x")]), [long.prefixed("toolong_")])
    with pytest.raises(AssemblyError, match=r"tools\[0\] \(a Toolset, prefixed 'toolong_'\)"):
        session.run_sync("go")
    with pytest.raises(ToolDefinitionError, match="no name prefix"):
        ISSUES.prefixed("a b")


def test_prefixing_resolves_a_name_made_twice() -> None:
    twin = Tool.from_function(
        lambda: "web", name="search", description="Another search.", read_only=True
    )
    with pytest.raises(AssemblyError, match="'search' is created twice"):
        Session(ScriptedModel([]), [ISSUES, twin])
    model = ScriptedModel([reply(call("web_search", {})), reply("ok")])
    result = Session(model, [ISSUES, Toolset([twin]).prefixed("web_")]).run_sync("go")
    assert texts(result) == ["web"]


# -- every kind of source, through a real run --------------------------------------------------
def test_an_mcp_source_renamed_and_prefixed_is_called_by_its_new_names() -> None:
    with McpSource(BASIC) as mcp:
        model = ScriptedModel(
            [
                reply(call("plus", {"a": 2, "b": 3}), call("t_mcp__basic__echo", {"text": "hi"})),
                reply("ok"),
            ]
        )
        both = mcp.filtered(lambda t: t.name in ("mcp__basic__add", "mcp__basic__echo"))
        tools = [
            both.filtered(lambda t: t.name.endswith("add")).renamed({"mcp__basic__add": "plus"}),
            both.filtered(lambda t: t.name.endswith("echo")).prefixed("t_"),
        ]
        result = Session(model, tools).run_sync("go")
    assert shown(model) == ["plus", "t_mcp__basic__echo"]
    assert texts(result) == ['{"result":5}', "hi"]


def test_a_function_source_is_asked_every_step() -> None:
    seen: list[str] = []

    @tooldeck.source
    def per_turn(ctx: TurnContext) -> list[Tool]:
        seen.append(ctx.session_id)
        return [search] if len(seen) == 1 else [search, close]

    model = ScriptedModel(
        [reply(call("search", {"query": "q"})), reply(call("close", {"number": 4})), reply("ok")]
    )
    result = Session(model, [per_turn], session_id="abc").run_sync("go")
    assert seen == ["abc", "abc", "abc"] and texts(result) == ["found q", "closed #4"]
    assert shown(model, 0) == ["search"] and shown(model, 1) == ["search", "close"]
    assert per_turn.label.endswith("per_turn")


def test_a_registry_and_one_of_its_categories_are_sources(tmp_path: Path) -> None:
    handlers = Handlers("greet")

    @handlers()
    def hello(name: str) -> str:
        return f"hello {name}"

    web = Handlers("web")

    @web()
    def fetch(url: str) -> str:
        return f"fetched {url}"

    def entry(name: str, category: str, prop: str, **more: object) -> dict[str, object]:
        schema = {"type": "object", "properties": {prop: {"type": "string"}}, "required": [prop]}
        return {
            "name": name,
            "description": f"{name}.",
            "category": category,
            "input_schema": schema,
            **more,
        }

    document = {
        "version": 1,
        "tools": [
            entry("hello", "greet", "name"),
            entry("fetch", "web", "url", requires=["web_provider"]),
        ],
    }
    registry = ToolRegistry.from_document(document, [handlers, web])
    model = ScriptedModel([reply(call("hello", {"name": "ada"})), reply("ok")])
    result = Session(model, [registry]).run_sync("go")  # no web binding: no fetch
    assert shown(model) == ["hello"] and texts(result) == ["hello ada"]
    model = ScriptedModel([reply(call("fetch", {"url": "x"})), reply("ok")])
    turn = TurnContext("s", web_provider="fetch-only")
    result = Session(model, [registry.category("web")], turn=turn).run_sync("go")
    assert shown(model) == ["fetch"] and texts(result) == ["fetched x"]
    assert registry.toolset(turn).origin("fetch") == "registry:web"


def test_a_skill_catalog_is_a_source(tmp_path: Path) -> None:
    (tmp_path / "greet").mkdir()
    (tmp_path / "greet" / "SKILL.md").write_text(
        "---\nname: greet\ndescription: Greets.\n---\nSay hi.\n"
    )
    catalog, problems = SkillCatalog.load(tmp_path)
    assert not problems
    model = ScriptedModel([reply(call("skill", {"name": "greet"})), reply("ok")])
    result = Session(model, [catalog.renamed({"use_skill": "skill"})]).run_sync("go")
    assert "Say hi." in texts(result)[0]


def test_a_toolkit_picks_its_tools_from_the_sources_it_is_given(tmp_path: Path) -> None:
    kit = tmp_path / "kits.toml"
    kit.write_text('[triage]\ndescription = "Read issues."\ntools = ["search", "wipe"]\n')
    toolkit = ToolkitManifest.load(kit, defaults=False).resolve("triage")
    model = ScriptedModel([reply(call("search", {"query": "q"})), reply("ok")])
    result = Session(model, [toolkit.of([ISSUES, wipe])]).run_sync("go")
    assert shown(model) == ["search", "wipe"] and texts(result) == ["found q"]


def test_the_planner_is_a_source_over_the_same_tools() -> None:
    planner = ToolPlanner([ISSUES.prefixed("gh_")], semantic=False)
    assert [t.name for t in planner.tools_for(TurnContext("s"))] == ["gh_search", "gh_close"]
    model = ScriptedModel([reply(call("gh_close", {"number": 9})), reply("ok")])
    assert texts(Session(model, planner).run_sync("go")) == ["closed #9"]


def test_any_object_with_tools_for_is_a_source() -> None:
    class Mine:  # implements the protocol, inherits nothing
        def tools_for(self, ctx: TurnContext, /) -> Sequence[Tool]:
            return [search]

    assert isinstance(Mine(), ToolSource)
    model = ScriptedModel([reply(call("search", {"query": "z"})), reply("ok")])
    assert texts(Session(model, [Mine()]).run_sync("go")) == ["found z"]


# -- what tools= refuses -----------------------------------------------------------------------
def test_a_plain_function_is_refused_without_being_called() -> None:
    called: list[object] = []

    def make(ctx: TurnContext) -> list[Tool]:
        called.append(ctx)
        return [search]

    with pytest.raises(AssemblyError, match=r"tools\[0\] \(make\) is a function.*tooldeck.source"):
        Session(ScriptedModel([]), [make])  # type: ignore[list-item]
    assert called == []
    with pytest.raises(AssemblyError, match=r"tools\[0\]\[1\] is a str, not a tool"):
        Session(ScriptedModel([]), [[search, "close"]])  # type: ignore[list-item]


def test_a_function_source_is_named_by_its_label_in_a_collision() -> None:
    @tooldeck.source(label="my search tools")
    def mine(ctx: TurnContext) -> list[Tool]:
        return [search]

    session = Session(ScriptedModel([reply("x")]), [ISSUES, mine])
    with pytest.raises(
        AssemblyError,
        match=r"'search' is created twice: by tools\[0\] \(a Toolset\) and by "
        r"tools\[1\] \(my search tools\)",
    ):
        session.run_sync("go")


def test_a_rename_onto_another_tool_of_the_source_names_both_tools() -> None:
    session = Session(ScriptedModel([reply("x")]), [ISSUES.renamed({"search": "close"})])
    with pytest.raises(
        AssemblyError,
        match=r"tools\[0\] \(a Toolset, renamed\).*'search' and 'close' would both be named "
        r"'close'",
    ):
        session.run_sync("go")
