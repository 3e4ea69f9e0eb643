"""Rules: which tools a rule is about (selectors) and which arguments (predicates).

A **selector** names tools: an exact name (``write_file``), a glob (``read_*``,
``mcp__github__*``), a namespace (``ns:github``: the tool's namespace, or its MCP
server) or a tier (``tier:WRITE``; the effective tier, after the policy's own marks).

A **predicate** tests one argument of the validated call (``path``, or a dotted path
``options.mode``) with structured operators, never a regular expression over a shell
string:

- ``equals = X``: the argument equals X;
- ``in = [X, Y]``: the argument is one of these;
- ``prefix = "docs/"``: a path under this directory of the agent's home, judged on the
  path the file tools will touch (:mod:`tooldeck._paths`: whitespace stripped, ``~`` is
  the home, absolute paths accepted, symbolic links resolved). A path that cannot be
  resolved or leaves the home, and a directory that contains the prefix (a listing or
  a search of it reaches inside), are uncertain. Without a home (no ``home`` in the
  context) the path is judged as text: absolute paths and paths that climb out with
  ``..`` are uncertain, and links are not seen;
- ``domain = ["example.com"]``: the host of a URL (or a bare host name, or every one of
  a list of them) is one of these domains or a subdomain of one; a value with no host
  is uncertain. ``web_fetch`` judges every redirect hop with the rules on its ``url``,
  so a domain rule holds for the host the page finally comes from;
- ``uri = ["file:///etc/*"]``: the argument, read as a URI (an MCP resource's), matches
  one of these globs (:mod:`._uris`: scheme and host lower-cased, the path's escapes
  decoded; ``.`` / ``..`` or empty segments, backslashes and double escapes are
  uncertain);
- ``program = ["git", "ls"]``: every command of a bash command line runs one of these
  programs (:mod:`._shell` reads the line as bash does, and calls anything it cannot
  read plainly uncertain: quoting or expansion in a command word, substitutions,
  compound commands, launchers such as ``sudo`` or ``env`` that are not listed...).

Predicates answer True, False or **uncertain** (None): a value of the wrong type, a
path or command line that cannot be judged exactly. An ``allow`` rule needs a certain
match; a ``deny`` or ``ask`` rule also matches when uncertain. So an unclear call is
never let through by an allow rule, and never escapes a deny rule.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal, TypeAlias
from urllib.parse import urlsplit

from .._paths import PathRefused, home_path, home_text, resolve_home, resolve_in_home
from ..approvals import Verdict
from ..tools import TIERS, Tier
from ._shell import runs_only
from ._uris import uri_matches, uri_samples

__all__ = [
    "ACTIONS",
    "RANK",
    "Action",
    "ArgPredicate",
    "ToolFacts",
    "parse_args",
    "parse_level",
    "parse_rule",
    "parse_selectors",
    "path_under",
    "sample_arguments",
]

Action: TypeAlias = Literal["allow", "deny", "ask"]
ACTIONS: tuple[Verdict, ...] = ("allow", "deny", "ask", "pass")
RANK: dict[str, int] = {"pass": 0, "allow": 1, "ask": 2, "deny": 3}
"""Strictness: when several verdicts meet, the highest rank wins (deny > ask > allow)."""

Tri: TypeAlias = bool | None
_MISSING = object()
_GLOB = frozenset("*?[")


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
    # what ``matches`` tests, worked out once (a policy's selectors are judged on every
    # call): the kind, and the compiled glob (``fnmatch.fnmatchcase``'s own test)
    _kind: str = field(init=False, repr=False, compare=False)
    _glob: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        kind, text = self.kind, self.text
        glob = None
        if kind == "glob":
            glob = re.compile(fnmatch.translate(text))
        elif kind == "ns":
            glob = re.compile(fnmatch.translate(text[3:]))
        object.__setattr__(self, "_kind", kind)
        object.__setattr__(self, "_glob", glob)

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
        kind = self._kind
        if kind == "name":
            return tool.name == self.text
        if kind == "tier":
            return tool.tier == self.text[5:]
        glob = self._glob
        assert glob is not None
        if kind == "glob":
            return glob.match(tool.name) is not None
        return any(
            value is not None and glob.match(value) is not None
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
def _fold(part: str) -> str:
    return unicodedata.normalize("NFC", part).casefold()


def _exists(path: PurePosixPath, fs: bool) -> bool:
    return fs and os.path.lexists(path)


def _same_file(a: PurePosixPath, b: PurePosixPath) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def _relation(target: PurePosixPath, base: PurePosixPath, home: PurePosixPath, fs: bool) -> Tri:
    """Is ``target`` under ``base``? Both absolute and normal (resolved when ``fs``).

    True also when a directory on the way is ``base`` under another name (a
    case-insensitive file system, a bind mount); uncertain when ``target`` contains
    ``base`` (a walk of it reaches inside) or when the two differ only by case or
    Unicode form and the file system cannot tell whether that is one place.
    """
    if target == base or target.is_relative_to(base):
        return True
    if base.is_relative_to(target):
        return None
    if fs and os.path.lexists(base):
        inside = [p for p in (target, *target.parents) if p == home or p.is_relative_to(home)]
        if any(_same_file(p, base) for p in inside):
            return True
        above = [q for q in (base, *base.parents) if q != home and q.is_relative_to(home)]
        if any(_same_file(target, q) for q in above):
            return None
    n = min(len(target.parts), len(base.parts))
    if [_fold(x) for x in target.parts[:n]] == [_fold(x) for x in base.parts[:n]]:
        a, b = PurePosixPath(*target.parts[:n]), PurePosixPath(*base.parts[:n])
        if _exists(a, fs) and _exists(b, fs):
            return False  # both there, and not the same place (checked above)
        return None
    return False


def _glob_root(text: str) -> str | None:
    """The literal directory before the first glob component (what a search walks)."""
    parts = text.split("/")
    for i, part in enumerate(parts):
        if any(c in _GLOB for c in part):
            return "/".join(parts[:i]) or ("/" if text.startswith("/") else ".")
    return None


def path_under(value: str, prefix: str, home: Path | None) -> Tri:
    """Is the path a file tool would touch for ``value`` under ``prefix``?

    ``home`` is the agent's home directory; without it the path is judged as text (see
    the module docstring). A path with glob characters is judged both as written and
    as the directory a search would walk; the answers must agree.
    """
    try:
        text = home_text(value)
        prefix_text = home_text(prefix)
    except PathRefused:
        return None
    readings = [text]
    root = _glob_root(text)
    if root is not None:
        readings.append(root)
    if home is None:
        base_text = posixpath.normpath(prefix_text)
        if base_text.startswith("/") or base_text == ".." or base_text.startswith("../"):
            return None
        virtual = PurePosixPath("/")
        base = virtual / base_text
        answers: list[Tri] = []
        for reading in readings:
            normal = posixpath.normpath(reading)
            if normal.startswith("/") or normal == ".." or normal.startswith("../"):
                return None
            answers.append(_relation(virtual / normal, base, virtual, False))
    else:
        home = resolve_home(home)
        resolved_home = PurePosixPath(home)
        base = PurePosixPath(os.path.realpath(home_path(home, prefix_text)))
        answers = []
        for reading in readings:
            try:
                target = PurePosixPath(resolve_in_home(home, reading))
            except PathRefused:
                return None
            answers.append(_relation(target, base, resolved_home, True))
    return answers[0] if all(a is answers[0] for a in answers) else None


@dataclass(frozen=True, slots=True)
class ArgPredicate:
    """Tests on one argument, all of which must hold (see the module docstring)."""

    path: str
    equals: Any = _MISSING
    one_of: tuple[Any, ...] | None = None
    prefix: str | None = None
    programs: frozenset[str] | None = None
    domains: tuple[str, ...] | None = None
    uris: tuple[str, ...] | None = None

    def lookup(self, args: Mapping[str, Any]) -> Any:
        value: Any = args
        for part in self.path.split("."):
            if not isinstance(value, Mapping) or part not in value:
                return _MISSING
            value = value[part]
        return value

    def test(self, args: Mapping[str, Any], home: Path | None = None) -> Tri:
        """True, False or uncertain for these arguments (``home``: the agent's home)."""
        value = self.lookup(args)
        if value is _MISSING:
            return False
        results: list[Tri] = []
        if self.equals is not _MISSING:
            results.append(_same(value, self.equals))
        if self.one_of is not None:
            results.append(any(_same(value, v) for v in self.one_of))
        if self.prefix is not None:
            results.append(self._prefix(value, home))
        if self.programs is not None:
            results.append(self._programs(value))
        if self.domains is not None:
            results.append(_on_domains(value, self.domains))
        if self.uris is not None:
            results.append(uri_matches(value, self.uris))
        return all_of(results)

    def _prefix(self, value: Any, home: Path | None) -> Tri:
        if not isinstance(value, str) or self.prefix is None:
            return None
        return path_under(value, self.prefix, home)

    def _programs(self, value: Any) -> Tri:
        if not isinstance(value, str) or self.programs is None:
            return None
        return runs_only(value, self.programs)

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
        if self.domains is not None:
            tests.append(f"on {' or '.join(self.domains)}")
        if self.uris is not None:
            tests.append(f"matches {' or '.join(self.uris)}")
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
            yield from _ancestors(base)  # uncertain: a walk of them reaches the prefix
            yield "../tooldeck-sample"  # uncertain for every prefix
        if self.programs is not None:
            words = sorted(self.programs)
            yield from words
            yield from (f"{a}; {b}" for a in words for b in words if a < b)
            yield "$(tooldeck-sample)"  # uncertain for every program list
        if self.domains is not None:
            for name in self.domains:
                yield f"https://{name}/"
                yield f"https://tooldeck-sample.{name}/"
            yield "https://tooldeck-sample.invalid/"
            yield "not a url"  # uncertain
        if self.uris is not None:
            yield from uri_samples(self.uris)


def _host_of(value: str) -> str | None:
    text = value.strip()
    if "://" in text:
        try:
            host = urlsplit(text).hostname
        except ValueError:
            return None
    else:
        host = text.split("/", 1)[0].rsplit("@", 1)[-1].split(":", 1)[0]
    if not host or any(c.isspace() for c in host):
        return None
    try:
        return host.encode("idna").decode("ascii").lower().rstrip(".")
    except UnicodeError:
        return host.lower().rstrip(".")


def _on_domains(value: Any, domains: tuple[str, ...]) -> Tri:
    """True / False / uncertain: ``value``'s host(s) among ``domains`` or their subdomains."""
    values = value if isinstance(value, list) else [value]
    if not values or not all(isinstance(v, str) for v in values):
        return None
    answers: list[Tri] = []
    for item in values:
        host = _host_of(item)
        if host is None:
            answers.append(None)
        else:
            answers.append(any(host == d or host.endswith("." + d) for d in domains))
    if all(a is True for a in answers):
        return True
    if all(a is False for a in answers):
        return False
    return None


def _ancestors(path: str) -> Iterator[str]:
    parent = posixpath.dirname(path)
    while parent and parent not in ("/", "."):
        yield parent
        parent = posixpath.dirname(parent)


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


_OPS = {"equals", "in", "prefix", "program", "domain", "uri"}


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
        if prefix is not None and (
            not isinstance(prefix, str) or not prefix.strip() or "\x00" in prefix
        ):
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
        domain = tests.get("domain")
        if isinstance(domain, str):
            domain = [domain]
        names: tuple[str, ...] | None = None
        if domain is not None:
            hosts = [_host_of(d.removeprefix("*.")) if isinstance(d, str) else None for d in domain]
            if not isinstance(domain, list) or not domain or any(h is None for h in hosts):
                problems.append(f"{here}: 'domain' must be a domain name or a list of them")
                continue
            names = tuple(h for h in hosts if h is not None)
        uri = tests.get("uri")
        if isinstance(uri, str):
            uri = [uri]
        if uri is not None and (
            not isinstance(uri, list)
            or not uri
            or not all(isinstance(u, str) and u.strip() and ":" in u for u in uri)
        ):
            problems.append(f"{here}: 'uri' must be a URI pattern or a list of them")
            continue
        predicates.append(
            ArgPredicate(
                path,
                tests.get("equals", _MISSING),
                tuple(one_of) if one_of is not None else None,
                prefix,
                frozenset(posixpath.basename(p) or p for p in program) if program else None,
                names,
                tuple(u.strip() for u in uri) if uri else None,
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

    def test(self, tool: ToolFacts, args: Mapping[str, Any], home: Path | None = None) -> Tri:
        """True / False / uncertain: does this rule match this call?"""
        if not self.applies_to(tool):
            return False
        return all_of(p.test(args, home) for p in self.args)

    def matches(self, tool: ToolFacts, args: Mapping[str, Any], home: Path | None = None) -> bool:
        """An allow (or pass) rule needs a certain match; deny and ask also take uncertain."""
        outcome = self.test(tool, args, home)
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

    def judge(
        self, tool: ToolFacts, args: Mapping[str, Any], home: Path | None = None
    ) -> LevelVerdict:
        """The strictest matching rule, else the default."""
        best: Rule | None = None
        for rule in self.rules:
            if rule.matches(tool, args, home) and (
                best is None or RANK[rule.action] > RANK[best.action]
            ):
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
