"""The policy chain: six levels, tiers, and one decision function.

Levels, in order: ``profile``, ``organization``, ``mode``, ``agent``, ``node`` (a
node-scope allowlist) and ``delegation`` (sub-agent auto-approval). Each level says
allow, deny, ask or pass for a call. How they combine:

1. in a headless session the headless denylist is checked first (``delegate_task``,
   every DANGEROUS tool, and whatever the policy lists): a match is a deny;
2. the five rule levels each judge the call; the strictest verdict wins
   (deny > ask > allow), and the first level that gave it is the deciding level. When
   every level passes, the tier decides: STANDARD is allowed, WRITE and DANGEROUS ask;
3. ``delegation``: in a sub-agent, an ask on a STANDARD tool the parent auto-approves
   becomes allow. WRITE and DANGEROUS still go to the human. Not in a headless session:
   there the parent could not run it either, and a child never gets more;
4. a DANGEROUS tool is never allowed without a human: an allow becomes ask;
5. an ask that matches an approve-always grant of this session becomes allow
   (never for DANGEROUS);
6. in a headless session an ask becomes deny: nobody can answer it.

A deny anywhere wins over everything. The decision (a
:class:`~tooldeck.approvals.PolicyDecision`) carries the trace of every level
consulted. :meth:`Policy.decide` is pure; ``tooldeck.policy.SessionPolicy`` binds
it to a session (mode, agent, node, grants, audit log) for the plan and the dispatcher.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, Protocol

from .._config_files import ConfigFileError, load_json, load_toml
from .._paths import resolve_home
from ..approvals import PolicyDecision, TraceEntry, Verdict
from ..errors import TooldeckError
from ..tools import TIERS, Tier, Tool
from .rules import (
    RANK,
    ArgPredicate,
    Level,
    Selector,
    ToolFacts,
    parse_level,
    parse_selectors,
    sample_arguments,
)

__all__ = []

LEVELS = ("profile", "organization", "mode", "agent", "node", "delegation")
ALWAYS_DANGEROUS: tuple[str, ...] = ("run_bash", "computer")
"""Tools that are DANGEROUS whatever their definition says."""
HEADLESS_DENY: tuple[str, ...] = ("delegate_task", "tier:DANGEROUS")
"""Denied first in every headless session, before the chain."""
TIER_DEFAULT: dict[str, Verdict] = {"STANDARD": "allow", "WRITE": "ask", "DANGEROUS": "ask"}
VISIBILITY_SAMPLES = 4096
_KEYS = {
    "version",
    "dangerous",
    "headless",
    "profile",
    "organization",
    "modes",
    "agents",
    "nodes",
    "delegation",
}


class PolicyError(TooldeckError):
    """A policy file is unusable; ``problems`` lists every reason."""

    def __init__(self, source: str, problems: Sequence[str]):
        self.source = source
        self.problems = tuple(problems)
        listed = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{source}: {len(self.problems)} problem(s) in the policy\n{listed}")


def _rank_tier(tier: str) -> int:
    return TIERS.index(tier) if tier in TIERS else len(TIERS) - 1  # unknown: most careful


def effective_tier(
    tool: Tool | str, hints: Mapping[str, Any] | None = None, *, destructive: Tier = "WRITE"
) -> Tier:
    """A tool's tier raised, never lowered, by untrusted hints (MCP tool annotations).

    ``tool`` is a :class:`Tool` (its defined tier) or a tier name. Only explicit hints
    count: ``readOnlyHint: false`` raises to at least WRITE, ``destructiveHint: true``
    (on a tool not hinted read-only) to at least ``destructive`` (WRITE, or DANGEROUS
    where the user says so). ``readOnlyHint: true`` never lowers anything.
    """
    base = tool.tier if isinstance(tool, Tool) else tool
    tier: Tier = next((t for t in TIERS if t == base), "DANGEROUS")  # unknown: most careful
    if not hints:
        return tier
    floor: Tier = "STANDARD"
    if hints.get("readOnlyHint") is False:
        floor = "WRITE"
    if hints.get("destructiveHint") is True and hints.get("readOnlyHint") is not True:
        floor = destructive if _rank_tier(destructive) > _rank_tier(floor) else floor
    return floor if _rank_tier(floor) > _rank_tier(tier) else tier


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """The session facts the chain reads.

    ``mode``, ``agent`` and ``node`` select the named sections of the policy.
    ``restrictions`` are the sub-agent levels added on the way down (they can only
    restrict). ``subagent`` turns on the delegation level; ``headless`` means no human.
    ``home`` is the agent's home directory (the turn's ``TurnContext.home``): path
    ``prefix`` tests judge the path the file tools will touch in it; without it they
    judge the text only.
    """

    mode: str | None = None
    agent: str | None = None
    node: str | None = None
    headless: bool = False
    subagent: bool = False
    restrictions: tuple[Level, ...] = ()
    home: Path | None = None

    def __post_init__(self) -> None:
        if self.home is not None:
            object.__setattr__(self, "home", resolve_home(self.home))


class GrantLookup(Protocol):
    """What the chain needs from an approve-always store (``tooldeck.policy.GrantStore``)."""

    def match(self, tool: str, args: Mapping[str, Any], home: Path | None = None) -> Any:
        """The grant that covers this call (it has an ``id``), or None."""
        ...

    def predicates_for(self, tool: str) -> Iterable[ArgPredicate]:
        """Every argument predicate of this tool's grants (for visibility)."""
        ...


@dataclass(frozen=True)
class Policy:
    """A loaded policy: the levels' rules and the tool marks. See the module docstring."""

    profile: Level = field(default_factory=lambda: Level("profile"))
    organization: Level = field(default_factory=lambda: Level("organization"))
    modes: Mapping[str, Level] = field(default_factory=dict)
    agents: Mapping[str, Level] = field(default_factory=dict)
    nodes: Mapping[str, Level] = field(default_factory=dict)
    dangerous: tuple[Selector, ...] = ()
    headless_deny: tuple[Selector, ...] = ()
    auto_approve: tuple[Selector, ...] | None = None  # None: every STANDARD tool
    sources: tuple[str, ...] = ()

    # -- loading ------------------------------------------------------------------------
    @classmethod
    def load(cls, *paths: str | Path) -> Policy:
        """Load and merge policy files (TOML, or JSON for ``.json``); no path: no rules."""
        policy = cls()
        for path in paths:
            policy = policy.merged(cls.from_file(path))
        return policy

    @classmethod
    def from_file(cls, path: str | Path) -> Policy:
        path = Path(path).expanduser()
        try:
            data = load_json(path) if path.suffix == ".json" else load_toml(path)
        except OSError as exc:
            raise PolicyError(str(path), [f"cannot read: {exc}"]) from exc
        except ConfigFileError as exc:
            raise PolicyError(str(path), [exc.problem]) from exc
        return cls.from_dict(data, source=str(path))

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "<policy>") -> Policy:
        """A policy from parsed TOML/JSON; raises :class:`PolicyError` listing every problem."""
        problems: list[str] = []
        if not isinstance(data, Mapping):
            raise PolicyError(source, ["the policy must be a table (a JSON object)"])
        unknown = sorted(set(data) - _KEYS)
        if unknown:
            problems.append(
                f"unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(_KEYS))})"
            )
        version = data.get("version", 1)
        if version != 1:
            problems.append(f"version: only version 1 is known, got {version!r}")
        dangerous = (
            parse_selectors(data["dangerous"], "dangerous", problems, empty=True)
            if "dangerous" in data
            else ()
        )
        if any(s.kind == "tier" for s in dangerous):
            problems.append("dangerous: list tools by name, glob or namespace, not by tier")
        headless_deny: tuple[Selector, ...] = ()
        headless = data.get("headless", {})
        if not isinstance(headless, Mapping) or set(headless) - {"deny"}:
            problems.append("headless: must be a table with one key, deny = [tools]")
        elif "deny" in headless:
            headless_deny = parse_selectors(headless["deny"], "headless.deny", problems, empty=True)
        auto: tuple[Selector, ...] | None = None
        delegation = data.get("delegation", {})
        if not isinstance(delegation, Mapping) or set(delegation) - {"auto_approve"}:
            problems.append("delegation: must be a table with one key, auto_approve = [tools]")
        elif "auto_approve" in delegation:
            raw = delegation["auto_approve"]
            auto = parse_selectors(raw, "delegation.auto_approve", problems, empty=True)
        profile = (
            parse_level(data["profile"], "profile", "profile", problems)
            if "profile" in data
            else Level("profile")
        )
        organization = (
            parse_level(data["organization"], "organization", "organization", problems)
            if "organization" in data
            else Level("organization")
        )
        named: dict[str, dict[str, Level]] = {}
        for key, level in (("modes", "mode"), ("agents", "agent"), ("nodes", "node")):
            section = data.get(key, {})
            named[key] = {}
            if not isinstance(section, Mapping):
                problems.append(f"{key}: must be a table of named sections")
                continue
            for name, body in section.items():
                named[key][name] = parse_level(
                    body, level, f"{key}.{name}", problems, allowlist=key == "nodes"
                )
        if problems:
            raise PolicyError(source, problems)
        return cls(
            profile,
            organization,
            named["modes"],
            named["agents"],
            named["nodes"],
            dangerous,
            headless_deny,
            auto,
            (source,),
        )

    def merged(self, other: Policy) -> Policy:
        """Both policies: rules added level by level, marks and lists joined.

        Adding a file never loosens a deny or an ask: the strictest verdict still wins,
        and the stricter default of a level is kept.
        """

        def join(a: Mapping[str, Level], b: Mapping[str, Level]) -> dict[str, Level]:
            out = dict(a)
            for name, level in b.items():
                out[name] = out[name].merged(level) if name in out else level
            return out

        auto = self.auto_approve
        if auto is None:
            auto = other.auto_approve
        elif other.auto_approve is not None:  # both restrict it: what both list
            auto = tuple(s for s in other.auto_approve if s in auto)
        return Policy(
            self.profile.merged(other.profile),
            self.organization.merged(other.organization),
            join(self.modes, other.modes),
            join(self.agents, other.agents),
            join(self.nodes, other.nodes),
            self.dangerous + other.dangerous,
            self.headless_deny + other.headless_deny,
            auto,
            self.sources + other.sources,
        )

    @property
    def auto_selectors(self) -> tuple[Selector, ...]:
        """What a parent auto-approves for its sub-agents (STANDARD tools only)."""
        if self.auto_approve is None:
            return (Selector("tier:STANDARD"),)
        return self.auto_approve

    def selectors(self) -> Iterator[tuple[str, Selector]]:
        """Every tool selector the policy holds, with where it is written
        (``profile.rules[0]``, ``nodes.review``, ``dangerous``...)."""
        levels = (
            self.profile,
            self.organization,
            *self.modes.values(),
            *self.agents.values(),
            *self.nodes.values(),
        )
        for level in levels:
            for rule in level.rules:
                yield from ((rule.source, selector) for selector in rule.tools)
        for where, listed in (
            ("dangerous", self.dangerous),
            ("headless.deny", self.headless_deny),
            ("delegation.auto_approve", self.auto_approve or ()),
        ):
            yield from ((where, selector) for selector in listed)

    # -- tools --------------------------------------------------------------------------
    def facts(self, tool: Tool) -> ToolFacts:
        """What the chain matches on; the tier is :meth:`tier_of`."""
        mcp = getattr(tool, "mcp", None)
        hints = getattr(mcp, "annotations", None)
        tier = effective_tier(tool, hints if isinstance(hints, Mapping) else None)
        server = getattr(mcp, "server", None)
        facts = ToolFacts(
            tool.name, tier, tool.namespace, server if isinstance(server, str) else None
        )
        if tier != "DANGEROUS" and any(s.matches(facts) for s in self._marks):
            return ToolFacts(facts.name, "DANGEROUS", facts.namespace, facts.server)
        return facts

    def tier_of(self, tool: Tool) -> Tier:
        """The effective tier: the definition's, raised by MCP hints and by ``dangerous``."""
        return self.facts(tool).tier

    @cached_property
    def _marks(self) -> tuple[Selector, ...]:
        """What makes a tool DANGEROUS whatever its definition says: the built-in names
        and ``dangerous``. Built once: a policy does not change (a policy file loaded
        again is a new :class:`Policy`)."""
        return (*(Selector(n) for n in ALWAYS_DANGEROUS), *self.dangerous)

    # -- the decision -------------------------------------------------------------------
    def levels(self, ctx: PolicyContext) -> list[tuple[str, Level | None, str]]:
        """The rule levels for ``ctx``: (trace name, level or None, why it is missing)."""
        out: list[tuple[str, Level | None, str]] = [
            ("profile", self.profile, ""),
            ("organization", self.organization, ""),
        ]
        for label, name, table in (
            ("mode", ctx.mode, self.modes),
            ("agent", ctx.agent, self.agents),
        ):
            if name is None:
                out.append((label, None, f"no {label} set"))
            elif name not in table:
                out.append((f"{label} {name}", None, f"no rules for {label} {name!r}"))
            else:
                out.append((f"{label} {name}", table[name], ""))
        for level in ctx.restrictions:
            out.append((level.name, level, ""))
        if ctx.node is None:
            out.append(("node", None, "no node scope"))
        elif ctx.node not in self.nodes:  # fail closed: a scope nobody defined holds nothing
            out.append((f"node {ctx.node}", Level("undefined node", default="deny"), ""))
        else:
            out.append((f"node {ctx.node}", self.nodes[ctx.node], ""))
        return out

    def reads_arguments(self, facts: ToolFacts, ctx: PolicyContext) -> bool:
        """Whether a decision about ``facts`` in ``ctx`` may depend on the call's
        arguments: some rule of ``ctx``'s levels that applies to the tool tests them (an
        ``ask`` also reads them, through the grants). Otherwise :meth:`decide` gives
        every call of the tool that is not asked about the same decision."""
        for _, level, _ in self.levels(ctx):
            if level is not None and any(r.args and r.applies_to(facts) for r in level.rules):
                return True
        return False

    def decide(
        self,
        tool: Tool | ToolFacts,
        args: Mapping[str, Any],
        ctx: PolicyContext | None = None,
        grants: GrantLookup | None = None,
    ) -> PolicyDecision:
        """The decision for calling ``tool`` with (validated, JSON) ``args`` in ``ctx``."""
        ctx = ctx or PolicyContext()
        facts = tool if isinstance(tool, ToolFacts) else self.facts(tool)
        trace: list[TraceEntry] = []
        winner: TraceEntry | None = None

        def weigh(entry: TraceEntry) -> None:
            nonlocal winner
            trace.append(entry)
            if entry.verdict != "pass" and (
                winner is None or RANK[entry.verdict] > RANK[winner.verdict]
            ):
                winner = entry

        if ctx.headless:
            listed = (*(Selector(s) for s in HEADLESS_DENY), *self.headless_deny)
            hit = next((s for s in listed if s.matches(facts)), None)
            weigh(
                TraceEntry(
                    "headless",
                    "deny" if hit else "pass",
                    f"{facts.name} is not available in a headless session (denylist: {hit})"
                    if hit
                    else "not on the headless denylist",
                )
            )
        for name, level, missing in self.levels(ctx):
            if level is None:
                trace.append(TraceEntry(name, "pass", missing))
                continue
            judged = level.judge(facts, args, ctx.home)
            weigh(TraceEntry(name, judged.verdict, judged.reason))
        if winner is None:
            verdict = TIER_DEFAULT[facts.tier]
            # the tier is the decision's (PolicyDecision.tier): said once, by whoever shows it
            winner = TraceEntry(
                "tier",
                verdict,
                "allowed by default" if verdict == "allow" else "approval required by default",
            )
            trace.append(winner)
        decided: TraceEntry = winner
        if decided.verdict == "deny":
            trace.append(TraceEntry("delegation", "pass", "denied before delegation"))
            return PolicyDecision("deny", decided.reason, decided.level, facts.tier, tuple(trace))

        # 3. delegation: a sub-agent's STANDARD asks may be auto-approved by its parent
        if not ctx.subagent:
            trace.append(TraceEntry("delegation", "pass", "not a sub-agent"))
        elif decided.verdict != "ask":
            trace.append(TraceEntry("delegation", "pass", "nothing to approve"))
        elif ctx.headless:
            trace.append(
                TraceEntry("delegation", "pass", "headless: the parent could not run it either")
            )
        elif facts.tier != "STANDARD":
            trace.append(
                TraceEntry("delegation", "pass", f"{facts.tier}: goes to the human, not the parent")
            )
        elif any(s.matches(facts) for s in self.auto_selectors):
            decided = TraceEntry("delegation", "allow", "STANDARD: auto-approved by the parent")
            trace.append(decided)
        else:
            trace.append(TraceEntry("delegation", "pass", "not auto-approved for sub-agents"))

        # 4. DANGEROUS is never allowed without a human
        if facts.tier == "DANGEROUS" and decided.verdict == "allow":
            decided = TraceEntry(
                "tier", "ask", f"DANGEROUS: always a human (the {decided.level} allow needs one)"
            )
            trace.append(decided)

        # 5. approve-always grants of this session
        grant_id: str | None = None
        if decided.verdict == "ask" and facts.tier != "DANGEROUS" and grants is not None:
            grant = grants.match(facts.name, args, ctx.home)
            if grant is not None:
                grant_id = str(getattr(grant, "id", grant))
                decided = TraceEntry("approved-always", "allow", f"approve-always grant {grant_id}")
                trace.append(decided)

        # 6. headless: nobody can answer an ask
        if ctx.headless and decided.verdict == "ask":
            decided = TraceEntry(
                "headless",
                "deny",
                f"{facts.name} needs a human approval ({decided.reason}) and this session is "
                "headless: nobody can approve it",
            )
            trace.append(decided)
        action: Literal["allow", "deny", "ask"] = decided.verdict  # type: ignore[assignment]
        return PolicyDecision(
            action, decided.reason, decided.level, facts.tier, tuple(trace), grant_id
        )

    def denied_for_all(
        self,
        tool: Tool | ToolFacts,
        ctx: PolicyContext | None = None,
        grants: GrantLookup | None = None,
    ) -> bool:
        """True when every call of ``tool`` would be denied in ``ctx``, whatever its arguments.

        The decision depends on the arguments only through the rules' predicates, which
        split each argument's values into a few classes; one representative of each
        class is tried. Past ``VISIBILITY_SAMPLES`` combinations the tool is treated as
        not always denied (it stays visible; the dispatcher still checks every call).
        """
        ctx = ctx or PolicyContext()
        facts = tool if isinstance(tool, ToolFacts) else self.facts(tool)
        predicates: list[ArgPredicate] = []
        for _, level, _ in self.levels(ctx):
            if level is not None:
                predicates.extend(level.predicates_for(facts))
        if grants is not None:
            predicates.extend(grants.predicates_for(facts.name))
        samples = sample_arguments(predicates, VISIBILITY_SAMPLES)
        if samples is None:
            return False
        return all(self.decide(facts, args, ctx, grants).action == "deny" for args in samples)

    def with_restriction(self, ctx: PolicyContext, agent: str) -> PolicyContext:
        """``ctx`` for a sub-agent ``agent``: its own agent rules added as restrictions."""
        own = self.agents.get(agent)
        extra = (own.restricting(),) if own is not None else ()
        renamed = tuple(replace(level, name=f"sub-agent {agent}") for level in extra)
        return replace(ctx, subagent=True, restrictions=ctx.restrictions + renamed)
