"""MCP elicitation as a client: a server's question reaches the session's approver.

A server sends ``elicitation/create`` to ask the user something: a message and a flat
JSON Schema of the fields it wants (form mode), or a URL to visit (URL mode). tooldeck
declares the capability (``McpSource(elicitation=True)``, the library's default) and
answers it with the approvals machinery of the session whose call asked (:mod:`.asking`:
the call the protocol links it to, else the one session with calls running on that
server; declined when calls of several sessions run there, or once the call ended):

1. the question becomes an :class:`~tooldeck.approvals.ApprovalRequest` of a tool named
   ``mcp__<server>__elicitation_create`` whose parameters schema **is the requested
   schema** (compiled as any untrusted schema: an unusable one is declined) and whose
   ``params`` is the typed :class:`ElicitationRequest` (server, message, mode, schema,
   URL); the console shows the message and the fields (``display``), a custom approver
   reads ``request.params``;
2. the session's policy judges it first (a rule can deny a server's questions:
   ``tools = "mcp__*__elicitation_create"``, ``action = "deny"``);
3. the approver answers: approve with ``arguments`` (the console's ``e``, an
   ``ApprovalAnswer(True, arguments={...})``) is the form's answer, validated against the
   requested schema before it is sent (``accept``); a deny is ``decline``. A session
   policy's approver writes each answer to the audit log, like any approval;
4. nobody to ask (a headless session, no approver, no session running a call, the answer
   not valid, the approver failing or not answering within the server's ``timeout``) is a
   ``decline``, with the reason in the result's ``_meta`` (``io.tooldeck/reason``) and
   the log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, Literal

import anyio
import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..approvals import ApprovalAnswer, ApprovalRequest, PendingApproval, policy_decision
from ..arguments import validate_arguments
from ..context import ToolContext
from ..errors import ArgumentError, ToolDefinitionError
from .asking import Asker, request_call
from .naming import namespace_name

__all__ = ["REASON", "answer_elicitation", "declined"]

_log = logging.getLogger("tooldeck.mcp")
REASON = "io.tooldeck/reason"
"""The ``_meta`` key of a declined request's reason."""
MAX_FIELDS = 100
_URL_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


class ElicitationRequest(BaseModel):
    """A server's question, as an approver gets it (``ApprovalRequest.params``)."""

    model_config = ConfigDict(frozen=True)

    server: str
    message: str
    mode: Literal["form", "url"] = "form"
    requested_schema: dict[str, Any] = Field(default_factory=dict)
    url: str | None = None


def declined(server: str, why: str) -> types.ElicitResult:
    """A decline of ``server``'s question, saying why (``_meta``) and logged."""
    _log.info("MCP server %r: elicitation declined: %s", server, why)
    return types.ElicitResult(action="decline", _meta={REASON: why})


def _fields(schema: Mapping[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties")
    required = set(schema.get("required") or ())
    if not isinstance(properties, Mapping):
        return {}
    out: dict[str, Any] = {}
    for name, spec in list(properties.items())[:MAX_FIELDS]:
        shown = {k: v for k, v in spec.items() if k != "title"} if isinstance(spec, Mapping) else {}
        if name in required:
            shown["required"] = True
        out[str(name)] = shown
    return out


def _question_tool(name: str, request: ElicitationRequest) -> Any:
    """The request as a tool: its parameters schema is the requested schema."""
    from .source import McpTool, McpToolInfo  # the tool class of MCP tools

    schema = request.requested_schema if request.mode == "form" else _URL_SCHEMA
    schema = {**schema, "type": "object"}

    async def never(params: dict[str, Any], ctx: ToolContext) -> None:
        raise RuntimeError("a server's question is answered, never executed")

    class Question(McpTool):
        def describe_approval(self, params: Any) -> Any:
            shown: dict[str, Any] = {"server": request.server, "question": request.message}
            if request.mode == "url":
                shown["visit"] = request.url
            else:
                shown["answer with"] = _fields(request.requested_schema)
            return shown

    tool = Question.from_schema(
        schema,
        never,
        name=name,
        description=request.message,
        tier="STANDARD",
        namespace=namespace_name(request.server),
    )
    tool.mcp = McpToolInfo(request.server, "elicitation/create", name, None, schema, None, {}, None)
    return tool


def _request(server: str, params: types.ElicitRequestParams) -> ElicitationRequest:
    if isinstance(params, types.ElicitRequestURLParams):
        return ElicitationRequest(server=server, message=params.message, mode="url", url=params.url)
    return ElicitationRequest(
        server=server, message=params.message, requested_schema=dict(params.requested_schema)
    )


async def answer_elicitation(
    server: str, name: str, params: types.ElicitRequestParams, asker: Asker, within: float
) -> types.ElicitResult:
    """The answer to one ``elicitation/create`` of ``server`` (see the module docstring)."""
    request = _request(server, params)
    if asker.approver is None:
        why = asker.nobody()
        asker.audit(name, request, "deny", why)
        return declined(server, why)
    try:
        tool = _question_tool(name, request)
    except ToolDefinitionError as exc:
        return declined(server, f"the requested schema is unusable: {str(exc).splitlines()[0]}")
    call = request_call(tool)
    approver, policy = asker.approver, asker.policy
    try:
        with anyio.fail_after(within):
            if policy is not None:
                decided = await asker.run(lambda: policy_decision(policy, tool, request, call))
                if decided.action == "deny":
                    return declined(server, f"denied by policy: {decided.reason}")
            asked = ApprovalRequest(call, tool, request, request.message)
            answers = await asker.run(lambda: approver([asked]))
    except TimeoutError:
        return declined(server, f"nobody answered within {within:g}s")
    except PendingApproval:
        return declined(server, "nobody can answer now (the approval would wait for later)")
    except asyncio.CancelledError:
        raise
    except BaseException as exc:  # the approver's own fault, on the session's loop
        _log.warning("MCP server %r: the approver failed on a question", server, exc_info=exc)
        return declined(server, f"the approver failed: {type(exc).__name__}")
    answer = answers[0] if answers else None
    return _result(server, tool, request, answer)


def _result(
    server: str, tool: Any, request: ElicitationRequest, answer: ApprovalAnswer | None
) -> types.ElicitResult:
    if not isinstance(answer, ApprovalAnswer):
        return declined(server, "no answer was given")
    if not answer.approved:
        return declined(server, answer.message or "declined by the user")
    if request.mode == "url":
        return types.ElicitResult(action="accept")
    try:
        checked = validate_arguments(tool, dict(answer.arguments or {})).params
        return types.ElicitResult(action="accept", content=dict(checked))
    except ArgumentError as exc:  # the answer's values stay here: only the log has them
        _log.info("MCP server %r: an answer outside the schema: %s", server, exc.model_message)
        return declined(server, "the answer does not match the requested schema")
    except ValidationError as exc:
        return declined(server, f"the answer holds a value a form cannot: {exc.errors()[0]['msg']}")
