"""Testing a tool set offline: stand-ins for a model, never a real one.

- :class:`ScriptedModel` replays the assistant turns you write (with :func:`call` and
  :func:`reply`), or a function of each request;
- :class:`SchemaModel` calls every tool it is offered once, with the smallest arguments
  its schema accepts (:func:`schema_arguments`), then answers with what each returned: a
  smoke test of a tool set, like pydantic-ai's ``TestModel``.

Both implement tooldeck's :class:`~tooldeck.model.Model` (``respond`` and ``stream``), so
they run in a :class:`~tooldeck.Session` like any model.
"""

from __future__ import annotations

from ..providers.scripted import ScriptedModel, call, reply
from .arguments import schema_arguments
from .schema_model import SchemaModel

__all__ = ["SchemaModel", "ScriptedModel", "call", "reply", "schema_arguments"]
