"""Every session gets the size guard: the result hooks a session actually runs with.

A model's context is finite and a single tool result can be megabytes. The guard and
offload of :class:`~tooldeck.offload.OffloadStore` keep that out of the model's view, but
only where someone remembered to pass ``result_hooks=[store.hook]``: a session built
without it (or a sub-agent, which was never given one) sent a 2 MB result to its model
whole. So the guard is the default, and turning it off is explicit:

- when none of a session's result hooks is an offload store's ``hook``, one is added
  last: an :class:`~tooldeck.offload.OffloadStore` of the session under the turn's
  ``home`` (offload over 15,000 tokens, guard at 25,000), or, with no home, a
  guard-only store (``threshold_tokens=0``): the model's view is cut and told that the
  cut part cannot be recalled;
- the session's store (given or default) offers its ``recall_tool_result`` once it
  holds results of the session, unless the tools already have a tool of that name;
- ``Session(..., guard=False)`` adds nothing (hooks given explicitly still run);
- a sub-agent gets its parent's hooks, with each offload store replaced by one of the
  same settings for the child's own session id (:func:`child_hooks`).

Only the public API of the offload store is used (its constructor, ``hook``,
``recall_tool``, ``has_refs`` and its settings), so the store can change inside.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._call import ResultHook
from ..assembly import Toolset
from ..events import EventBus
from ..plan import PlanEntry, ToolPlan
from . import RECALL_TOOL_NAME, OffloadStore

__all__ = ["ResultGuard", "child_hooks", "session_guard", "store_of"]


def store_of(hook: Any) -> OffloadStore | None:
    """The offload store whose ``hook`` this is, or ``None`` for any other hook."""
    owner = getattr(hook, "__self__", None)
    if isinstance(owner, OffloadStore) and getattr(hook, "__name__", "") == "hook":
        return owner
    return None


@dataclass(frozen=True, slots=True)
class ResultGuard:
    """A session's effective result hooks, and the offload store among them (if any)."""

    hooks: tuple[ResultHook, ...]
    store: OffloadStore | None = None

    @property
    def adds_tools(self) -> bool:
        """Whether :meth:`offer_recall` may add a tool (so the plan is made every step)."""
        return self.store is not None and self.store.threshold_tokens > 0

    def offer_recall(self, plan: ToolPlan) -> ToolPlan:
        """``plan`` with the store's recall tool, once the store holds this session's results.

        Nothing changes when the plan already has a tool of that name (the store itself
        among the session's tools, as a source), when offloading is off, or when nothing is stored.
        """
        store = self.store
        if (
            store is None
            or not self.adds_tools
            or RECALL_TOOL_NAME in plan.executable
            or not store.has_refs()
        ):
            return plan
        recall = store.recall_tool
        current = plan.executable
        origin = {n: o for n in current.names if (o := current.origin(n)) is not None}
        origin[recall.name] = "tooldeck.offload.defaults"
        return dataclasses.replace(
            plan,
            executable=Toolset([*current.tools, recall], origin),
            shown=(*plan.shown, recall),
            planned=(*plan.planned, recall),
            entries=(
                *plan.entries,
                PlanEntry(recall.name, False, "results of this session are stored"),
            ),
        )


def session_guard(
    hooks: Sequence[ResultHook],
    *,
    enabled: bool,
    session_id: str,
    home: Path | None,
    events: EventBus | None = None,
) -> ResultGuard:
    """The hooks a session runs with: ``hooks``, plus the default guard unless disabled.

    The default is added last, so it sees the result every other hook produced.
    """
    given = tuple(hooks)
    stores = [s for s in map(store_of, given) if s is not None]
    if stores:
        return ResultGuard(given, stores[-1])
    if not enabled:
        return ResultGuard(given)
    sid = session_id or "session"
    if home is None:  # nowhere to store: guard only (nothing is ever written)
        store = OffloadStore(os.devnull, sid, threshold_tokens=0, events=events)
    else:
        store = OffloadStore(home, sid, events=events)
    return ResultGuard((*given, store.hook), store)


def _sibling(store: OffloadStore, session_id: str) -> OffloadStore:
    """A store with ``store``'s settings for another session (its own directory)."""
    return OffloadStore(
        store.home,
        session_id,
        threshold_tokens=store.threshold_tokens,
        guard_tokens=store.guard_tokens,
        ttl_seconds=store.ttl_seconds,
        events=store.events,
        page_tokens=store.page_tokens,
        summary_tokens=store.summary_tokens,
        estimator=store.estimator,
        clock=store.clock,
    )


def child_hooks(hooks: Sequence[Any], session_id: str) -> tuple[ResultHook, ...]:
    """A sub-agent's result hooks: its parent's, each offload store made its own.

    The child's store has the parent's home and settings and the child's session id, so
    the child's large results are stored (and recallable) in the child's own directory.
    Other hooks are passed on as they are.
    """
    out: list[ResultHook] = []
    for hook in hooks:
        store = store_of(hook)
        out.append(hook if store is None else _sibling(store, session_id).hook)
    return tuple(out)
