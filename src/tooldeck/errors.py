"""One exception hierarchy for tooldeck.

Every error a user can meet derives from :class:`TooldeckError`, so a caller can catch
the whole family with one clause and still tell definition problems (raised at import or
build time) from model-output problems (raised per call).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "ArgumentError",
    "ResultEncodingError",
    "SchemaError",
    "ToolDefinitionError",
    "TooldeckError",
]


class TooldeckError(Exception):
    """Base class of every error raised by tooldeck."""


class ToolDefinitionError(TooldeckError, ValueError):
    """A tool is defined wrongly (bad name, bad options, bad function signature)."""


class SchemaError(ToolDefinitionError):
    """A tool's JSON Schema cannot be used, or cannot be projected as requested.

    ``problems`` lists every problem found (not only the first), each prefixed with the
    JSON path inside the schema where it was found.
    """

    def __init__(self, tool: str, problems: Sequence[str], *, provider: str | None = None):
        self.tool = tool
        self.provider = provider
        self.problems = tuple(problems)
        where = f" for {provider}" if provider else ""
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"tool {tool!r}: schema unusable{where}:\n{lines}")


MODEL_MESSAGE_LIMIT = 500


class ArgumentError(TooldeckError):
    """The model's arguments for one call could not be parsed, repaired or validated.

    ``model_message`` is what the model is told (at most 500 characters: JSON path,
    expected, got) so it can retry; ``problems`` keeps the full list for logs;
    ``repairs`` names the repair rungs that were tried before giving up.
    """

    def __init__(
        self,
        tool: str,
        model_message: str,
        *,
        problems: Sequence[str] = (),
        repairs: Sequence[str] = (),
    ):
        self.tool = tool
        if len(model_message) > MODEL_MESSAGE_LIMIT:
            model_message = model_message[: MODEL_MESSAGE_LIMIT - 1] + "…"
        self.model_message = model_message
        self.problems = tuple(problems) or (model_message,)
        self.repairs = tuple(repairs)
        super().__init__(model_message)


class ResultEncodingError(TooldeckError, TypeError):
    """A tool's result cannot be frozen into what the model is sent (see tooldeck.result).

    Raised where the result is made; the dispatcher turns it into that call's error
    output ("ran, but its result cannot be recorded: ..."), so the session stays usable.
    """
