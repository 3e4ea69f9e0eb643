"""The policy chain: tiers, selectors, predicates, levels, loading, visibility, the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from tooldeck import Tool, tool
from tooldeck.cli.policy import policy_app
from tooldeck.policy import (
    GrantStore,
    Policy,
    PolicyContext,
    PolicyError,
    SessionPolicy,
    effective_tier,
    shell_programs,
)
from tooldeck.policy.rules import ArgPredicate, Selector, ToolFacts

ROOT = Path(__file__).resolve().parents[1]


def make(name: str, tier: Any = "WRITE", namespace: str | None = None) -> Tool:
    return Tool.from_schema(
        name=name,
        description="t",
        json_schema={"type": "object"},
        execute=lambda p, c: None,
        tier=tier,
        namespace=namespace,
    )


WRITE = make("write_file")
READ = make("read_document", "STANDARD")
BASH = make("run_bash", "DANGEROUS")


# -- tiers ---------------------------------------------------------------------------------
def test_hints_raise_a_tier_and_never_lower_it() -> None:
    assert effective_tier("STANDARD", {"readOnlyHint": False}) == "WRITE"
    assert effective_tier("STANDARD", {"destructiveHint": True}) == "WRITE"
    assert effective_tier("STANDARD", {"destructiveHint": True}, destructive="DANGEROUS") == (
        "DANGEROUS"
    )
    assert effective_tier("DANGEROUS", {"readOnlyHint": True}) == "DANGEROUS"
    assert effective_tier("WRITE", {"readOnlyHint": True, "destructiveHint": False}) == "WRITE"
    assert effective_tier(READ, {"destructiveHint": "yes"}) == "STANDARD"  # not a bool: ignored
    assert effective_tier(READ, {"readOnlyHint": True, "destructiveHint": True}) == "STANDARD"
    assert effective_tier("SOMETHING", None) == "DANGEROUS"


def test_run_bash_computer_and_marked_tools_are_dangerous_whatever_their_definition() -> None:
    policy = Policy.from_dict({"dangerous": ["mcp__*__delete_*", "ns:prod"]})
    assert policy.tier_of(make("run_bash", "STANDARD")) == "DANGEROUS"
    assert policy.tier_of(make("computer", "WRITE")) == "DANGEROUS"
    assert policy.tier_of(make("mcp__git__delete_branch", "STANDARD")) == "DANGEROUS"
    assert policy.tier_of(make("deploy", "WRITE", namespace="prod")) == "DANGEROUS"
    assert policy.tier_of(WRITE) == "WRITE"
    hinted = make("mcp__docs__search", "STANDARD")
    hinted.mcp = SimpleNamespace(server="docs", annotations={"readOnlyHint": False})
    assert policy.tier_of(hinted) == "WRITE"
    assert policy.facts(hinted).server == "docs"


# -- selectors and predicates --------------------------------------------------------------
def test_selectors_match_names_globs_namespaces_and_tiers() -> None:
    facts = ToolFacts("mcp__github__create_issue", "WRITE", "github", "github")
    assert Selector("mcp__github__create_issue").matches(facts)
    assert Selector("mcp__github__*").matches(facts)
    assert not Selector("mcp__github").matches(facts)
    assert Selector("ns:github").matches(facts) and Selector("ns:git*").matches(facts)
    assert Selector("tier:WRITE").matches(facts) and not Selector("tier:STANDARD").matches(facts)
    assert Selector("*").matches(facts)


def test_shell_programs_are_first_words_never_a_regex() -> None:
    assert shell_programs("git status && git log | head -3") == ["git", "git", "head"]
    assert shell_programs("FOO=1 /usr/bin/git diff; ls\nrm x") == ["git", "ls", "rm"]
    assert shell_programs("echo 'a; rm -rf /'") == ["echo"]
    for unclear in ("echo $(rm x)", "echo `id`", "ls > f", "(cd a && rm b)", "echo 'open", ""):
        assert shell_programs(unclear) is None, unclear


def test_predicates_are_three_valued_and_fail_towards_deny() -> None:
    prefix = ArgPredicate("path", prefix="docs/")
    assert prefix.test({"path": "docs/a.md"}) is True
    assert prefix.test({"path": "./docs/x/../y"}) is True
    assert prefix.test({"path": "docs"}) is True
    assert prefix.test({"path": "docsx/a"}) is False
    assert prefix.test({"path": "docs/../../etc/passwd"}) is None
    assert prefix.test({"path": 5}) is None
    assert prefix.test({}) is False
    program = ArgPredicate("command", programs=frozenset({"git", "ls"}))
    assert program.test({"command": "git log; ls"}) is True
    assert program.test({"command": "rm -rf /"}) is False
    assert program.test({"command": "git log; rm -rf /"}) is None
    assert program.test({"command": "sudo git log"}) is None  # a launcher hides the program
    assert ArgPredicate("mode", equals=1).test({"mode": True}) is False
    assert ArgPredicate("mode", one_of=("a", 1)).test({"mode": 1.0}) is True
    nested = ArgPredicate("options.mode", equals="fast")
    assert nested.test({"options": {"mode": "fast"}}) is True


def rules(level: str, *items: dict[str, Any], default: str | None = None) -> Policy:
    body: dict[str, Any] = {"rules": list(items)}
    if default:
        body["default"] = default
    return Policy.from_dict({level: body})


def test_an_allow_needs_a_certain_match_and_a_deny_takes_an_uncertain_one() -> None:
    allow = rules(
        "profile",
        {"tools": "write_file", "action": "allow", "args": {"path": {"prefix": "docs"}}},
    )
    assert allow.decide(WRITE, {"path": "docs/a"}).action == "allow"
    assert allow.decide(WRITE, {"path": "docs/../../x"}).action == "ask"
    deny = rules(
        "organization",
        {"tools": "run_bash", "action": "deny", "args": {"command": {"program": "rm"}}},
    )
    assert deny.decide(BASH, {"command": "rm -rf /"}).action == "deny"
    assert deny.decide(BASH, {"command": "ls; rm -rf /"}).action == "deny"
    assert deny.decide(BASH, {"command": "env rm -rf /"}).action == "deny"
    assert deny.decide(BASH, {"command": "echo $(rm x)"}).action == "deny"
    assert deny.decide(BASH, {"command": "ls -la"}).action == "ask"


# -- the chain -----------------------------------------------------------------------------
FULL = {
    "profile": {"rules": [{"tools": "write_file", "action": "allow"}]},
    "organization": {"rules": [{"tools": "tier:DANGEROUS", "action": "allow"}]},
    "modes": {"plan": {"rules": [{"tools": "tier:WRITE", "action": "deny", "reason": "plan"}]}},
    "agents": {"main": {"rules": [{"tools": "write_file", "action": "ask"}]}},
    "nodes": {"review": {"allow": ["read_document", "write_file"]}},
}


def test_the_trace_lists_every_level_in_order() -> None:
    policy = Policy.from_dict(FULL)
    ctx = PolicyContext(mode="plan", agent="main", node="review")
    decision = policy.decide(WRITE, {}, ctx)
    assert [t.level for t in decision.trace] == [
        "profile",
        "organization",
        "mode plan",
        "agent main",
        "node review",
        "delegation",
    ]
    assert [t.verdict for t in decision.trace][:5] == ["allow", "pass", "deny", "ask", "pass"]
    assert (decision.action, decision.level, decision.reason) == ("deny", "mode plan", "plan")


def test_the_strictest_verdict_wins_and_the_tier_decides_when_all_pass() -> None:
    policy = Policy.from_dict(FULL)
    assert policy.decide(WRITE, {}, PolicyContext(agent="main")).level == "agent main"
    assert policy.decide(WRITE, {}, PolicyContext(agent="main")).action == "ask"
    assert policy.decide(WRITE, {}).action == "allow"
    plain = Policy()
    assert (plain.decide(READ, {}).action, plain.decide(READ, {}).level) == ("allow", "tier")
    assert plain.decide(WRITE, {}).action == "ask"
    outside = policy.decide(BASH, {}, PolicyContext(node="review"))
    assert (outside.action, outside.level) == ("deny", "node review")
    assert policy.decide(READ, {}, PolicyContext(node="nowhere")).action == "deny"


def test_dangerous_is_never_allowed_without_a_human() -> None:
    decision = Policy.from_dict(FULL).decide(BASH, {"command": "ls"})
    assert decision.action == "ask" and decision.level == "tier"
    assert decision.trace[1].verdict == "allow"  # the organization allowed it
    assert "DANGEROUS: always a human" in decision.reason


def test_headless_checks_its_denylist_first_and_denies_what_needs_a_human() -> None:
    policy = Policy.from_dict({"headless": {"deny": ["web_*"]}})
    ctx = PolicyContext(headless=True)
    assert policy.decide(make("web_fetch", "STANDARD"), {}, ctx).level == "headless"
    assert policy.decide(make("delegate_task"), {}, ctx).action == "deny"
    assert policy.decide(BASH, {}, ctx).trace[0].verdict == "deny"
    write = policy.decide(WRITE, {}, ctx)
    assert write.action == "deny" and "headless" in write.reason
    assert policy.decide(READ, {}, ctx).action == "allow"


def test_a_sub_agent_gets_standard_auto_approved_only() -> None:
    policy = Policy.from_dict({"profile": {"default": "ask"}})
    child = policy.with_restriction(PolicyContext(), "worker")
    assert policy.decide(READ, {}).action == "ask"
    assert (policy.decide(READ, {}, child).action, policy.decide(READ, {}, child).level) == (
        "allow",
        "delegation",
    )
    assert policy.decide(WRITE, {}, child).action == "ask"
    assert policy.decide(BASH, {}, child).action == "ask"
    off = Policy.from_dict({"profile": {"default": "ask"}, "delegation": {"auto_approve": []}})
    assert off.decide(READ, {}, child).action == "ask"


# -- loading -------------------------------------------------------------------------------
TOML = """
dangerous = ["computer"]
[headless]
deny = ["notes"]
[organization]
[[organization.rules]]
tools = "run_bash"
action = "deny"
args = { command = { program = ["rm"] } }
[nodes.review]
allow = ["read_document"]
"""


def test_toml_and_json_files_load_the_same_policy(tmp_path: Path) -> None:
    import tomllib

    (tmp_path / "p.toml").write_text(TOML)
    (tmp_path / "p.json").write_text(json.dumps(tomllib.loads(TOML)))
    a, b = Policy.from_file(tmp_path / "p.toml"), Policy.from_file(tmp_path / "p.json")
    for args in ({"command": "rm x"}, {"command": "ls"}):
        assert a.decide(BASH, args).as_dict()["trace"] == b.decide(BASH, args).as_dict()["trace"]
    assert a.decide(BASH, {"command": "rm x"}).action == "deny"


def test_every_problem_in_a_policy_is_reported() -> None:
    with pytest.raises(PolicyError) as caught:
        Policy.from_dict(
            {
                "profiles": {},
                "profile": {"rules": [{"tools": "x", "action": "permit"}]},
                "organization": {"rules": [{"tools": "tier:ROOT", "action": "deny"}]},
                "modes": {
                    "m": {"rules": [{"tools": "x", "action": "deny", "args": {"p": {"re": "."}}}]}
                },
                "dangerous": ["tier:WRITE"],
            }
        )
    text = str(caught.value)
    for expected in ("profiles", "permit", "tier:ROOT", "unknown test(s) re", "not by tier"):
        assert expected in text, expected
    assert len(caught.value.problems) == 5


def test_merging_files_never_loosens_a_level() -> None:
    strict = Policy.from_dict({"profile": {"default": "deny"}})
    loose = Policy.from_dict({"profile": {"default": "allow", "rules": []}})
    assert strict.merged(loose).profile.default == "deny"
    assert loose.merged(strict).profile.default == "deny"
    both = Policy.from_dict({"delegation": {"auto_approve": ["read_*", "grep_files"]}}).merged(
        Policy.from_dict({"delegation": {"auto_approve": ["grep_files"]}})
    )
    assert both.auto_selectors == (Selector("grep_files"),)


def test_the_documented_example_policy_loads(tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "policy.md").read_text()
    blocks = re.findall(r"```toml\n(.*?)```", doc, re.S)
    assert blocks
    for i, block in enumerate(blocks):
        (tmp_path / f"{i}.toml").write_text(block)
        Policy.from_file(tmp_path / f"{i}.toml")


# -- visibility ------------------------------------------------------------------------------
def test_a_tool_denied_only_for_some_arguments_stays_visible() -> None:
    policy = SessionPolicy(
        rules(
            "organization",
            {"tools": "run_bash", "action": "deny", "args": {"command": {"program": "rm"}}},
        )
    )
    assert policy.visible(BASH)
    nothing = SessionPolicy(rules("organization", {"tools": "run_bash", "action": "deny"}))
    assert not nothing.visible(BASH)
    # allowed only inside docs/, in a headless session: visible (docs/ calls can run)
    headless = SessionPolicy(
        rules(
            "profile",
            {"tools": "write_file", "action": "allow", "args": {"path": {"prefix": "docs"}}},
        ),
        headless=True,
    )
    assert headless.visible(WRITE) and not headless.visible(make("edit_file"))


def test_a_grant_and_its_revocation_change_visibility_in_a_headless_session(
    tmp_path: Path,
) -> None:
    store = GrantStore(tmp_path / "g.json")
    policy = SessionPolicy(headless=True, grants=store)
    assert not policy.visible(WRITE)
    grant = store.add("write_file", {"path": {"prefix": "out"}})
    assert policy.visible(WRITE)
    assert policy.decide(WRITE, {"path": "out/x"}).action == "allow"
    assert policy.decide(WRITE, {"path": "in/x"}).action == "deny"
    GrantStore(tmp_path / "g.json").revoke(grant.id)  # another process revokes it
    assert not policy.visible(WRITE)


# -- the CLI ---------------------------------------------------------------------------------
def test_policy_explain_prints_the_decision_and_the_trace(tmp_path: Path) -> None:
    (tmp_path / "p.toml").write_text(TOML)
    runner = CliRunner()
    out = runner.invoke(
        policy_app,
        [
            "explain",
            "run_bash",
            "--args",
            '{"command": "rm -rf x"}',
            "--profile",
            str(tmp_path / "p.toml"),
        ],
        env={"COLUMNS": "200"},
    )
    assert out.exit_code == 0, out.output
    assert "Decision: DENY (decided by organization)" in out.output
    for level in ("profile", "organization", "mode", "agent", "node", "delegation"):
        assert level in out.output
    data = json.loads(
        runner.invoke(
            policy_app,
            ["explain", "deploy", "--tier", "DANGEROUS", "--headless", "--json"],
        ).output
    )
    assert data["action"] == "deny" and data["level"] == "headless"
    bad = runner.invoke(policy_app, ["explain", "write_file", "--args", '{"path": 3}'])
    assert bad.exit_code == 2 and bad.output.startswith("error: --args for ")


def test_policy_check_grants_and_revoke(tmp_path: Path) -> None:
    runner = CliRunner(env={"COLUMNS": "500"})  # long tmp paths (xdist) stay on one line
    (tmp_path / "bad.toml").write_text('[profile]\nrules = [{ tools = "x", action = "maybe" }]\n')
    (tmp_path / "ok.toml").write_text(TOML)
    out = runner.invoke(
        policy_app, ["check", str(tmp_path / "ok.toml"), str(tmp_path / "bad.toml")]
    )
    assert out.exit_code == 1 and "ok.toml: ok" in out.output and "maybe" in out.output
    store = GrantStore(tmp_path / "s.grants.json")
    grant = store.add("write_file", {"path": {"prefix": "docs"}})
    store.add("edit_file")
    listed = runner.invoke(policy_app, ["grants", str(tmp_path / "s.grants.json")]).output
    assert grant.id in listed and "edit_file" in listed and "(every call)" in listed
    out = runner.invoke(
        policy_app, ["revoke", str(tmp_path / "s.grants.json"), "--tool", "edit_file"]
    )
    assert "Revoked 1 grant(s)" in out.output
    assert (
        runner.invoke(policy_app, ["revoke", str(tmp_path / "s.grants.json"), "g_nope"]).exit_code
        == 1
    )
    assert [g.tool for g in GrantStore(tmp_path / "s.grants.json")] == ["write_file"]


@tool(read_only=True)
def probe(path: str = "") -> str:
    """A tool for the session policy hook."""
    return path


def test_the_policy_hook_answers_the_dispatcher_with_the_same_decision() -> None:
    from tooldeck.transcript import ToolCall

    policy = SessionPolicy(
        rules("profile", {"tools": "probe", "action": "deny", "args": {"path": {"prefix": "x"}}})
    )
    params = probe.params.model_validate({"path": "x/y"}) if probe.params else None
    answer = policy(probe, params, ToolCall("c", "probe", "{}"))
    assert (answer.action, answer.level) == ("deny", "profile")
    assert policy.audit.entries[-1]["decision"] == "deny"
