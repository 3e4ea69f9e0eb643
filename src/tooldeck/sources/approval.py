"""``source.with_approval()``: the source's tools need a human's approval to run.

It raises each tool's approval tier (never lowers it), to ``DANGEROUS`` by default: the
tier every protection of a session judges (``approve="WRITE"`` or ``"DANGEROUS"`` asks
before it, a :class:`~tooldeck.policy.SessionPolicy` never runs a DANGEROUS call without
a human, a headless one denies it). A session with no protection at all runs every
call, as it always does.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..assembly import Source, ToolSource, TurnContext, label_of
from ..errors import ToolDefinitionError
from ..tools import TIERS, Tier, Tool
from ._variants import Variants


class WithApproval(Source):
    """The tools of ``inner``, each at least at ``tier``."""

    def __init__(self, inner: ToolSource, tier: Tier = "DANGEROUS") -> None:
        if tier not in TIERS:
            raise ToolDefinitionError(f"with_approval: tier must be one of {TIERS}, not {tier!r}")
        self.inner = inner
        self.tier: Tier = tier
        self.label = f"{label_of(inner)}, with approval ({tier})"
        self._variants = Variants(self._raise)

    def _raise(self, tool: Tool) -> Tool:
        if TIERS.index(tool.tier) >= TIERS.index(self.tier):
            return tool
        return tool.replace(tier=self.tier)

    def tools_for(self, ctx: TurnContext, /) -> Sequence[Tool]:
        return self._variants.of(self.inner.tools_for(ctx))
