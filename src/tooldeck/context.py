"""What a running tool can see: :class:`ToolContext`, the :class:`AbortSignal`, and the
:class:`LiveProtection` of its session (so that a tool starting a sub-session, such as
``delegate_task``, can give the child no less protection than its parent has)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, cast

from typing_extensions import TypeVar

from .errors import TooldeckError

__all__ = ["LiveProtection"]

_log = logging.getLogger("tooldeck.tool")

DepsT = TypeVar("DepsT", default=Any)  # what ``ToolContext[Deps].deps`` is


class Aborted(TooldeckError):
    """Raised by :meth:`AbortSignal.raise_if_aborted` once the signal has fired."""


class AbortSignal:
    """A one-shot signal that a turn (or a single call) must stop.

    Tools check it cooperatively (``signal.aborted``, ``signal.raise_if_aborted()``) or
    await it (``await signal.wait()``). The dispatcher also cancels the task running the
    tool, so a tool that never checks still stops at its next ``await``. Signals can be
    chained: a child fires when its parent fires.
    """

    __slots__ = ("_callbacks", "_event", "_linked", "_parent", "_reason")

    def __init__(self) -> None:
        self._event: asyncio.Event | None = None
        self._reason: str | None = None
        self._callbacks: list[Callable[[str], None]] = []
        self._parent: AbortSignal | None = None
        self._linked = False  # registered with the parent (done only when needed)

    def _follow(self) -> None:
        # an unlinked child reads its parent's state when asked
        parent = self._parent
        if parent is not None and not self._linked and parent.aborted:
            self.abort(parent._reason or "aborted")

    @property
    def aborted(self) -> bool:
        if self._reason is None and self._parent is not None:
            self._follow()
        return self._reason is not None

    @property
    def reason(self) -> str | None:
        if self._reason is None and self._parent is not None:
            self._follow()
        return self._reason

    def abort(self, reason: str = "aborted") -> None:
        """Fire the signal (idempotent: the first reason is kept)."""
        if self._reason is not None:
            return
        self._reason = reason
        if self._event is not None:
            self._event.set()
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback(reason)
            except Exception:
                _log.exception("abort callback failed")

    def raise_if_aborted(self) -> None:
        if self.aborted:
            raise Aborted(self._reason or "aborted")

    def _link(self) -> None:
        """Register with the parent, so that its firing fires this signal at once."""
        parent = self._parent
        if parent is None or self._linked:
            return
        self._linked = True
        parent._link()
        if parent._reason is not None:
            self.abort(parent._reason)
        else:
            parent._callbacks.append(self.abort)

    async def wait(self) -> str:
        """Wait until the signal fires; returns the reason."""
        if not self.aborted:
            self._link()
            if self._reason is None:
                if self._event is None:
                    self._event = asyncio.Event()
                await self._event.wait()
        assert self._reason is not None
        return self._reason

    def on_abort(self, callback: Callable[[str], None]) -> Callable[[], None]:
        """Call ``callback(reason)`` when the signal fires (at once if it already has).

        Returns a function that removes the callback again.
        """
        self._link()
        if self._reason is not None:
            callback(self._reason)
            return lambda: None
        self._callbacks.append(callback)

        def remove() -> None:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

        return remove

    def child(self) -> AbortSignal:
        """A signal that fires with this one, and can also fire on its own.

        Call :meth:`detach` when the child is no longer needed, so that a long-lived
        parent does not keep every child it ever had. (A child registers with its parent
        only once something waits on it or asks to be called back; until then it reads
        the parent's state when asked, which costs nothing to undo.)
        """
        child = AbortSignal()
        child._parent = self
        return child

    def detach(self) -> None:
        """Stop following the parent signal (for a child made with :meth:`child`)."""
        parent = self._parent
        if parent is None:
            return
        if not self._linked:
            self._follow()  # keep what the parent said until now
        self._parent = None
        if self._linked:
            self._linked = False
            with contextlib.suppress(ValueError):  # the parent fired already
                parent._callbacks.remove(self.abort)


@dataclass(frozen=True, slots=True)
class LiveProtection:
    """What protects the session a call runs in, as its dispatcher applies it.

    The dispatcher sets it on every :class:`ToolContext`: ``policy`` is its policy hook
    (``tooldeck.dispatch.allow_all`` when none was configured; the session's
    ``tooldeck.Protection``, or its one judge: ``Protection.of(policy)`` reads it back),
    ``approver`` who answers the policy's asks (``None``: every ask is denied),
    ``result_hooks`` what every result goes through (offload, the size guard). A tool
    that starts a sub-session reads it here, so that the child inherits it; it is frozen
    so that no tool can loosen the dispatcher's own settings through it. Typed loosely
    here because the types live in ``tooldeck.dispatch``, above this module.
    """

    policy: Callable[..., Any]
    approver: Callable[..., Any] | None = None
    result_hooks: tuple[Callable[..., Any], ...] = ()


def _drop_event(_event: Any) -> None:
    """Default presentation-event sink: events are dropped when nobody listens."""


@dataclass(slots=True)
class ToolContext(Generic[DepsT]):
    """Per-call facts handed to a tool next to its validated parameters.

    A function decorated with :func:`tooldeck.tool` receives it by declaring a parameter
    annotated ``ToolContext`` (or ``ToolContext[Deps]``, so that ``ctx.deps`` is typed);
    that parameter never appears in the model's schema.
    """

    call_id: str = ""
    tool_name: str = ""
    session_id: str = ""
    signal: AbortSignal = field(default_factory=AbortSignal)
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger] = _log
    sink: Callable[[Any], None] = _drop_event
    turn: Any = None  # the TurnContext of the turn this call belongs to (tooldeck.assembly)
    toolset: Any = None  # the Toolset the call was dispatched from
    protection: LiveProtection | None = None  # the session's policy, approver, result hooks

    @property
    def deps(self) -> DepsT:
        """The session's dependencies (``Session(deps=...)``, carried by the turn's
        ``TurnContext.deps``); ``None`` when it has none."""
        return cast(DepsT, getattr(self.turn, "deps", None))

    def emit(self, event: Any) -> None:
        """Send a presentation event (progress, a partial result, a UI hint) to listeners."""
        self.sink(event)
