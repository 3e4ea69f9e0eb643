"""``SchemaModel``: calls every offered tool once with arguments made from its schema, then
answers with what each returned (not a real model; a smoke test of a tool set)."""

from __future__ import annotations

import json
from collections.abc import Collection

from ..model import ModelRequest
from ..providers.scripted import ScriptedModel, call, reply
from ..transcript import AssistantMessage, ToolCall, ToolOutput
from .arguments import schema_arguments

__all__: list[str] = []  # SchemaModel: exported by tooldeck.testing


class SchemaModel(ScriptedModel):
    """Calls every tool of the first request once, all in one step, with the smallest
    arguments its schema accepts (:func:`~tooldeck.testing.schema_arguments`); then answers
    with a JSON object of each tool's output text, by tool name (or ``text`` when given).

    ``tools``: only these names are called (default: every offered tool). A tool whose
    schema no value satisfies raises :class:`ValueError` naming the tool and the place.
    ``requests`` keeps every request, as :class:`ScriptedModel` does.
    """

    def __init__(
        self,
        *,
        tools: Collection[str] | None = None,
        text: str | None = None,
        name: str = "schema-model",
    ) -> None:
        self._only = None if tools is None else frozenset(tools)
        self._text = text
        self._calls: dict[str, str] = {}  # call id -> tool name, of the step it made
        super().__init__(self._next, name=name)

    def _next(self, request: ModelRequest) -> AssistantMessage:
        if not self._calls:
            made: list[ToolCall] = []
            for tool in request.tools:
                if self._only is not None and tool.name not in self._only:
                    continue
                try:
                    arguments = schema_arguments(tool.schema)
                except ValueError as exc:
                    raise ValueError(f"tool {tool.name}: {exc}") from exc
                made.append(call(tool.name, arguments))
            if made:
                self._calls = {c.call_id: c.name for c in made}
                return reply(*made)
        if self._text is not None:
            return reply(self._text)
        answers = {
            item.name: item.text
            for item in request.transcript
            if isinstance(item, ToolOutput) and item.call_id in self._calls
        }
        return reply(json.dumps(answers, ensure_ascii=False))
