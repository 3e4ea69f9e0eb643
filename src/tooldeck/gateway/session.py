"""One client session of the gateway: what it lists, and how its calls run.

Each client connection gets a :class:`GatewaySession` with a random id, its own policy
state (:class:`~tooldeck.policy.SessionPolicy`: approve-always grants, the audit log
``<state>/<id>.audit.jsonl``), its own offload store (so ``recall_tool_result`` reads
only this session's results; they are removed when the session ends) and its own
evidence record (``<state>/<id>.calls.jsonl``).

Listed: the gateway's tools (``tool_search`` and ``call_tool`` while some tools are
deferred, ``recall_tool_result``), the core tools, then the tools this session found with
``tool_search`` (it answers only tools above the index's relevance floor) or called by
name, in the order first listed, while their server serves them: at most
:data:`MAX_FOUND`; past that the least recently used one (found or called) is dropped,
and the client is told with ``list_changed``. A dropped tool is still called by its name
(the gateway knows every tool), which lists it again. Every call, whatever its name
(``call_tool`` is unwrapped first, so the policy judges the real tool), goes through
one :class:`~tooldeck.dispatch.Dispatcher`: validation, the policy chain, approvals,
the upstream call, then the result hooks: evidence first (the complete upstream
result), then offload and the hard guard; last, a structured result too big to go along
says so (:func:`.wire.fit_structure`).
"""

from __future__ import annotations

import itertools
import logging
import secrets
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field

from ..approvals import ApprovalAnswer, ApprovalRequest, Approver, arguments_json
from ..arguments import validate_arguments
from ..assembly import Toolset
from ..builtin._common import NO_HOME
from ..context import ToolContext
from ..dispatch import Dispatcher, unknown_tool_message
from ..errors import ArgumentError
from ..offload import RECALL_TOOL_NAME, OffloadStore
from ..policy import GrantStore, Policy, SessionPolicy
from ..result import ToolResult
from ..search import tool_search_tool
from ..telemetry.settings import active as telemetry_active
from ..tools import Tool
from ..transcript import ToolCall
from .catalog import Catalog, CatalogView
from .evidence import EvidenceLog
from .native import gateway_turn
from .wire import fit_structure, listed_tool

__all__ = ["remember"]

_log = logging.getLogger("tooldeck.gateway")
SEARCH_TOOL_NAME = "tool_search"
CALL_TOOL_NAME = "call_tool"
_NAME_SHOWN = 120
_OWN_NAMES = frozenset({SEARCH_TOOL_NAME, CALL_TOOL_NAME, RECALL_TOOL_NAME})
MAX_FOUND = 16
"""The most tools a session lists beyond the gateway's and the core tools (about 4,000
tokens of listing for typical MCP tools); the least recently used goes first."""
_WITHOUT_HOME = (
    " (the gateway was started without --home, so tooldeck's file tools refuse every "
    "call; tell the user, who can restart tooldeck serve with --home DIR)"
)


class CallToolParams(BaseModel):
    """Arguments of ``call_tool``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        min_length=1,
        max_length=200,
        description="The exact name of a tool that tool_search returned.",
    )
    arguments: dict[str, Any] = Field(
        default_factory=dict, description="The tool's arguments, as its schema describes them."
    )


def _call_tool_tool() -> Tool:
    # the gateway unwraps call_tool before dispatching: this runs only if it is called twice
    def routed(params: CallToolParams, ctx: ToolContext) -> ToolResult:
        return ToolResult.error("call_tool cannot call call_tool.")

    return Tool.from_model(
        CallToolParams,
        name=CALL_TOOL_NAME,
        description=(
            "Call a tool that tool_search found, by its exact name, with its arguments. "
            "Use it when the found tool is not in your tool list yet."
        ),
        execute=routed,
        read_only=True,
    )


_CALL_TOOL = _call_tool_tool()
_SEARCH_DESCRIPTION = (
    "Search the {count} tools of the connected services that are not listed yet, by what "
    "you need to do. One short query per capability; for several, pass a list "
    "(['search issues', 'send message']). Returns the best matches' names and one-line "
    "descriptions. The tools found are added to your tool list; if your tool list does "
    "not update, call them with call_tool(name, arguments)."
)


def remember(loaded: dict[str, None], used: dict[str, None], names: list[str], limit: int) -> None:
    """``names`` were found or called now (see :meth:`GatewaySession._use`): added to
    ``loaded`` (listed order) and made the most recently used in ``used`` (least recently
    used first), the first of them the most recent; past ``limit`` the least recently used
    go from both. Also how a shared store merges two processes' uses
    (:mod:`.session_store`)."""
    for name in names:
        loaded.setdefault(name, None)
    for name in reversed(names):  # of one search's finds, its best last, so kept
        used.pop(name, None)
        used[name] = None
    while len(used) > limit:
        oldest = next(iter(used))
        del used[oldest]
        loaded.pop(oldest, None)


def _short(name: str) -> str:
    return name if len(name) <= _NAME_SHOWN else name[:_NAME_SHOWN] + "…"


class GatewaySession:
    """The state of one client session. See the module docstring."""

    _ids = itertools.count(1)

    def __init__(
        self,
        catalog: Catalog,
        policy: Policy,
        state: Path | None,
        *,
        offload_tokens: int = 15_000,
        guard_tokens: int = 25_000,
        home: Path | None = None,
        session_id: str | None = None,
        grants: GrantStore | None = None,
    ) -> None:
        # a session shared by several gateway processes (:mod:`.shared`) comes with its id
        # and its grants (kept in the shared store, not in a file)
        self.id = session_id or "gw-" + secrets.token_hex(8)
        self.catalog = catalog
        self.turn = gateway_turn(self.id, home)  # what tooldeck's own tools run with
        self.policy = SessionPolicy(
            policy, session_id=self.id, directory=state, home=home, grants=grants
        )
        if state is None:
            self.store = OffloadStore("/dev/null", self.id, threshold_tokens=0)
        else:
            self.store = OffloadStore(
                state, self.id, threshold_tokens=offload_tokens, guard_tokens=guard_tokens
            )
        self.evidence = EvidenceLog(
            state / f"{self.id}.calls.jsonl" if state else None, self.id, self.policy.audit
        )
        self.max_found = MAX_FOUND
        self.loaded: dict[str, None] = {}  # client names found or called, in listed order
        self._used: dict[str, None] = {}  # the same names, least recently used first
        self._calls = itertools.count(1)
        self._cache: tuple[CatalogView, Tool, Toolset] | None = None
        self._kept: tuple[tuple[object, ...], Dispatcher] | None = None  # :meth:`_dispatcher`
        self._judged: set[int] = set()  # the calls the policy judged, while they run
        # the approver of calls without progress, and what it was made for (GatewayServer)
        self.asker_kept: tuple[tuple[object, ...], tuple[Approver, str]] | None = None
        self.on_use: Callable[[list[str]], None] | None = None  # told of each _use
        self.keep_results = False  # a shared session's results outlive this process's hold
        self.call_prefix = self.id  # shared: this process's own, so call ids never collide

    def close(self) -> None:
        """The session ended: its stored results go (audit log and evidence record stay)."""
        self.evidence.close()
        self.policy.audit.close()
        if self.keep_results:
            return
        try:
            self.store.cleanup()
        except OSError as exc:
            _log.warning("the stored results of %s were not removed: %s", self.id, exc)

    def restore_found(self, loaded: list[str], used: list[str]) -> None:
        """Hold these found tools (listed order; least recently used first), kept
        elsewhere (:mod:`.shared`)."""
        self._used = dict.fromkeys(n for n in used if n in loaded)
        self.loaded = dict.fromkeys(n for n in loaded if n in self._used)

    # -- the tools of this session ------------------------------------------------------
    def _own(self, view: CatalogView) -> tuple[Tool, Toolset]:
        cached = self._cache
        if cached is not None and cached[0] is view:
            return cached[1], cached[2]

        def found(names: list[str]) -> None:
            self._use(view, names)

        deferred = len(view.tools) - len(view.core)
        search = tool_search_tool(
            view.index, found, description=_SEARCH_DESCRIPTION.format(count=deferred), floor=True
        )
        toolset = Toolset([*view.tools.values(), search, _CALL_TOOL, self.store.recall_tool])
        self._cache = (view, search, toolset)
        return search, toolset

    def _use(self, view: CatalogView, names: list[str]) -> None:
        """``names`` (tools of ``view``) were found or called now: listed (after those
        listed already, in this order), the first of them the most recently used; the
        least recently used beyond :attr:`max_found` are dropped. Core tools are always
        listed, and not counted."""
        names = [n for n in names if n in view.tools and n not in view.core]
        remember(self.loaded, self._used, names, self.max_found)
        if names and self.on_use is not None:
            self.on_use(names)

    def _entries(self, view: CatalogView) -> list[tuple[str, Tool, bool]]:
        """``(client name, tool, the gateway's own)`` of what this session lists."""
        out: list[tuple[str, Tool, bool]] = []
        # while servers start, their tools are still to be found (not with --core '*')
        searching = "*" not in self.catalog.core and self.catalog.starting()
        if len(view.tools) > len(view.core) or searching:
            search, _ = self._own(view)
            out.append((SEARCH_TOOL_NAME, search, True))
            out.append((CALL_TOOL_NAME, _CALL_TOOL, True))
        out.append((RECALL_TOOL_NAME, self.store.recall_tool, True))
        names = [*view.core, *(n for n in self.loaded if n in view.tools and n not in view.core)]
        out.extend((n, view.tools[n], False) for n in names)
        return out

    def listed(
        self, view: CatalogView | None = None, *, protocol: str | None = None
    ) -> list[types.Tool]:
        """What ``tools/list`` answers this session now, to a client of ``protocol`` (the
        negotiated MCP version: it decides whether output schemas are listed)."""
        entries = self._entries(view or self.catalog.view())
        return [listed_tool(n, tool, own=own, protocol=protocol) for n, tool, own in entries]

    def listing_state(self) -> tuple[object, ...]:
        """Cheap to take (once before and once after each call); equal while what
        :meth:`listed` answers stays the same: the catalog's view, whether servers are
        still starting (the search tools are listed meanwhile), the tools found."""
        searching = "*" not in self.catalog.core and self.catalog.starting()
        return (self.catalog.view(), searching, tuple(self.loaded))

    def listing_key(self) -> tuple[tuple[str, int], ...]:
        """Changes whenever the listing may have: a tool added or gone, or re-listed by its
        server (a reconnect, a list_changed upstream: new tool objects, maybe new schemas)."""
        return tuple((name, id(tool)) for name, tool, _ in self._entries(self.catalog.view()))

    # -- calls ----------------------------------------------------------------------------
    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,
        asker: Approver,
        *,
        who: str = "mcp-client-user",
        call_id: str | None = None,
        answers: Mapping[str, ApprovalAnswer] | None = None,
        protocol: str | None = None,
    ) -> ToolResult:
        """Run one client call through the dispatcher; every failure is an error result.

        Every call leaves a line in the audit log: the policy's decision, or, for a call
        that never reaches the policy (an unknown tool, invalid arguments), one line
        saying so (decision ``unknown`` or ``invalid``, level ``gateway``).

        An ``asker`` that cannot answer now raises
        :class:`~tooldeck.approvals.PendingApproval` (nothing of the call has run); the
        call is finished later under the same ``call_id`` with the human's ``answers``
        (by call id), judged by the policy again (:mod:`.input_required`).

        ``protocol``: the client's MCP version; a structured result too big to go along
        to such a client says so (:func:`.wire.fit_structure`), within the guard.
        """
        args: Any = dict(arguments or {})
        if name == CALL_TOOL_NAME:
            try:
                inner = validate_arguments(_CALL_TOOL, args).params
            except ArgumentError:
                pass  # dispatched as it is: the dispatcher says what is wrong, once
            else:
                assert isinstance(inner, CallToolParams)
                if inner.name != CALL_TOOL_NAME:  # call_tool(call_tool): its own error
                    name, args = inner.name, inner.arguments
        view = self.catalog.view()
        tool = view.tools.get(name) if name not in _OWN_NAMES else None
        if tool is None:  # not served right now, or one of the gateway's own tools
            tool = await self._resolve(name)
            view = self.catalog.view()
        _, toolset = self._own(view)
        if tool is not None and view.tools.get(tool.name) is tool:
            self._use(view, [tool.name])  # an upstream (or native) tool: used now
        if tool is None:
            toolset = Toolset()  # an unknown name runs nothing, whatever it is
        dispatcher = self._dispatcher(toolset, asker, who)
        call_id = call_id or f"{self.call_prefix}-{next(self._calls)}"
        call = ToolCall(call_id, tool.name if tool else _short(name), args)
        try:
            outcome = await dispatcher.dispatch([call], answers=answers)
            judged = id(call) in self._judged  # (the call is held: its id is its own)
        finally:
            self._judged.discard(id(call))
        result = outcome.outputs[0].result
        if tool is None:
            result = ToolResult.error(self._unknown(name), details=result.details)
        elif result.is_error and self.turn.home is None and NO_HOME in result.text():
            result = ToolResult.error(result.text() + _WITHOUT_HOME, details=result.details)
        fitted = fit_structure(result, tool, protocol, limit=self.store.guard_tokens)
        if fitted is not result:  # one line more: still within the guard
            result = self.store.guard(fitted)
        if not judged:
            self.policy.audit.record(
                session_id=self.id,
                call_id=call.call_id,
                tool=call.name,
                args=args,
                decision="invalid" if tool else "unknown",
                level="gateway",
                reason=result.text()[:500],
            )
        return result

    def _judge(self, tool: Tool, params: Any, call: ToolCall) -> Any:
        """The dispatcher's policy hook: the session's policy, noting that ``call`` was
        judged (a call never judged gets its own audit line in :meth:`call`)."""
        self._judged.add(id(call))
        return self.policy(tool, params, call)

    def _dispatcher(self, toolset: Toolset, asker: Approver, who: str) -> Dispatcher:
        """The dispatcher of a call: made again only when what it runs with changed
        (the toolset, the approver, who answers, the telemetry configured)."""
        telemetry = telemetry_active()
        key = (toolset, asker, who, telemetry)
        kept = self._kept
        if kept is not None and all(a is b for a, b in zip(kept[0], key, strict=True)):
            return kept[1]
        dispatcher = Dispatcher(
            toolset,
            session_id=self.id,
            turn=self.turn,
            policy=self._judge,
            approver=self.policy.approver(asker, who=who),
            result_hooks=(self.evidence.hook, self.store.hook),
            timeout=None,  # each upstream server's own timeout applies
        )
        self._kept = (key, dispatcher)
        return dispatcher

    def _unknown(self, name: str) -> str:
        view = self.catalog.view()
        known = [t.name for t in self.listed(view)] + list(view.tools)
        message = unknown_tool_message(_short(name), list(dict.fromkeys(known)))
        down = self.catalog.down()
        if down:
            message += " Servers not serving now: " + "; ".join(down) + "."
        return message

    def gave_up(self, request: ApprovalRequest, why: str) -> None:
        """An approval wait ended without an answer (the call was cancelled): audited."""
        value = arguments_json(request.params)
        self.policy.audit.record(
            session_id=self.id,
            call_id=request.call.call_id,
            tool=request.tool.name,
            args=dict(value) if isinstance(value, Mapping) else {},
            decision="deny",
            level="approval",
            reason=why,
        )

    async def _resolve(self, name: str) -> Tool | None:
        """The tool a client name means; waits (bounded) for servers still starting, and
        for its server to come back."""
        view = self.catalog.view()
        if name not in view.tools and name != RECALL_TOOL_NAME and self.catalog.starting():
            await self.catalog.started()  # a search, or a tool of a server not up yet
            view = self.catalog.view()
        if name == SEARCH_TOOL_NAME and len(view.tools) > len(view.core):
            return self._own(view)[0]
        if name == RECALL_TOOL_NAME:
            return self.store.recall_tool
        if name == CALL_TOOL_NAME:
            return _CALL_TOOL
        tool = view.tools.get(name)
        if tool is not None:
            return tool
        origin = self.catalog.source.lookup(name)
        if origin is None:
            return None
        await self.catalog.source.refresh([origin[0]])  # reconnects a server that dropped
        return self.catalog.view().tools.get(name)
