"""The ``web`` category's handler table, shared by the tool modules of this package."""

from __future__ import annotations

from ...registry import Handlers

handlers = Handlers("web")
