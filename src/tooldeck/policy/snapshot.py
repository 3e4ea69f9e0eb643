"""A policy and a session's facts as JSON, and back.

What a background job or a schedule keeps of the session that made it
(:mod:`tooldeck.jobs.policy`), so that a process that never saw that session (``tooldeck
scheduler``, ``tooldeck worker --jobs``) judges the job's calls by the same rules.

The JSON is structural: every level, rule, argument test and selector as it was loaded,
its sources included, so ``policy_from_json(policy_to_json(p)) == p``. Reading it back
checks every part the way a policy file is checked (selectors, actions, defaults, the
argument tests); anything else raises :class:`~tooldeck.policy.chain.PolicyError`
listing what is wrong: a record that cannot be read is refused whole, never half used.
The agent's home is not part of it: whoever runs the job judges paths in the job's home.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..approvals import Verdict
from .chain import Policy, PolicyContext, PolicyError
from .rules import (
    _MISSING,
    ACTIONS,
    ArgPredicate,
    Level,
    Rule,
    Selector,
    parse_selectors,
)

__all__ = ["context_from_json", "context_to_json", "policy_from_json", "policy_to_json"]


# -- writing ---------------------------------------------------------------------------------
def _selectors(selectors: tuple[Selector, ...]) -> list[str]:
    return [s.text for s in selectors]


def _predicate(p: ArgPredicate) -> dict[str, Any]:
    out: dict[str, Any] = {"path": p.path}
    if p.equals is not _MISSING:
        out["equals"] = p.equals
    if p.one_of is not None:
        out["in"] = list(p.one_of)
    if p.prefix is not None:
        out["prefix"] = p.prefix
    if p.programs is not None:
        out["program"] = sorted(p.programs)
    if p.domains is not None:
        out["domain"] = list(p.domains)
    return out


def _level(level: Level) -> dict[str, Any]:
    return {
        "name": level.name,
        "default": level.default,
        "sources": list(level.sources),
        "rules": [
            {
                "tools": _selectors(r.tools),
                "action": r.action,
                "args": [_predicate(p) for p in r.args],
                "reason": r.reason,
                "source": r.source,
            }
            for r in level.rules
        ],
    }


def policy_to_json(policy: Policy) -> dict[str, Any]:
    """``policy`` as plain JSON data (see the module docstring)."""
    return {
        "profile": _level(policy.profile),
        "organization": _level(policy.organization),
        "modes": {name: _level(level) for name, level in policy.modes.items()},
        "agents": {name: _level(level) for name, level in policy.agents.items()},
        "nodes": {name: _level(level) for name, level in policy.nodes.items()},
        "dangerous": _selectors(policy.dangerous),
        "headless_deny": _selectors(policy.headless_deny),
        "auto_approve": (None if policy.auto_approve is None else _selectors(policy.auto_approve)),
        "sources": list(policy.sources),
    }


def context_to_json(ctx: PolicyContext) -> dict[str, Any]:
    """The session facts of ``ctx`` (not its home) as plain JSON data."""
    return {
        "mode": ctx.mode,
        "agent": ctx.agent,
        "node": ctx.node,
        "headless": ctx.headless,
        "subagent": ctx.subagent,
        "restrictions": [_level(level) for level in ctx.restrictions],
    }


# -- reading ---------------------------------------------------------------------------------
class _Reader:
    """Reads the JSON back, noting every problem instead of stopping at the first."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def fail(self, where: str, what: str) -> None:
        self.problems.append(f"{where}: {what}")

    def table(self, value: Any, where: str, keys: set[str]) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            self.fail(where, "must be an object")
            return {}
        if set(value) != keys:
            self.fail(where, f"must have exactly the keys {', '.join(sorted(keys))}")
        return value

    def text(self, value: Any, where: str, *, optional: bool = False) -> str | None:
        if isinstance(value, str) or (optional and value is None):
            return value
        self.fail(where, "must be a string" + (" or null" if optional else ""))
        return None

    def texts(self, value: Any, where: str) -> tuple[str, ...]:
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
        self.fail(where, "must be a list of strings")
        return ()

    def verdict(self, value: Any, where: str) -> Verdict | None:
        for verdict in ACTIONS:
            if value == verdict:
                return verdict
        self.fail(where, f"must be one of {', '.join(ACTIONS)}")
        return None

    def selectors(self, value: Any, where: str) -> tuple[Selector, ...]:
        parsed = parse_selectors(value, where, self.problems, empty=True)
        if isinstance(value, list) and [s.text for s in parsed] != value:
            self.fail(where, "holds a selector that is not written as loaded")
        return parsed

    def predicate(self, value: Any, where: str) -> ArgPredicate | None:
        if not isinstance(value, Mapping) or not isinstance(value.get("path"), str):
            self.fail(where, "must be an object with a path")
            return None
        unknown = set(value) - {"path", "equals", "in", "prefix", "program", "domain"}
        if unknown:
            self.fail(where, f"unknown key(s) {', '.join(sorted(unknown))}")
        one_of, prefix = value.get("in"), value.get("prefix")
        program, domain = value.get("program"), value.get("domain")
        if one_of is not None and not isinstance(one_of, list):
            self.fail(where, "'in' must be a list")
        if prefix is not None and not isinstance(prefix, str):
            self.fail(where, "'prefix' must be a string")
        programs = self.texts(program, f"{where}.program") if program is not None else None
        domains = self.texts(domain, f"{where}.domain") if domain is not None else None
        return ArgPredicate(
            value["path"],
            value.get("equals", _MISSING),
            tuple(one_of) if isinstance(one_of, list) else None,
            prefix if isinstance(prefix, str) else None,
            frozenset(programs) if programs is not None else None,
            domains,
        )

    def rule(self, value: Any, where: str) -> Rule | None:
        t = self.table(value, where, {"tools", "action", "args", "reason", "source"})
        action = self.verdict(t.get("action"), f"{where}.action")
        if action is None:
            return None
        args = t.get("args")
        if not isinstance(args, list):
            self.fail(f"{where}.args", "must be a list")
            args = []
        tests = [self.predicate(p, f"{where}.args[{i}]") for i, p in enumerate(args)]
        return Rule(
            self.selectors(t.get("tools"), f"{where}.tools"),
            action,
            tuple(p for p in tests if p is not None),
            self.text(t.get("reason"), f"{where}.reason") or "",
            self.text(t.get("source"), f"{where}.source") or "",
        )

    def level(self, value: Any, where: str) -> Level:
        t = self.table(value, where, {"name", "default", "sources", "rules"})
        default = self.verdict(t.get("default"), f"{where}.default") or "deny"
        rules = t.get("rules")
        if not isinstance(rules, list):
            self.fail(f"{where}.rules", "must be a list")
            rules = []
        read = [self.rule(r, f"{where}.rules[{i}]") for i, r in enumerate(rules)]
        return Level(
            self.text(t.get("name"), f"{where}.name") or "",
            tuple(r for r in read if r is not None),
            default,
            self.texts(t.get("sources"), f"{where}.sources"),
        )

    def named(self, value: Any, where: str) -> dict[str, Level]:
        if not isinstance(value, Mapping):
            self.fail(where, "must be an object")
            return {}
        return {str(k): self.level(v, f"{where}.{k}") for k, v in value.items()}

    def raise_if_wrong(self, source: str) -> None:
        if self.problems:
            raise PolicyError(source, self.problems)


_POLICY_KEYS = {
    "profile",
    "organization",
    "modes",
    "agents",
    "nodes",
    "dangerous",
    "headless_deny",
    "auto_approve",
    "sources",
}


def policy_from_json(data: Any, *, source: str = "<recorded policy>") -> Policy:
    """The :class:`Policy` that :func:`policy_to_json` wrote; :class:`PolicyError` otherwise."""
    r = _Reader()
    t = r.table(data, "policy", _POLICY_KEYS)
    auto = t.get("auto_approve")
    policy = Policy(
        r.level(t.get("profile"), "profile"),
        r.level(t.get("organization"), "organization"),
        r.named(t.get("modes"), "modes"),
        r.named(t.get("agents"), "agents"),
        r.named(t.get("nodes"), "nodes"),
        r.selectors(t.get("dangerous"), "dangerous"),
        r.selectors(t.get("headless_deny"), "headless_deny"),
        None if auto is None else r.selectors(auto, "auto_approve"),
        r.texts(t.get("sources"), "sources"),
    )
    r.raise_if_wrong(source)
    return policy


def context_from_json(data: Any, *, source: str = "<recorded session>") -> PolicyContext:
    """The :class:`PolicyContext` (without a home) that :func:`context_to_json` wrote."""
    r = _Reader()
    keys = {"mode", "agent", "node", "headless", "subagent", "restrictions"}
    t = r.table(data, "session", keys)
    flags = [t.get("headless"), t.get("subagent")]
    if not all(isinstance(f, bool) for f in flags):
        r.fail("session", "headless and subagent must be true or false")
    restrictions = t.get("restrictions")
    if not isinstance(restrictions, list):
        r.fail("session.restrictions", "must be a list")
        restrictions = []
    ctx = PolicyContext(
        r.text(t.get("mode"), "session.mode", optional=True),
        r.text(t.get("agent"), "session.agent", optional=True),
        r.text(t.get("node"), "session.node", optional=True),
        flags[0] is True,
        flags[1] is True,
        tuple(r.level(v, f"session.restrictions[{i}]") for i, v in enumerate(restrictions)),
    )
    r.raise_if_wrong(source)
    return ctx
