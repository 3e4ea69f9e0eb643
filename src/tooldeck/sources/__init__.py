"""Tool sources: the :class:`~tooldeck.assembly.ToolSource` protocol's implementations
that belong to no feature, and the combinators every source has.

- :class:`ToolList` (``tools=``, :mod:`.listed`): tools, sources and lists of them;
- :func:`source` (:mod:`.function`): a function ``(TurnContext) -> tools`` as a source;
- :class:`Filtered`, :class:`Prefixed`, :class:`Renamed`, :class:`WithApproval`: what
  ``.filtered``, ``.prefixed``, ``.renamed`` and ``.with_approval`` make, each in its
  own module.
"""

from __future__ import annotations

from .approval import WithApproval
from .filtered import Filtered
from .function import FunctionSource, source
from .listed import ToolList, Tools
from .prefixed import Prefixed
from .renamed import Renamed

__all__ = [
    "Filtered",
    "FunctionSource",
    "Prefixed",
    "Renamed",
    "ToolList",
    "Tools",
    "WithApproval",  # tooldeck.source; here too while loop.py's docstring names it here
    "source",
]
