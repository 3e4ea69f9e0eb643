"""A live view: an event subscriber that redraws itself on a terminal with rich.

Subclasses say how to draw (``render``) and what an event changes (``on_event``, which
calls :meth:`LiveView.refresh`); the view attaches to an :class:`~tooldeck.events.EventBus`
and is used as a context manager around the run it shows. When the console is not a
terminal there is no live display, and subclasses print lines instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Self

from ._extras import needs_extra
from .events import Event, EventBus

with needs_extra("cli"):
    from rich.console import Console, RenderableType
    from rich.live import Live

__all__ = ["LiveView"]


@dataclass
class LiveView:
    console: Console
    _live: Live | None = field(default=None, init=False, repr=False)
    refresh_per_second: ClassVar[float] = 10

    def attach(self, bus: EventBus) -> Self:
        bus.subscribe(self.on_event)
        return self

    @property
    def is_live(self) -> bool:
        return self._live is not None

    def __enter__(self) -> Self:
        if self.console.is_terminal:
            self._live = Live(
                self.render(), console=self.console, refresh_per_second=self.refresh_per_second
            )
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.update(self.render())
            self._live.__exit__(None, None, None)
            self._live = None

    def refresh(self) -> None:
        if self._live is not None:
            self._live.update(self.render())

    def render(self) -> RenderableType:
        raise NotImplementedError

    def on_event(self, event: Event) -> None:
        raise NotImplementedError
