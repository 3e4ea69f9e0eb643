"""MCP sampling as a client: a server's ``sampling/createMessage`` served by a model.

Given ``McpSource(config, sampling=Sampling(model, budget=...))`` (or just a model),
tooldeck declares the ``sampling`` capability and serves a server's request with that
model, only when the policy lets that server sample:

1. the request is a call of a tool named ``mcp__<server>__sampling_createMessage``, tier
   ``WRITE``: the policy of the session whose call asked judges it (routed as
   :mod:`.asking` says: refused when calls of several sessions run on the server and the
   request is not linked to one), so with no rule about it a session policy **asks** (a
   rule allows or denies one server's sampling); without any policy it asks too. An ask
   goes to that session's approver with the typed :class:`SamplingRequest` as ``params``
   (nobody to ask: refused);
2. each session has a **token budget** on each server (``budget``, or
   ``budgets[server]``; calls outside any session share one) spent by every answer (the
   model's reported usage, or an estimate when it reports none): a request is refused
   once it is spent, and its ``maxTokens`` is cut to what is left (and to
   ``max_tokens``);
3. text and image messages are sent with the server's system prompt as instructions and
   no tools; the answer's text is the result (``stopReason`` ``endTurn`` or
   ``maxTokens``, ``model`` the model's name);
4. a refusal is a JSON-RPC error to the server saying why (``-1``, "sampling refused:
   ..."; a model or approver that fails: "sampling failed: <its type>", the details only
   in the log); the decision, and the answer's tokens and model, are audit lines of the session
   policy, and a ``mcp.sampling`` span (``gen_ai`` attributes; the messages when content
   capture is on).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import mcp_types as types
from pydantic import BaseModel, ConfigDict

from ..approvals import ApprovalAnswer, ApprovalRequest, PendingApproval, policy_decision
from ..context import ToolContext
from ..errors import TooldeckError
from ..model import Model, ModelRequest, ModelSettings
from ..result import ContentPart, ImagePart, TextPart
from ..telemetry import names as n
from ..telemetry.settings import active
from ..tokens import estimate_tokens
from ..transcript import AssistantMessage, Item, StopReason, UserMessage
from .asking import Asker, request_call
from .naming import namespace_name

__all__ = ["REFUSED", "permit", "refused", "sampling_request", "serve_sampling"]

_log = logging.getLogger("tooldeck.mcp")
REFUSED = -1
"""The JSON-RPC error code of a refused sampling request (as the spec's examples use)."""
MAX_MESSAGES = 100


@dataclass
class Sampling:
    """How servers' sampling requests are served: ``model``, the token ``budget`` each
    session has on each server (``budgets`` per server name), and the cap on one answer.

    ``spent`` is what every session together spent per server; :meth:`left` is what one
    session (``session_id``; ``""``: calls outside any session) has left on a server."""

    model: Model
    budget: int = 20_000
    budgets: Mapping[str, int] = field(default_factory=dict)
    max_tokens: int = 4_096
    spent: dict[str, int] = field(default_factory=dict, init=False)
    _by_session: dict[tuple[str, str], int] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def left(self, server: str, session_id: str = "") -> int:
        with self._lock:
            spent = self._by_session.get((session_id, server), 0)
            return self.budgets.get(server, self.budget) - spent

    def spend(self, server: str, tokens: int, session_id: str = "") -> None:
        tokens = max(0, tokens)
        with self._lock:
            self.spent[server] = self.spent.get(server, 0) + tokens
            key = (session_id, server)
            self._by_session[key] = self._by_session.get(key, 0) + tokens


class SamplingRequest(BaseModel):
    """A server's sampling request, as an approver gets it (``ApprovalRequest.params``)."""

    model_config = ConfigDict(frozen=True)

    server: str
    system_prompt: str | None = None
    messages: list[dict[str, str]]  # role and text (an image as a line naming it)
    max_tokens: int
    budget_left: int
    model_hints: list[str] = []


class Refused(TooldeckError):
    """Why a request is not served (becomes the server's error)."""


def refused(server: str, why: str) -> types.ErrorData:
    """The error ``server``'s sampling request is answered with, saying why (logged)."""
    _log.info("MCP server %r: sampling refused: %s", server, why)
    return types.ErrorData(code=REFUSED, message=f"sampling refused: {why}")


def _parts(content: Any) -> list[ContentPart]:
    blocks = content if isinstance(content, list) else [content]
    out: list[ContentPart] = []
    for block in blocks:
        if isinstance(block, types.TextContent):
            out.append(TextPart(block.text))
        elif isinstance(block, types.ImageContent):
            out.append(ImagePart(data=block.data, mime_type=block.mime_type))
        else:
            raise Refused(f"a {getattr(block, 'type', 'unknown')} message is not supported")
    return out


def _transcript(params: types.CreateMessageRequestParams) -> list[Item]:
    if params.tools or params.tool_choice:
        raise Refused("sampling with tools is not supported")
    if len(params.messages) > MAX_MESSAGES:
        raise Refused(f"more than {MAX_MESSAGES} messages")
    items: list[Item] = []
    for message in params.messages:
        parts = _parts(message.content)
        if message.role == "user":
            items.append(UserMessage(parts))
        else:
            items.append(AssistantMessage(parts=[p for p in parts if isinstance(p, TextPart)]))
    return items


def _shown(items: list[Item]) -> list[dict[str, str]]:
    out = []
    for item in items:
        if isinstance(item, UserMessage):
            parts = [item.content] if isinstance(item.content, str) else item.content
            text = "\n".join(
                p if isinstance(p, str) else p.text if isinstance(p, TextPart) else "[image]"
                for p in parts
            )
            out.append({"role": "user", "text": text})
        elif isinstance(item, AssistantMessage):
            out.append({"role": "assistant", "text": item.text})
    return out


def _tool(name: str, server: str) -> Any:
    from .source import McpTool, McpToolInfo

    async def never(params: dict[str, Any], ctx: ToolContext) -> None:
        raise RuntimeError("a sampling request is served, never executed")

    schema: dict[str, Any] = {"type": "object", "properties": {}}
    tool = McpTool.from_schema(
        schema,
        never,
        name=name,
        description=f"The MCP server {server} asks to use the model",
        tier="WRITE",
        namespace=namespace_name(server),
    )
    tool.mcp = McpToolInfo(server, "sampling/createMessage", name, None, schema, None, {}, None)
    return tool


async def _permitted(asker: Asker, tool: Any, request: SamplingRequest) -> None:
    """Raise :class:`Refused` unless the policy (or, on ask, a human) lets it sample."""
    call = request_call(tool)
    action: Literal["allow", "deny", "ask"] = "ask"
    policy = asker.policy
    if asker.judged and policy is not None:
        decided = await asker.run(lambda: policy_decision(policy, tool, request, call))
        if decided.action == "deny":
            raise Refused(f"denied by policy: {decided.reason}")
        action = decided.action
    if action == "allow":
        return
    approver = asker.approver
    if approver is None:
        why = asker.nobody()
        asker.audit(tool.name, request, "deny", why)
        raise Refused(why.replace("nobody can answer", "nobody can approve it"))
    reason = f"the MCP server {request.server!r} asks to use the model"
    asked = ApprovalRequest(call, tool, request, reason)
    try:
        answers = await asker.run(lambda: approver([asked]))
    except PendingApproval:
        raise Refused("nobody can approve it now") from None
    answer = answers[0] if answers else None
    if not isinstance(answer, ApprovalAnswer) or not answer.approved:
        message = answer.message if isinstance(answer, ApprovalAnswer) else ""
        raise Refused(f"not approved{': ' + message if message else ''}")


def sampling_request(
    server: str,
    params: types.CreateMessageRequestParams,
    items: list[Item] | None = None,
    *,
    limit: int | None = None,
    left: int | None = None,
) -> SamplingRequest:
    """A ``sampling/createMessage`` as the policy, an approver and the audit see it
    (``limit``: the tokens it may get, ``left``: the budget left; both the server's own
    ``maxTokens`` when not given); :class:`Refused` when it cannot be served (tools, too
    many messages, content that is not text or an image)."""
    items = _transcript(params) if items is None else items
    hints = params.model_preferences.hints or [] if params.model_preferences else []
    return SamplingRequest(
        server=server,
        system_prompt=params.system_prompt,
        messages=_shown(items),
        max_tokens=params.max_tokens if limit is None else limit,
        budget_left=params.max_tokens if left is None else left,
        model_hints=[h.name for h in hints if h.name],
    )


async def permit(asker: Asker, name: str, request: SamplingRequest) -> None:
    """Raise :class:`Refused` unless the asking session's policy (or, when it asks, a
    human) lets ``request.server`` sample; ``name``: the request's name
    (:func:`~.asking.request_name`)."""
    await _permitted(asker, _tool(name, request.server), request)


async def serve_sampling(
    server: str,
    name: str,
    params: types.CreateMessageRequestParams,
    asker: Asker,
    sampling: Sampling,
) -> types.CreateMessageResult | types.ErrorData:
    """The answer to one ``sampling/createMessage`` of ``server`` (see the module docstring)."""
    try:
        items = _transcript(params)
        left = sampling.left(server, asker.session_id)
        if left <= 0:
            budget = sampling.budgets.get(server, sampling.budget)
            raise Refused(f"the server's sampling budget of {budget:,} tokens is spent")
        limit = max(1, min(params.max_tokens, left, sampling.max_tokens))
        request = sampling_request(server, params, items, limit=limit, left=left)
        await permit(asker, name, request)
        answer = await _ask_model(sampling, items, params, limit)
    except Refused as exc:
        return refused(server, str(exc))
    except asyncio.CancelledError:
        raise
    except BaseException as exc:  # the model's or the approver's fault: said by its type only
        _log.warning("MCP server %r: sampling failed", server, exc_info=exc)
        why = f"sampling failed: {type(exc).__name__}"
        return types.ErrorData(code=types.INTERNAL_ERROR, message=why)
    used = answer.usage.input_tokens + answer.usage.output_tokens
    if not used:  # the model reports no usage: estimate it
        used = sum(estimate_tokens(m["text"]) for m in request.messages) + estimate_tokens(
            answer.text
        )
    sampling.spend(server, used, asker.session_id)
    model = answer.model or sampling.model.name
    asker.audit(name, request, "sampled", f"{used} tokens from {model}")
    _trace(server, request, answer, used, model)
    stop = "maxTokens" if answer.stop_reason == StopReason.MAX_TOKENS else "endTurn"
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text=answer.text),
        model=model,
        stop_reason=stop,
    )


async def _ask_model(
    sampling: Sampling, items: list[Item], params: types.CreateMessageRequestParams, limit: int
) -> AssistantMessage:
    settings = ModelSettings(max_output_tokens=limit, temperature=params.temperature)
    request = ModelRequest(items, [], settings, instructions=params.system_prompt)
    return await sampling.model.respond(request)


def _trace(
    server: str, request: SamplingRequest, answer: AssistantMessage, used: int, model: str
) -> None:
    tel = active()
    if tel is None or not tel.tracing:
        return
    attributes: dict[str, Any] = {
        n.OPERATION: "chat",
        n.RESPONSE_MODEL: model,
        n.REQUEST_MAX_TOKENS: request.max_tokens,
        n.INPUT_TOKENS: answer.usage.input_tokens,
        n.OUTPUT_TOKENS: answer.usage.output_tokens,
        "tooldeck.mcp.server": server,
        "tooldeck.mcp.sampling.tokens": used,
    }
    if tel.capture:
        attributes["tooldeck.mcp.sampling.request"] = str(request.messages)[: tel.content_limit]
        attributes["tooldeck.mcp.sampling.answer"] = answer.text[: tel.content_limit]
    with tel.tracer.start_as_current_span(f"mcp.sampling {server}", attributes=attributes):
        pass
