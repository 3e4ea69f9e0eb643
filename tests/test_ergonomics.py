"""The short forms: a flat ``tools`` list, the default TurnContext, ``Protection.ask``, callbacks.

Real parts only: ScriptedModel, a real MCP server over stdio (tests/mcp_servers/basic.py),
the real policy chain, the console approver reading a real text stream.
"""

from __future__ import annotations

import asyncio
import io
import sys
from pathlib import Path
from typing import Any

import pytest

import tooldeck
from tooldeck import ApprovalAnswer, ApprovalRequest, Protection, Session, Tool, TurnContext, tool
from tooldeck.agents.skills import Skill, SkillCatalog
from tooldeck.assembly import AssemblyError
from tooldeck.mcp import McpSource
from tooldeck.policy import Policy, SessionPolicy
from tooldeck.testing import ScriptedModel, call, reply

SERVERS = Path(__file__).parent / "mcp_servers"
ran: list[str] = []


@tool(read_only=True)
def shout(text: str) -> str:
    """Upper-case a text."""
    ran.append("shout")
    return text.upper()


@tool
def save_note(text: str) -> str:
    """Save a note (a WRITE tool: it is not read-only)."""
    ran.append("save_note")
    return f"saved {text!r}"


@tool(tier="DANGEROUS")
def wipe() -> str:
    """Wipe everything."""
    ran.append("wipe")
    return "wiped"


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


def texts(result: tooldeck.RunResult) -> list[str]:
    return [o.result.text() for o in result.tool_outputs]


# -- the flat list ---------------------------------------------------------------------------
def test_function_tool_and_mcp_source_in_one_list() -> None:
    server = {"basic": {"command": sys.executable, "args": [str(SERVERS / "basic.py"), "stdio"]}}
    with McpSource(server) as source:
        model = ScriptedModel(
            [
                reply(call("shout", {"text": "hi"}), call("mcp__basic__add", {"a": 2, "b": 3})),
                reply("done"),
            ]
        )
        session = Session(model, [shout, source])  # no turn=, no lambda, no assemble
        result = session.run_sync("go")
    assert texts(result) == ["HI", '{"result":5}']
    shown = [t.name for t in model.requests[0].tools]
    assert shown[0] == "shout" and "mcp__basic__add" in shown  # the list's order


def test_nested_lists_and_toolsets_are_flattened_in_order() -> None:
    session = Session(ScriptedModel([reply("ok")]), [[shout], tooldeck.Toolset([save_note])])
    session.run_sync("hi")
    assert [t.name for t in session.model.requests[0].tools] == ["shout", "save_note"]  # type: ignore[attr-defined]


def test_a_creator_gets_the_default_turn_context() -> None:
    seen: list[TurnContext] = []

    @tooldeck.source
    def make(ctx: TurnContext) -> list[Tool]:
        seen.append(ctx)
        return [shout]

    @tool(read_only=True)
    def where(ctx: tooldeck.ToolContext) -> str:
        """Where am I."""
        turn = ctx.turn
        assert isinstance(turn, TurnContext)
        return f"{turn.session_id} home={turn.home}"

    model = ScriptedModel([reply(call("where")), reply("ok")])
    result = Session(model, [make, where], session_id="abc").run_sync("hi")
    assert seen and all(c.session_id == "abc" and c.home is None for c in seen)
    assert texts(result) == ["abc home=None"]  # no home: less power, not the cwd


def test_no_home_means_file_tools_refuse_and_results_are_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tooldeck.builtin import load_builtin_registry
    from tooldeck.offload import RECALL_TOOL_NAME

    (tmp_path / "secret.txt").write_text("top secret")
    monkeypatch.chdir(tmp_path)  # the working directory is not a home

    @tool(read_only=True)
    def big() -> str:
        """A large result."""
        return "word " * 40_000

    model = ScriptedModel(
        [reply(call("read_document", {"path": "secret.txt"}), call("big")), reply("ok")]
    )
    result = Session(model, [load_builtin_registry(), big]).run_sync("hi")
    refused, guarded = texts(result)
    assert "top secret" not in refused and "home directory" in refused
    assert len(guarded) < len("word " * 40_000)  # guarded ...
    assert RECALL_TOOL_NAME not in [t.name for t in model.requests[-1].tools]  # ... not stored
    assert sorted(p.name for p in tmp_path.iterdir()) == ["secret.txt"]  # nothing written


def test_skill_catalog_in_the_list(tmp_path: Path) -> None:
    folder = tmp_path / "greet"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\nname: greet\ndescription: Greets.\n---\nSay hello.\n")
    catalog, problems = SkillCatalog.load(tmp_path)
    assert not problems and isinstance(next(iter(catalog.skills.values())), Skill)
    model = ScriptedModel([reply(call("use_skill", {"name": "greet"})), reply("ok")])
    result = Session(model, [shout, catalog]).run_sync("hi")
    assert "Say hello." in texts(result)[0]


def test_a_name_made_twice_is_one_error_naming_both() -> None:
    other = Tool.from_function(lambda: "x", name="shout", description="Another.", read_only=True)
    with pytest.raises(AssemblyError, match=r"'shout' is created twice: by tools\[0\].*tools\[1\]"):
        Session(ScriptedModel([]), [shout, other])
    session = Session(ScriptedModel([reply("x")]), [shout, tooldeck.source(lambda ctx: [other])])
    with pytest.raises(AssemblyError, match=r"by tools\[0\] \(tool shout\) and by tools\[1\]"):
        session.run_sync("hi")


def test_a_plain_function_in_the_list_says_what_to_do() -> None:
    def add(a: int, b: int) -> int:
        return a + b

    def make(ctx: TurnContext) -> list[Tool]:
        return [shout]

    for plain in (add, make):  # never called to find out which it is
        with pytest.raises(
            AssemblyError,
            match=r"tools\[1\] \(\w+\) is a function.*@tooldeck.tool.*tooldeck.source",
        ):
            Session(ScriptedModel([]), [shout, plain])  # type: ignore[list-item]
    with pytest.raises(AssemblyError, match="is a int, not a tool"):
        Session(ScriptedModel([]), [3])


def test_the_existing_forms_still_work() -> None:
    turn = TurnContext("s", home=Path("/tmp"))
    for tools in (
        tooldeck.Toolset([shout]),
        [shout],
        tooldeck.source(lambda ctx: tooldeck.assemble(ctx, [tooldeck.Toolset([shout])])),
    ):
        model = ScriptedModel([reply(call("shout", {"text": "a"})), reply("ok")])
        assert texts(Session(model, tools, turn=turn).run_sync("hi")) == ["A"]


# -- Protection.ask ------------------------------------------------------------------------------
def test_approve_write_asks_before_write_and_dangerous_tools_only() -> None:
    asked: list[str] = []

    def human(request: ApprovalRequest) -> bool:
        asked.append(request.call.name)
        return request.call.name == "save_note"

    model = ScriptedModel(
        [
            reply(call("shout", {"text": "a"}), call("save_note", {"text": "n"}), call("wipe")),
            reply("ok"),
        ]
    )
    result = tooldeck.run_sync(
        model, [shout, save_note, wipe], "go", protect=Protection.ask("WRITE", approver=human)
    )
    assert asked == ["save_note", "wipe"]  # STANDARD is not asked about
    assert ran == ["shout", "save_note"]  # wipe was denied, never run
    assert texts(result)[2].startswith("Denied by the user")


def test_approve_denied_by_an_answer_with_a_message() -> None:
    model = ScriptedModel([reply(call("save_note", {"text": "n"})), reply("ok")])
    result = Session(
        model,
        [save_note],
        protect=Protection.ask(("WRITE",), approver=lambda r: ApprovalAnswer(False, "not today")),
    ).run_sync("go")
    assert ran == [] and texts(result) == ["Denied by the user: not today"]


def test_approve_by_tool_name_and_by_function() -> None:
    model = ScriptedModel([reply(call("shout", {"text": "a"})), reply("ok")])
    result = Session(
        model, [shout], protect=Protection.ask("shout", approver=lambda r: False)
    ).run_sync("go")
    assert ran == [] and "Denied" in texts(result)[0]
    model = ScriptedModel([reply(call("shout", {"text": "a"})), reply("ok")])
    picked = Session(
        model,
        [shout],
        protect=Protection.ask(lambda r: r.call.arguments.count("a") > 0, approver=lambda r: True),
    )
    assert texts(picked.run_sync("go")) == ["A"] and ran == ["shout"]


def test_an_answer_that_is_not_yes_or_no_denies() -> None:
    model = ScriptedModel([reply(call("save_note", {"text": "n"})), reply("ok")])
    result = Session(
        model, [save_note], protect=Protection.ask("WRITE", approver=lambda r: "yes")
    ).run_sync("go")
    assert ran == [] and "not True, False or an answer" in texts(result)[0]


def test_the_console_approver_reads_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
    model = ScriptedModel([reply(call("save_note", {"text": "n"})), reply("ok")])
    result = Session(model, [save_note], protect=Protection.ask("WRITE")).run_sync("go")
    assert ran == ["save_note"] and texts(result) == ["saved 'n'"]
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # the input ended: a deny
    model = ScriptedModel([reply(call("save_note", {"text": "m"})), reply("ok")])
    result = Session(model, [save_note], protect=Protection.ask("WRITE")).run_sync("go")
    assert ran == ["save_note"] and "input ended" in texts(result)[0]


def test_a_bad_ask_rule_is_one_line() -> None:
    for bad in ("", (), ("WRITE", 3)):
        with pytest.raises(ValueError, match="names nothing to ask about") as info:
            Protection.ask(bad)  # type: ignore[arg-type]
        assert "\n" not in str(info.value)
    with pytest.raises(TypeError, match="is not callable") as typed:
        Protection.ask("WRITE", approver=3)  # type: ignore[arg-type]
    assert "\n" not in str(typed.value)
    with pytest.raises(TypeError, match="is not a Protection") as wrong:
        Session(ScriptedModel([]), [shout], protect="WRITE")  # type: ignore[arg-type]
    assert "\n" not in str(wrong.value)
    with pytest.raises(ValueError, match="give approver= to one of them") as two:
        Protection.ask("WRITE", approver=lambda r: True) & Protection.policy(
            SessionPolicy(), approver=lambda r: False
        )
    assert "\n" not in str(two.value)


# -- Protection.ask & Protection.policy: the stricter wins ------------------------------------
def _policy(data: dict[str, Any]) -> SessionPolicy:
    return SessionPolicy(Policy.from_dict(data))


def test_approve_asks_even_where_the_policy_allows() -> None:
    allows = _policy({"profile": {"rules": [{"tools": "save_note", "action": "allow"}]}})
    asked: list[str] = []

    def human(request: ApprovalRequest) -> bool:
        asked.append(request.call.name)
        return False

    model = ScriptedModel([reply(call("save_note", {"text": "n"})), reply("ok")])
    protect = Protection.policy(allows) & Protection.ask("WRITE", approver=human)
    Session(model, [save_note], protect=protect).run_sync("go")
    assert asked == ["save_note"] and ran == []


def test_a_policy_deny_wins_over_approve_and_the_human_is_not_asked() -> None:
    denies = _policy({"profile": {"rules": [{"tools": "save_note", "action": "deny"}]}})
    asked: list[str] = []
    model = ScriptedModel([reply(call("save_note", {"text": "n"})), reply("ok")])
    result = Session(
        model,
        [save_note],
        protect=Protection.policy(denies)
        & Protection.ask("WRITE", approver=lambda r: asked.append(r.call.name) or True),
    ).run_sync("go")
    assert asked == [] and ran == [] and texts(result)[0].startswith("Denied by policy")


def test_the_policy_asks_where_approve_would_allow_and_answers_are_audited() -> None:
    policy = SessionPolicy(Policy())  # the default chain: WRITE asks
    model = ScriptedModel([reply(call("save_note", {"text": "n"})), reply("ok")])
    Session(
        model,
        [save_note],
        protect=Protection.ask("DANGEROUS") & Protection.policy(policy, approver=lambda r: True),
    ).run_sync("go")
    assert ran == ["save_note"]
    decisions = [e["decision"] for e in policy.audit.entries]
    assert "approve" in decisions  # the plain callback was wrapped by policy.approver


# -- hostile approvers -------------------------------------------------------------------------
def test_an_approver_that_raises_denies_and_nothing_runs() -> None:
    def broken(request: ApprovalRequest) -> bool:
        raise RuntimeError("approval service down")

    model = ScriptedModel([reply(call("save_note", {"text": "n"})), reply("ok")])
    result = Session(model, [save_note], protect=Protection.ask("WRITE", approver=broken)).run_sync(
        "go"
    )
    assert ran == [] and "approval service down" in texts(result)[0]
    assert result.stop_reason is tooldeck.StopReason.END_TURN


class Stop(BaseException):
    pass


def test_a_base_exception_from_the_approver_ends_the_turn_with_nothing_run() -> None:
    def stops(request: ApprovalRequest) -> bool:
        raise Stop()

    model = ScriptedModel([reply(call("save_note", {"text": "n"})), reply("ok")])
    session = Session(model, [save_note], protect=Protection.ask("WRITE", approver=stops))
    with pytest.raises(Stop):
        session.run_sync("go")
    assert ran == []
    last = session.transcript[-1]
    assert isinstance(last, tooldeck.ToolOutput) and "Not executed" in last.result.text()


def test_a_predicate_that_raises_denies() -> None:
    def rule(request: ApprovalRequest) -> bool:
        raise ValueError("bad rule")

    model = ScriptedModel([reply(call("shout", {"text": "a"})), reply("ok")])
    result = Session(
        model, [shout], protect=Protection.ask(rule, approver=lambda r: True)
    ).run_sync("go")
    assert ran == [] and "policy check failed" in texts(result)[0]


# -- run_sync -----------------------------------------------------------------------------------
def test_run_sync_in_a_running_loop_is_one_line() -> None:
    async def inside() -> None:
        with pytest.raises(RuntimeError, match=r"await tooldeck.run") as info:
            tooldeck.run_sync(ScriptedModel([reply("x")]), [shout], "hi")
        assert "\n" not in str(info.value)

    asyncio.run(inside())


# -- a model string ----------------------------------------------------------------------------
def test_a_model_string_is_built_and_owned(monkeypatch: pytest.MonkeyPatch) -> None:
    from tooldeck.errors import MissingCredentials

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingCredentials, match="OPENAI_API_KEY") as info:
        tooldeck.run_sync("openai:gpt-5.4", [shout], "hi")
    assert "\n" not in str(info.value) and ran == []
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-used")  # nothing is sent: no turn runs
    session = Session("openai:gpt-5.4", [shout])
    assert session.owns_model and type(session.model).__name__ == "OpenAIResponsesModel"


# -- docs/comparison.md: its tooldeck code runs -------------------------------------------------
def test_the_tooldeck_code_of_the_comparison_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every tooldeck block of docs/comparison.md, on a ScriptedModel for the model string."""
    import re

    text = (Path(__file__).resolve().parent.parent / "docs" / "comparison.md").read_text()
    blocks = re.findall(r"```py\n(.*?)```", text, re.S)[0::3]  # tooldeck, pydantic-ai, agents
    scripts = [
        [reply(call("get_weather", {"city": "Paris"})), reply("Sunny.")],
        [
            reply(
                call("add", {"a": 2, "b": 3}),
                call("mcp__time__get_current_time", {"timezone": "UTC"}),
            ),
            reply("5, and the time."),
        ],
        [reply(call("save_note", {"title": "milk", "text": "buy milk"})), reply("Saved.")],
        [reply('{"customer": "ACME", "total_eur": 200.5, "paid": false}')],
    ]
    expected = [
        "Sunny.",
        "5, and the time.",
        "Saved.",
        "customer='ACME' total_eur=200.5 paid=False",
    ]
    assert len(blocks) == len(scripts) == 4
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))  # the approval: yes
    for block, script, printed in zip(blocks, scripts, expected, strict=True):
        assert '"openai:gpt-5.4"' in block
        model = ScriptedModel(script)
        code = compile(
            block.replace('"openai:gpt-5.4"', "MODEL"), "comparison.md", "exec", dont_inherit=True
        )
        exec(code, {"MODEL": model, "__name__": "comparison"})
        assert capsys.readouterr().out.strip().splitlines()[-1] == printed
        outputs = [i for i in model.requests[-1].transcript if isinstance(i, tooldeck.ToolOutput)]
        assert all(not o.is_error for o in outputs)  # every call ran (the approval said yes)


def test_an_async_predicate_is_awaited() -> None:
    async def rule(request: ApprovalRequest) -> bool:
        await asyncio.sleep(0)
        return request.call.name == "save_note"

    asked: list[str] = []
    model = ScriptedModel(
        [reply(call("shout", {"text": "a"}), call("save_note", {"text": "n"})), reply("ok")]
    )
    Session(
        model,
        [shout, save_note],
        protect=Protection.ask(rule, approver=lambda r: asked.append(r.call.name)),
    ).run_sync("go")
    assert asked == ["save_note"] and ran == ["shout"]  # None from the approver: a deny


def test_a_tool_planner_takes_a_flat_list_too() -> None:
    from tooldeck.plan import ToolPlanner

    model = ScriptedModel([reply(call("save_note", {"text": "n"})), reply("ok")])
    later = tooldeck.source(lambda ctx: [save_note])
    planner = ToolPlanner([shout, later], model=model, semantic=False)
    result = Session(model, planner).run_sync("go")
    assert texts(result) == ["saved 'n'"]
    assert [t.name for t in model.requests[0].tools] == ["shout", "save_note"]


def test_one_source_alone_needs_no_list_and_no_turn(tmp_path: Path) -> None:
    server = {"basic": {"command": sys.executable, "args": [str(SERVERS / "basic.py"), "stdio"]}}
    with McpSource(server) as source:
        model = ScriptedModel([reply(call("mcp__basic__add", {"a": 1, "b": 1})), reply("2")])
        assert texts(Session(model, source).run_sync("go")) == ['{"result":2}']
    model = ScriptedModel([reply(call("shout", {"text": "b"})), reply("ok")])
    assert texts(Session(model, shout).run_sync("go")) == ["B"]


def test_model_from_env_falls_back_only_when_nothing_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tooldeck.errors import MissingCredentials, UnknownModel
    from tooldeck.providers import model_from_env

    offline = ScriptedModel([reply("x")])
    monkeypatch.delenv("TOOLDECK_MODEL", raising=False)
    assert model_from_env(offline) is offline
    monkeypatch.setenv("TOOLDECK_MODEL", "bogus")
    with pytest.raises(UnknownModel):
        model_from_env(offline)
    monkeypatch.setenv("TOOLDECK_MODEL", "anthropic:claude-sonnet-4-6")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(MissingCredentials, match="ANTHROPIC_API_KEY"):
        model_from_env(offline)  # a set variable never falls back silently


def test_edited_arguments_are_judged_by_the_policy_again() -> None:
    from tooldeck import PolicyDecision

    def no_secrets(t: Tool, params: Any, c: tooldeck.ToolCall) -> PolicyDecision:
        bad = "secret" in str(params)
        return PolicyDecision("deny" if bad else "allow", "no secrets in notes")

    def edits(request: ApprovalRequest) -> ApprovalAnswer:
        return ApprovalAnswer(True, arguments={"text": "the secret"})

    model = ScriptedModel([reply(call("save_note", {"text": "fine"})), reply("ok")])
    result = Session(
        model,
        [save_note],
        protect=Protection.policy(no_secrets) & Protection.ask("WRITE", approver=edits),
    ).run_sync("go")
    assert ran == [] and "edited arguments are denied by policy" in texts(result)[0]
    model = ScriptedModel([reply(call("save_note", {"text": "fine"})), reply("ok")])
    fine = Session(
        model,
        [save_note],
        protect=Protection.policy(no_secrets)
        & Protection.ask(
            "WRITE", approver=lambda r: ApprovalAnswer(True, arguments={"text": "better"})
        ),
    ).run_sync("go")
    assert texts(fine) == ["saved 'better'"]  # an edit the policy allows runs as edited
