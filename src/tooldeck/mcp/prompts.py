"""MCP prompts: a server's prompt templates, listed and fetched with arguments.

A server that declares the ``prompts`` capability lists its prompts (``prompts/list``: a
name, a description, the arguments it takes) and renders one on request
(``prompts/get`` with string arguments): a list of messages, each a role and one content
block. Here they become typed values:

- :class:`McpPrompt`: one listed prompt (its server, name, title, description,
  :class:`PromptArgument` s);
- :class:`PromptResult`: a fetched prompt, its messages as :class:`PromptMessage` s whose
  ``content`` is a tooldeck content part, converted as a tool result's blocks are
  (:mod:`tooldeck.mcp.results`): text, image, an embedded resource as a line naming it
  followed by its text.

Arguments are checked against the prompt's declared ones before the request
(:func:`check_arguments`): a missing required argument or an unknown one is a
:class:`PromptError`, one line naming it. :class:`~tooldeck.mcp.McpSource` offers
``list_prompts`` and ``get_prompt``; ``tooldeck mcp prompts`` and ``tooldeck mcp prompt``
are the CLI.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp import MCPError

from ..errors import TooldeckError
from ..result import ContentPart, TextPart
from .connection import MAX_PAGES, Connection, describe_error
from .results import content_part

__all__ = [
    "check_arguments",
    "fetch_prompt",
    "fetch_prompt_result",
    "list_server_prompts",
]


class PromptError(TooldeckError):
    """A prompt cannot be fetched: no such prompt, a missing or unknown argument, the
    server not connected or refusing the request. The message is one line."""


@dataclass(frozen=True, slots=True)
class PromptArgument:
    """One argument a prompt takes (arguments are strings)."""

    name: str
    description: str | None = None
    required: bool = False


@dataclass(frozen=True, slots=True)
class McpPrompt:
    """A prompt a server lists."""

    server: str
    name: str
    title: str | None = None
    description: str | None = None
    arguments: tuple[PromptArgument, ...] = ()


@dataclass(frozen=True, slots=True)
class PromptMessage:
    """One message of a fetched prompt: who says it and what."""

    role: Literal["user", "assistant"]
    content: ContentPart


@dataclass(frozen=True, slots=True)
class PromptResult:
    """A prompt as the server rendered it for the given arguments."""

    server: str
    name: str
    description: str | None
    messages: tuple[PromptMessage, ...]

    def text(self) -> str:
        """The messages as text, each ``role: ...`` (a non-text part as its one line)."""
        lines = []
        for message in self.messages:
            body = message.content.text if isinstance(message.content, TextPart) else "[image]"
            lines.append(f"{message.role}: {body}")
        return "\n".join(lines)


def _prompt(server: str, listed: types.Prompt) -> McpPrompt:
    return McpPrompt(
        server=server,
        name=listed.name,
        title=listed.title,
        description=listed.description,
        arguments=tuple(
            PromptArgument(a.name, a.description, bool(a.required)) for a in listed.arguments or ()
        ),
    )


def check_arguments(prompt: McpPrompt, arguments: Mapping[str, Any]) -> dict[str, str]:
    """``arguments`` as the strings ``prompts/get`` takes, checked against the prompt's
    declared arguments; :class:`PromptError` naming a missing or unknown one."""
    declared = {a.name for a in prompt.arguments}
    where = f"the prompt {prompt.name!r} of {prompt.server!r}"
    missing = [a.name for a in prompt.arguments if a.required and a.name not in arguments]
    if missing:
        names = ", ".join(repr(n) for n in missing)
        raise PromptError(f"{where} needs the argument{'s' if len(missing) > 1 else ''} {names}")
    unknown = sorted(set(arguments) - declared)
    if unknown:
        takes = ", ".join(sorted(declared)) or "no arguments"
        raise PromptError(f"{where} takes no argument {unknown[0]!r}; it takes: {takes}")
    out: dict[str, str] = {}
    for name, value in arguments.items():
        if not isinstance(value, str):
            raise PromptError(f"the argument {name!r} of {where} is a string, not {value!r}")
        out[name] = value
    return out


async def _client(conn: Connection) -> Any:
    client = await conn.ready_client()
    if client is None:
        why = conn.error or conn.state
        raise PromptError(f"the MCP server {conn.config.name!r} is not connected ({why})")
    return client


async def list_server_prompts(conn: Connection) -> list[McpPrompt]:
    """The prompts of one server (runs on the I/O loop); none when it has no prompts."""
    client = await _client(conn)
    caps = client.server_capabilities
    if caps is None or caps.prompts is None:
        return []
    name = conn.config.name
    prompts: list[McpPrompt] = []
    cursor: str | None = None
    try:
        with anyio.fail_after(conn.config.timeout):
            for _ in range(MAX_PAGES):
                page = await client.list_prompts(cursor=cursor)
                prompts.extend(_prompt(name, p) for p in page.prompts)
                cursor = page.next_cursor
                if not cursor:
                    break
    except TimeoutError:
        raise PromptError(f"listing the prompts of {name!r} timed out") from None
    except MCPError as exc:
        raise PromptError(
            f"the MCP server {name!r} refused prompts/list: {exc.error.message}"
        ) from None
    return prompts


async def fetch_prompt(
    conn: Connection, prompt: McpPrompt, arguments: dict[str, str]
) -> PromptResult:
    """``prompts/get`` of ``prompt`` with checked ``arguments`` (runs on the I/O loop)."""
    result = await fetch_prompt_result(conn, prompt, arguments)
    return PromptResult(
        server=conn.config.name,
        name=prompt.name,
        description=result.description,
        messages=tuple(PromptMessage(m.role, content_part(m.content)) for m in result.messages),
    )


async def fetch_prompt_result(
    conn: Connection, prompt: McpPrompt, arguments: dict[str, str]
) -> types.GetPromptResult:
    """``prompts/get`` as the server answered it (the gateway passes it on)."""
    client = await _client(conn)
    name = conn.config.name
    try:
        with anyio.fail_after(conn.config.timeout):
            result: types.GetPromptResult = await client.get_prompt(prompt.name, arguments)
    except TimeoutError:
        raise PromptError(f"getting the prompt {prompt.name!r} of {name!r} timed out") from None
    except MCPError as exc:
        raise PromptError(
            f"the MCP server {name!r} refused the prompt {prompt.name!r}: {exc.error.message}"
        ) from None
    except Exception as exc:
        raise PromptError(
            f"getting the prompt {prompt.name!r} of {name!r} failed: {describe_error(exc)}"
        ) from exc
    return result
