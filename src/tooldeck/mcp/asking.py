"""Who answers a server's own requests (elicitation, sampling) right now.

A server asks while the client is doing something for it, almost always while one of its
tools runs: the session that made that call answers, with its protection (the policy
hook and the approver its dispatcher runs with, ``ToolContext.protection``). The source
keeps the calls in flight per server (:class:`InFlight`); the latest one's session is
the :class:`Asker`. Outside any call, the source's own ``approver=`` answers (no policy),
or nobody does (the request is declined or refused, with why).

A server's request arrives on the MCP I/O loop; the session's approver and policy belong
to the loop the session runs on, so they are run there (:meth:`Asker.run`).
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..approvals import Approver, PolicyHook, allow_all
from ..context import ToolContext
from ..tools import Tool
from ..transcript import ToolCall
from .naming import PREFIX, exposed_name

__all__ = ["Asker", "InFlight", "request_call", "request_name"]

_T = TypeVar("_T")


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
        from ..policy.protection import Protection
        from ..policy.session import SessionPolicy

        if self.policy is None:
            return ()
        judges = Protection.of(self.policy).judges
        return tuple(j for j in judges if isinstance(j, SessionPolicy))

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
class InFlight:
    """The calls running on one server, each with its context and loop (latest last)."""

    calls: list[tuple[ToolContext, asyncio.AbstractEventLoop]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, ctx: ToolContext, loop: asyncio.AbstractEventLoop) -> None:
        with self.lock:
            self.calls.append((ctx, loop))

    def remove(self, ctx: ToolContext) -> None:
        with self.lock:
            self.calls = [c for c in self.calls if c[0] is not ctx]

    def asker(self, fallback: Approver | None, loop: asyncio.AbstractEventLoop | None) -> Asker:
        """The latest call's session, else the source's ``fallback`` approver."""
        with self.lock:
            latest = self.calls[-1] if self.calls else None
        if latest is not None:
            ctx, call_loop = latest
            protection = ctx.protection
            if protection is not None:
                return Asker(protection.policy, protection.approver, call_loop, ctx.session_id)
            return Asker(None, fallback, call_loop, ctx.session_id)  # a direct source.call
        return Asker(None, fallback, loop)


def request_name(server: str, method: str, *, prefixed: bool) -> str:
    """The name a server's request (``elicitation/create``...) has for the policy, the
    approver and the audit: ``mcp__<server>__elicitation_create`` (the gateway's
    spelling without ``mcp__``)."""
    name = exposed_name(server, method)
    return name if prefixed else name[len(PREFIX) :]


def request_call(tool: Tool) -> ToolCall:
    """A call of ``tool`` with a fresh id, as the approver and the audit see a request."""
    return ToolCall(call_id=f"mcp_{uuid.uuid4().hex[:16]}", name=tool.name, arguments={})
