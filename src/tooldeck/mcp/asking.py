"""Who answers a server's own requests (elicitation, sampling) right now.

A server asks while the client is doing something for it, almost always while one of its
tools runs: the session that made that call answers, with its protection (the policy
hook and the approver its dispatcher runs with, ``ToolContext.protection``). The source
keeps the calls in flight per server (:class:`InFlight`), and a request is routed
(:func:`answer_routed`) to:

1. **the call it belongs to**, when the protocol links them: over streamable HTTP the
   server sends its request on the response stream of the client's ``tools/call``, and
   the 2026-07-28 era returns it inside the call's own ``input_required`` rounds; either
   way the request is handled in that call's context, where :class:`InFlight` left a
   mark (a context variable) saying which call it is;
2. with no link (stdio before 2026-07-28, a server that asks on its standalone stream):
   **the one session** with calls running on that server (sessions told apart by
   ``ToolContext.session_id``); when calls of more than one session run there, which
   one asked cannot be told, so the request is declined (:data:`AMBIGUOUS`, audited in
   every session running a call there, without the request's content), never guessed;
3. with no call running: the source's own ``approver=`` (no policy), or nobody (the
   request is declined or refused, with why).

A request waiting for its answer ends when the calls it was routed to have all ended (a
session cancelled, a call timed out): it is declined (:data:`ENDED`) at once rather
than left waiting for the server's timeout, and the approver still asking is cancelled.

A server's request arrives on the MCP I/O loop; the session's approver and policy belong
to the loop the session runs on, so they are run there (:meth:`Asker.run`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import anyio

from ..approvals import Approver, PolicyHook, allow_all
from ..context import ToolContext
from ..tools import Tool
from ..transcript import ToolCall
from .naming import PREFIX, exposed_name

__all__ = [
    "AMBIGUOUS",
    "ENDED",
    "Asker",
    "InFlight",
    "Route",
    "answer_routed",
    "current_route",
    "request_call",
    "request_name",
]

_T = TypeVar("_T")
AMBIGUOUS = (
    "a call of another session is running on this server, and the server's request does "
    "not say which call it belongs to: declined rather than guessed"
)
"""Why a request is declined when calls of several sessions run on its server (no link)."""
ENDED = "the call that asked ended before the request was answered"
"""Why a request still waiting is declined once the calls it was routed to ended."""


@dataclass(frozen=True, slots=True)
class Asker:
    """The policy hook and approver that answer a server's request, and their loop."""

    policy: PolicyHook | None  # None: no policy judges (the source's own approver)
    approver: Approver | None  # None: nobody can be asked
    loop: asyncio.AbstractEventLoop | None
    session_id: str = ""

    @property
    def judged(self) -> bool:
        """Whether a policy was configured (``allow_all`` is the dispatcher's no-policy)."""
        return self.policy is not None and self.policy is not allow_all

    def _sessions(self) -> tuple[Any, ...]:
        """The session policies judging (among the judges, or the one whose approver
        answers: a policy hook wrapping a session policy, as the gateway's, hides it)."""
        from ..policy.protection import Protection
        from ..policy.session import PolicyApprover, SessionPolicy

        if self.policy is None:
            return ()
        judges = Protection.of(self.policy).judges
        found = [j for j in judges if isinstance(j, SessionPolicy)]
        if isinstance(self.approver, PolicyApprover):
            found.append(self.approver.policy)
        by_log: dict[int, Any] = {}
        for session in found:  # one per audit log
            by_log.setdefault(id(session.audit), session)
        return tuple(by_log.values())

    def nobody(self) -> str:
        """Why nobody can be asked (there is no approver)."""
        if self.loop is None:
            return "nobody can answer: no session is running a call of this server"
        if any(s.headless for s in self._sessions()):
            return "nobody can answer: this session is headless"
        return "nobody can answer: the session has no approver"

    def audit(self, name: str, params: Any, decision: str, reason: str) -> None:
        """A line in the audit log of the session policy judging (when one does)."""
        from ..approvals import arguments_json

        args = arguments_json(params)
        for session in self._sessions():
            session.audit.record(
                session_id=self.session_id or session.session_id,
                call_id=f"mcp_{uuid.uuid4().hex[:16]}",
                tool=name,
                args=args if isinstance(args, dict) else {},
                decision=decision,
                level="approval",
                reason=reason,
            )

    async def run(self, make: Callable[[], Awaitable[_T]]) -> _T:
        """``make()`` awaited on the asker's loop (from the I/O loop)."""
        here = asyncio.get_running_loop()
        if self.loop is None or self.loop is here or self.loop.is_closed():
            return await make()

        async def wrapped() -> _T:
            return await make()

        coro: Coroutine[Any, Any, _T] = wrapped()
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))


@dataclass(eq=False)
class _Call:
    """One call running on a server: its context (its session) and the loop it runs on."""

    ctx: ToolContext
    loop: asyncio.AbstractEventLoop

    def asker(self, fallback: Approver | None) -> Asker:
        protection = self.ctx.protection
        if protection is not None:
            return Asker(protection.policy, protection.approver, self.loop, self.ctx.session_id)
        return Asker(None, fallback, self.loop, self.ctx.session_id)  # a direct source.call


_calling: ContextVar[_Call | None] = ContextVar("tooldeck.mcp.calling", default=None)
"""The call whose context this is: a server's request handled here belongs to it."""


@dataclass(frozen=True, slots=True)
class Route:
    """Where one server request goes: ``how`` it was told (``exact``: the protocol linked it
    to its call; ``session``: the one session with calls running on the server;
    ``outside``: no call running; ``ambiguous``: calls of several sessions, declined),
    the :class:`Asker` that answers (None when ambiguous), and the calls it waits on."""

    how: Literal["exact", "session", "outside", "ambiguous"]
    asker: Asker | None
    calls: tuple[_Call, ...] = ()
    sessions: tuple[Asker, ...] = ()  # ambiguous: one asker per session running a call


_routed: ContextVar[Route | None] = ContextVar("tooldeck.mcp.routed", default=None)


def current_route() -> Route | None:
    """How the server request being answered was routed (``Route.how``), for an approver
    or a policy hook judging it (they run in its context); None outside one."""
    return _routed.get()


@dataclass(eq=False)
class _Waiting:
    """A request being answered: the calls it was routed to, and how to end it."""

    calls: tuple[_Call, ...]
    scope: anyio.CancelScope
    loop: asyncio.AbstractEventLoop

    def end(self) -> None:
        if self.loop is _running_loop():
            self.scope.cancel()
        else:
            with contextlib.suppress(RuntimeError):  # its loop is closed: nothing waits
                self.loop.call_soon_threadsafe(self.scope.cancel)


class _Running:
    """:meth:`InFlight.running`'s block (a class: no generator to step through)."""

    __slots__ = ("call", "inflight", "token")

    def __init__(self, inflight: InFlight, call: _Call) -> None:
        self.inflight = inflight
        self.call = call

    def __enter__(self) -> None:
        inflight = self.inflight
        with inflight.lock:
            inflight.calls.append(self.call)
        self.token = _calling.set(self.call)

    def __exit__(self, *exc: object) -> None:
        _calling.reset(self.token)
        self.inflight._ended(self.call)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


@dataclass(eq=False)
class InFlight:
    """The calls running on one server (oldest first), and the requests they wait on."""

    calls: list[_Call] = field(default_factory=list)
    waiting: list[_Waiting] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def running(self, ctx: ToolContext, loop: asyncio.AbstractEventLoop) -> _Running:
        """While the block (``with``) runs, a call of ``ctx`` runs on this server; a server
        request handled in the block's context (what the block starts inherits it)
        belongs to it."""
        return _Running(self, _Call(ctx, loop))

    def _ended(self, call: _Call) -> None:
        """``call`` ended: the requests that waited only on calls now ended end too."""
        with self.lock:
            self.calls = [c for c in self.calls if c is not call]
            if not self.waiting:
                return
            left = {id(c) for c in self.calls}
            ended = [w for w in self.waiting if not any(id(c) in left for c in w.calls)]
        for waiting in ended:
            waiting.end()

    def route(self, fallback: Approver | None, loop: asyncio.AbstractEventLoop | None) -> Route:
        """Where a request arriving now goes (see the module docstring); ``fallback``: the
        source's own approver, for a request outside any call."""
        asked = _calling.get()
        with self.lock:
            calls = tuple(self.calls)
        if asked is not None and any(c is asked for c in calls):
            return Route("exact", asked.asker(fallback), (asked,))
        if not calls:
            return Route("outside", Asker(None, fallback, loop))
        latest: dict[str, _Call] = {c.ctx.session_id: c for c in calls}
        if len(latest) == 1:
            (only,) = latest.values()
            return Route("session", only.asker(fallback), calls)
        askers = tuple(c.asker(fallback) for c in latest.values())
        return Route("ambiguous", None, calls, askers)

    @contextlib.contextmanager
    def _held(self, route: Route, scope: anyio.CancelScope) -> Iterator[bool]:
        """While the block runs the request waits on ``route``'s calls: ``scope`` is
        cancelled when they have all ended (False: they already have)."""
        loop = asyncio.get_running_loop()
        waiting = _Waiting(route.calls, scope, loop)
        with self.lock:
            live = {id(c) for c in self.calls}
            alive = not route.calls or any(id(c) in live for c in route.calls)
            if alive and route.calls:
                self.waiting.append(waiting)
        try:
            yield alive
        finally:
            with self.lock:
                self.waiting = [w for w in self.waiting if w is not waiting]


async def answer_routed(
    inflight: InFlight,
    fallback: Approver | None,
    loop: asyncio.AbstractEventLoop | None,
    name: str,
    answer: Callable[[Asker], Awaitable[_T]],
    refuse: Callable[[str], _T],
) -> _T:
    """``answer(asker)`` for a server request named ``name``, routed by ``inflight`` (see
    the module docstring); ``refuse(why)`` when it is ambiguous or its calls ended."""
    route = inflight.route(fallback, loop)
    asker = route.asker
    if asker is None:  # the request's content stays out: it may be another session's
        for session in route.sessions:
            session.audit(name, {}, "deny", AMBIGUOUS)
        return refuse(AMBIGUOUS)
    with anyio.CancelScope() as scope, inflight._held(route, scope) as alive:
        if alive:
            token = _routed.set(route)
            try:
                return await answer(asker)
            finally:
                _routed.reset(token)
    asker.audit(name, {}, "deny", ENDED)
    return refuse(ENDED)


def request_name(server: str, method: str, *, prefixed: bool) -> str:
    """The name a server's request (``elicitation/create``...) has for the policy, the
    approver and the audit: ``mcp__<server>__elicitation_create`` (the gateway's
    spelling without ``mcp__``)."""
    name = exposed_name(server, method)
    return name if prefixed else name[len(PREFIX) :]


def request_call(tool: Tool) -> ToolCall:
    """A call of ``tool`` with a fresh id, as the approver and the audit see a request."""
    return ToolCall(call_id=f"mcp_{uuid.uuid4().hex[:16]}", name=tool.name, arguments={})
