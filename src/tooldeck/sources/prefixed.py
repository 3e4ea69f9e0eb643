"""``source.prefixed("x_")``: every tool named ``x_<name>``, the name the model calls."""

from __future__ import annotations

from ..assembly import ToolSource, label_of
from ..errors import ToolDefinitionError
from ..tools import TOOL_NAME_PATTERN
from .renamed import Renamed


class Prefixed(Renamed):
    """The tools of ``inner``, each named ``prefix + name`` (a prefixed name over 64
    characters is an error naming the tool when the source gives it)."""

    def __init__(self, inner: ToolSource, prefix: str) -> None:
        if not isinstance(prefix, str) or not TOOL_NAME_PATTERN.fullmatch(prefix):
            raise ToolDefinitionError(
                f"prefixed: {prefix!r} is no name prefix (letters, digits, '_' and '-')"
            )
        super().__init__(inner, lambda name: prefix + name)
        self.prefix = prefix
        self.label = f"{label_of(inner)}, prefixed {prefix!r}"
