"""Rules: which tools a rule is about (selectors) and which arguments (predicates).

A **selector** names tools: an exact name (``write_file``), a glob (``read_*``,
``mcp__github__*``), a namespace (``ns:github``: the tool's namespace, or its MCP
server) or a tier (``tier:WRITE``; the effective tier, after the policy's own marks).

A **predicate** tests one argument of the validated call (``path``, or a dotted path
``options.mode``) with structured operators, never a regular expression over a shell
string:

- ``equals = X``: the argument equals X;
- ``in = [X, Y]``: the argument is one of these;
- ``prefix = "docs/"``: a path under this directory (compared component by component
  after normalising ``.`` and ``..``; a path that climbs out with ``..`` is uncertain);
- ``program = ["git", "ls"]``: the first word of every command in a shell command line
  (parsed with :mod:`shlex`; split at ``;``, ``&&``, ``||``, ``|``, ``&`` and newlines;
  leading ``VAR=value`` words skipped; ``/usr/bin/git`` counts as ``git``). A launcher
  or shell keyword (``sudo``, ``env``, ``xargs``, ``bash``, ``if``...) that is not in
  the list makes the answer uncertain: the real program follows it.

Predicates answer True, False or **uncertain** (None): a value of the wrong type, a
command line that cannot be parsed or holds a command substitution (``$(..)``,
backticks, ``<(..)``) or an output redirection, a command line whose commands are only
partly in the list. An ``allow`` rule needs a certain match; a ``deny`` or ``ask`` rule
also matches when uncertain. So an unclear call is never let through by an allow rule,
and never escapes a deny rule.
"""

from __future__ import annotations

import fnmatch
import posixpath
import shlex
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ..tool import TIERS, Tier

__all__ = [
    "ACTIONS",
    "RANK",
    "Action",
    "ArgPredicate",
    "Level",
    "Rule",
    "Selector",
    "ToolFacts",
    "Verdict",
    "parse_args",
    "parse_level",
    "parse_rule",
    "parse_selectors",
    "sample_arguments",
    "shell_programs",
]

Action: TypeAlias = Literal["allow", "deny", "ask"]
Verdict: TypeAlias = Literal["allow", "deny", "ask", "pass"]
ACTIONS: tuple[Verdict, ...] = ("allow", "deny", "ask", "pass")
RANK: dict[str, int] = {"pass": 0, "allow": 1, "ask": 2, "deny": 3}
"""Strictness: when several verdicts meet, the highest rank wins (deny > ask > allow)."""

Tri: TypeAlias = bool | None
_MISSING = object()
_CONTROL = {";", "&&", "||", "|", "&", ";;", "|&", "\n"}
_SUBSTITUTION = ("$(", "`", "<(", ">(")


@dataclass(frozen=True, slots=True)
class ToolFacts:
    """What the policy knows about a tool: its name, namespace, MCP server and tier."""

    name: str
    tier: Tier
    namespace: str | None = None
    server: str | None = None


@dataclass(frozen=True, slots=True)
class Selector:
    """One tool pattern: ``name``, a glob, ``ns:NAME`` or ``tier:TIER``."""

    text: str

    @property
    def kind(self) -> Literal["name", "glob", "ns", "tier"]:
        if self.text.startswith("ns:"):
            return "ns"
        if self.text.startswith("tier:"):
            return "tier"
        if any(ch in self.text for ch in "*?["):
            return "glob"
        return "name"

    def matches(self, tool: ToolFacts) -> bool:
        kind, text = self.kind, self.text
        if kind == "name":
            return tool.name == text
        if kind == "glob":
            return fnmatch.fnmatchcase(tool.name, text)
        if kind == "tier":
            return tool.tier == text[5:]
        wanted = text[3:]
        return any(
            value is not None and fnmatch.fnmatchcase(value, wanted)
            for value in (tool.namespace, tool.server)
        )

    def __str__(self) -> str:
        return self.text


def parse_selectors(
    value: Any, where: str, problems: list[str], *, empty: bool = False
) -> tuple[Selector, ...]:
    """Selectors from a string or a list of strings (``empty``: an empty list is fine).

    Problems are appended to ``problems``, not raised.
    """
    items = [value] if isinstance(value, str) else value
    if (
        not isinstance(items, list)
        or not (items or empty)
        or not all(isinstance(i, str) for i in items)
    ):
        what = "a list of tool names" if empty else "a non-empty list of tool names"
        problems.append(f"{where}: expected a tool name or {what}")
        return ()
    selectors: list[Selector] = []
    for item in items:
        selector = Selector(item.strip())
        if not selector.text:
            problems.append(f"{where}: an empty tool name")
            continue
        if selector.kind == "tier" and selector.text[5:] not in TIERS:
            problems.append(f"{where}: {item!r}: the tier must be one of {', '.join(TIERS)}")
            continue
        if selector.kind == "ns" and not selector.text[3:]:
            problems.append(f"{where}: {item!r}: 'ns:' needs a namespace")
            continue
        selectors.append(selector)
    return tuple(selectors)


# -- predicates ----------------------------------------------------------------------------
def shell_programs(command: str) -> list[str] | None:
    """The first word of every command in a shell command line; None when unclear.

    Unclear: quoting that does not parse, a command substitution, an output
    redirection, a subshell, or an empty command line.
    """
    if any(marker in command for marker in _SUBSTITUTION):
        return None
    lexer = shlex.shlex(command.replace("\n", ";"), posix=True, punctuation_chars=";&|<>()")
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        return None
    programs: list[str] = []
    expecting = True
    for token in tokens:
        if token and set(token) <= set(";&|<>()"):
            if ">" in token or "(" in token or ")" in token:
                return None  # output redirection or a subshell: not a plain command
            if "<" in token:
                if expecting:
                    return None  # a redirection before the command word
                continue
            expecting = True  # ; & && | || ...
            continue
        if expecting:
            name, eq, _ = token.partition("=")
            if eq and name.isidentifier():
                continue  # VAR=value before the command
            programs.append(posixpath.basename(token) or token)
            expecting = False
    return programs or None


LAUNCHERS = frozenset(
    {
        # words that run another command, and shell keywords: the real program follows
        "sudo", "doas", "su", "env", "xargs", "exec", "eval", "command", "builtin",
        "nohup", "nice", "ionice", "time", "timeout", "watch", "setsid", "stdbuf",
        "chroot", "strace", "bash", "sh", "zsh", "dash", "ksh", "fish", "busybox",
        "source", ".", "if", "then", "else", "elif", "fi", "for", "while", "until", "do",
        "done", "case", "esac", "function", "select", "coproc", "!", "{", "}", "[[",
    }
)  # fmt: skip


def _normal_path(value: str) -> str | None:
    if not value:
        return None
    normal = posixpath.normpath(value)
    if normal == ".." or normal.startswith("../"):
        return None
    return normal


def _under(path: str, prefix: str) -> bool:
    if prefix in (".", ""):
        return not path.startswith("/")
    if prefix == "/":
        return path.startswith("/")
    return path == prefix or path.startswith(prefix.rstrip("/") + "/")


@dataclass(frozen=True, slots=True)
class ArgPredicate:
    """Tests on one argument, all of which must hold (see the module docstring)."""

    path: str
    equals: Any = _MISSING
    one_of: tuple[Any, ...] | None = None
    prefix: str | None = None
    programs: frozenset[str] | None = None

    def lookup(self, args: Mapping[str, Any]) -> Any:
        value: Any = args
        for part in self.path.split("."):
            if not isinstance(value, Mapping) or part not in value:
                return _MISSING
            value = value[part]
        return value

    def test(self, args: Mapping[str, Any]) -> Tri:
        value = self.lookup(args)
        if value is _MISSING:
            return False
        results: list[Tri] = []
        if self.equals is not _MISSING:
            results.append(_same(value, self.equals))
        if self.one_of is not None:
            results.append(any(_same(value, v) for v in self.one_of))
        if self.prefix is not None:
            results.append(self._prefix(value))
        if self.programs is not None:
            results.append(self._programs(value))
        return all_of(results)

    def _prefix(self, value: Any) -> Tri:
        if not isinstance(value, str):
            return None
        path = _normal_path(value)
        prefix = posixpath.normpath(self.prefix or ".")
        if path is None:
            return None
        return _under(path, prefix)

    def _programs(self, value: Any) -> Tri:
        if not isinstance(value, str):
            return None
        found = shell_programs(value)
        if found is None:
            return None
        assert self.programs is not None
        inside: list[Tri] = [
            True if p in self.programs else None if p in LAUNCHERS else False for p in found
        ]
        if all(r is True for r in inside):
            return True
        if all(r is False for r in inside):
            return False
        return None  # partly listed, or a launcher (sudo, env, bash...) hides the program

    def describe(self) -> str:
        tests: list[str] = []
        if self.equals is not _MISSING:
            tests.append(f"= {self.equals!r}")
        if self.one_of is not None:
            tests.append(f"in {list(self.one_of)!r}")
        if self.prefix is not None:
            tests.append(f"under {self.prefix!r}")
        if self.programs is not None:
            tests.append(f"runs {' or '.join(sorted(self.programs))}")
        return f"{self.path} " + " and ".join(tests)

    def samples(self) -> Iterator[Any]:
        """Values that between them reach every outcome of this predicate (for visibility)."""
        if self.equals is not _MISSING:
            yield self.equals
        if self.one_of is not None:
            yield from self.one_of
        if self.prefix is not None:
            base = posixpath.normpath(self.prefix)
            yield base
            yield posixpath.join(base, "tooldeck-sample")
            yield "../tooldeck-sample"  # uncertain for every prefix
        if self.programs is not None:
            words = sorted(self.programs)
            yield from words
            yield from (f"{a}; {b}" for a in words for b in words if a < b)
            yield "$(tooldeck-sample)"  # uncertain for every program list


def _same(a: Any, b: Any) -> bool:
    # JSON equality: True is not 1, 1 == 1.0
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def all_of(results: Iterable[Tri]) -> Tri:
    """Three-valued AND: any False is False, else any uncertain is uncertain."""
    seen = list(results)
    if any(r is False for r in seen):
        return False
    if any(r is None for r in seen):
        return None
    return True


_OPS = {"equals", "in", "prefix", "program"}


def parse_args(value: Any, where: str, problems: list[str]) -> tuple[ArgPredicate, ...]:
    """Argument predicates from ``{arg: {op: value, ...}, ...}`` (empty: no tests)."""
    if not isinstance(value, Mapping):
        problems.append(f"{where}: 'args' must be a table of argument name -> tests")
        return ()
    predicates: list[ArgPredicate] = []
    for path, tests in value.items():
        here = f"{where}.{path}"
        if not isinstance(path, str) or not path or any(not p for p in path.split(".")):
            problems.append(f"{where}: {path!r} is not an argument name (or a dotted path)")
            continue
        if not isinstance(tests, Mapping) or not tests:
            problems.append(f"{here}: expected a table of tests ({', '.join(sorted(_OPS))})")
            continue
        unknown = sorted(set(tests) - _OPS)
        if unknown:
            problems.append(
                f"{here}: unknown test(s) {', '.join(unknown)} (use {', '.join(sorted(_OPS))})"
            )
            continue
        one_of = tests.get("in")
        if one_of is not None and not isinstance(one_of, list):
            problems.append(f"{here}: 'in' must be a list")
            continue
        prefix = tests.get("prefix")
        if prefix is not None and (not isinstance(prefix, str) or not prefix):
            problems.append(f"{here}: 'prefix' must be a non-empty path")
            continue
        program = tests.get("program")
        if isinstance(program, str):
            program = [program]
        if program is not None and (
            not isinstance(program, list)
            or not program
            or not all(
                isinstance(p, str) and p and not any(c.isspace() for c in p) for p in program
            )
        ):
            problems.append(f"{here}: 'program' must be a command name or a list of them")
            continue
        predicates.append(
            ArgPredicate(
                path,
                tests.get("equals", _MISSING),
                tuple(one_of) if one_of is not None else None,
                prefix,
                frozenset(posixpath.basename(p) or p for p in program) if program else None,
            )
        )
    return tuple(predicates)


# -- rules and levels ------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Rule:
    """``tools`` (selectors) + optional ``args`` predicates -> an action."""

    tools: tuple[Selector, ...]
    action: Verdict
    args: tuple[ArgPredicate, ...] = ()
    reason: str = ""
    source: str = ""

    def applies_to(self, tool: ToolFacts) -> bool:
        return any(s.matches(tool) for s in self.tools)

    def test(self, tool: ToolFacts, args: Mapping[str, Any]) -> Tri:
        """True / False / uncertain: does this rule match this call?"""
        if not self.applies_to(tool):
            return False
        return all_of(p.test(args) for p in self.args)

    def matches(self, tool: ToolFacts, args: Mapping[str, Any]) -> bool:
        """An allow (or pass) rule needs a certain match; deny and ask also take uncertain."""
        outcome = self.test(tool, args)
        if outcome is None:
            return self.action in ("deny", "ask")
        return outcome

    def describe(self) -> str:
        text = ", ".join(map(str, self.tools))
        if self.args:
            text += " where " + " and ".join(p.describe() for p in self.args)
        return f"{self.action} {text}"


def parse_rule(value: Any, where: str, problems: list[str]) -> Rule | None:
    if not isinstance(value, Mapping):
        problems.append(f"{where}: a rule must be a table")
        return None
    unknown = sorted(set(value) - {"tools", "action", "args", "reason"})
    if unknown:
        problems.append(f"{where}: unknown key(s) {', '.join(unknown)}")
    before = len(problems)
    tools = parse_selectors(value.get("tools"), f"{where}.tools", problems)
    action = value.get("action")
    if action not in ACTIONS:
        problems.append(f"{where}.action: must be one of {', '.join(ACTIONS)}, got {action!r}")
    args = parse_args(value["args"], f"{where}.args", problems) if "args" in value else ()
    reason = value.get("reason", "")
    if not isinstance(reason, str):
        problems.append(f"{where}.reason: must be a string")
    if len(problems) > before or action not in ACTIONS:
        return None
    verdict: Verdict = action
    return Rule(tools, verdict, args, reason, where)


@dataclass(frozen=True, slots=True)
class LevelVerdict:
    verdict: Verdict
    reason: str
    rule: Rule | None = None


@dataclass(frozen=True, slots=True)
class Level:
    """One level of the chain: its rules and what it says when none matches."""

    name: str
    rules: tuple[Rule, ...] = ()
    default: Verdict = "pass"
    sources: tuple[str, ...] = field(default=())

    @property
    def empty(self) -> bool:
        return not self.rules and self.default == "pass"

    def judge(self, tool: ToolFacts, args: Mapping[str, Any]) -> LevelVerdict:
        """The strictest matching rule, else the default."""
        best: Rule | None = None
        for rule in self.rules:
            if rule.matches(tool, args) and (best is None or RANK[rule.action] > RANK[best.action]):
                best = rule
        if best is not None:
            why = best.reason or f"rule {best.describe()}"
            return LevelVerdict(best.action, why, best)
        if self.default != "pass":
            return LevelVerdict(self.default, f"{self.name} default: {self.default}")
        return LevelVerdict("pass", "no rule matched" if self.rules else "no rules")

    def merged(self, other: Level) -> Level:
        """Both levels' rules; the stricter default."""
        default = self.default if RANK[self.default] >= RANK[other.default] else other.default
        return Level(self.name, self.rules + other.rules, default, self.sources + other.sources)

    def restricting(self) -> Level:
        """This level with its allows turned into passes: it can only restrict."""
        rules = tuple(
            Rule(r.tools, "pass", r.args, r.reason, r.source) if r.action == "allow" else r
            for r in self.rules
        )
        default: Verdict = "pass" if self.default == "allow" else self.default
        return Level(self.name, rules, default, self.sources)

    def predicates_for(self, tool: ToolFacts) -> Iterator[ArgPredicate]:
        for rule in self.rules:
            if rule.applies_to(tool):
                yield from rule.args


def parse_level(
    value: Any, name: str, where: str, problems: list[str], *, allowlist: bool = False
) -> Level:
    """A level from ``{default = ..., rules = [...]}`` (a node: ``{allow = [...]}`` too)."""
    if not isinstance(value, Mapping):
        problems.append(f"{where}: must be a table")
        return Level(name)
    keys = {"default", "rules"} | ({"allow"} if allowlist else set())
    unknown = sorted(set(value) - keys)
    if unknown:
        problems.append(f"{where}: unknown key(s) {', '.join(unknown)}")
    default = value.get("default", "pass")
    if default not in ACTIONS:
        problems.append(f"{where}.default: must be one of {', '.join(ACTIONS)}, got {default!r}")
        default = "deny"
    raw_rules = value.get("rules", [])
    if not isinstance(raw_rules, list):
        problems.append(f"{where}.rules: must be a list of rules")
        raw_rules = []
    rules = [parse_rule(r, f"{where}.rules[{i}]", problems) for i, r in enumerate(raw_rules)]
    kept = [r for r in rules if r is not None]
    if allowlist and "allow" in value:
        listed = parse_selectors(value["allow"], f"{where}.allow", problems, empty=True)
        kept.insert(0, Rule(listed, "pass", (), f"listed in the {where} allowlist", where))
        default = "deny"
    return Level(name, tuple(kept), default, (where,))


def sample_arguments(predicates: Sequence[ArgPredicate], limit: int) -> list[dict[str, Any]] | None:
    """Argument sets that reach every combination of these predicates' outcomes.

    One representative per class of values: each value a predicate names, a child path of
    each prefix, single and paired programs, a value none of them names, and the
    argument left out. None when the combinations would exceed ``limit``.
    """
    by_path: dict[str, list[Any]] = {}
    for p in predicates:
        values = by_path.setdefault(p.path, [_MISSING, "tooldeck-other-value"])
        for v in p.samples():
            if not any(type(v) is type(w) and v == w for w in values if w is not _MISSING):
                values.append(v)
    total = 1
    for values in by_path.values():
        total *= len(values)
        if total > limit:
            return None
    combos: list[dict[str, Any]] = [{}]
    for path, values in by_path.items():
        combos = [_with(c, path, v) for c in combos for v in values]
    return combos


def _with(args: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    if value is _MISSING:
        return args
    out = _deep_copy(args)
    node = out
    parts = path.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[parts[-1]] = value
    return out


def _deep_copy(value: dict[str, Any]) -> dict[str, Any]:
    return {k: _deep_copy(v) if isinstance(v, dict) else v for k, v in value.items()}
