"""An upstream server's ``sampling/createMessage`` through the gateway.

The gateway's source (:class:`GatewaySource`) declares sampling to every upstream server.
A request an upstream sends while one of its tools runs for a client is answered for the
session whose call is running (the library's :class:`~tooldeck.mcp.asking.Asker`), in
this order (which call asked is the library's routing, :mod:`tooldeck.mcp.asking`, as for
an upstream's questions: exact where the protocol links a request to its call, refused
while calls of several sessions run on a server that names none, never guessed):

1. when the call's client declared ``sampling``, the request goes to it **as the server
   sent it** (``sampling/createMessage`` related to the client's ``tools/call``), once the
   session's policy lets the server sample; the client's answer is checked (a sampling
   result, an assistant's message) before it goes upstream; the client's error is the
   server's error;
2. otherwise, with a model configured (``tooldeck serve --sampling-model KIND:MODEL``), the
   library serves it (:func:`tooldeck.mcp.sampling.serve_sampling`: the policy, the
   per-server token budget, the audit and the ``mcp.sampling`` span);
3. otherwise it is refused at once, saying why (:data:`NO_SAMPLING`); so is a request
   sent while none of the server's tools runs for a client (:data:`NO_CALL`).

The policy judges it as the ``WRITE`` tool ``<server>__sampling_createMessage``, so with
no rule about it the session **asks** (the gateway's approval path: the client's user by
elicitation, ``tooldeck approve``, or nobody, and then it is refused saying how to allow
it); a rule allows or denies one server's sampling. Every refusal is a JSON-RPC error to
the server (``sampling refused: ...``) and an audit line; while it waits (for a human,
the client or the model), a client that cancels its call ends it at once
(:data:`tooldeck.mcp.asking.ENDED`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import mcp_types as types
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from pydantic import ValidationError

from ..mcp import McpConfig, McpSource
from ..mcp.asking import Asker, answer_routed, request_name
from ..mcp.sampling import (
    REFUSED,
    Refused,
    Sampling,
    permit,
    sampling_request,
    serve_sampling,
)
from ..policy import SessionPolicy
from .forwarding import Forwarding

__all__ = [
    "NO_CALL",
    "NO_SAMPLING",
    "GatewaySource",
    "UpstreamSampling",
    "takes_sampling",
]

_log = logging.getLogger("tooldeck.gateway")
NO_SAMPLING = (
    "this MCP client declared no sampling and the gateway has no model for it "
    "(tooldeck serve --sampling-model KIND:MODEL)"
)
NO_CALL = "no client's call is running on this server"
Result = types.CreateMessageResult | types.ErrorData


def takes_sampling(client: ServerSession | None) -> bool:
    """Whether ``client`` declared the sampling capability."""
    params = client.client_params if client is not None else None
    caps = params.capabilities if params is not None else None
    return caps is not None and caps.sampling is not None


def _refused(why: str) -> types.ErrorData:
    return types.ErrorData(code=REFUSED, message=f"sampling refused: {why}")


def _forwarding_of(asker: Asker) -> Forwarding | None:
    """The :class:`Forwarding` approver of the call the asker answers for (inside the
    session policy's approver), if any."""
    approver = asker.approver
    found = getattr(approver, "ask", approver)
    return found if isinstance(found, Forwarding) else None


def _judged_by_the_session(asker: Asker) -> Asker:
    """``asker`` with the call's session policy itself as its policy (the gateway's
    dispatcher judges through a hook of its own, which hides it): it judges the request
    as it judges calls, and its audit log gets the lines."""
    policy = getattr(asker.approver, "policy", None)  # the session's PolicyApprover
    if isinstance(policy, SessionPolicy):
        return replace(asker, policy=policy)
    return asker


class UpstreamSampling:
    """Answers upstream servers' sampling requests (see the module docstring)."""

    def __init__(self, sampling: Sampling | None) -> None:
        self.sampling = sampling

    async def answer(
        self, server: str, name: str, params: types.CreateMessageRequestParams, asker: Asker
    ) -> Result:
        asker = _judged_by_the_session(asker)
        session_id = asker.session_id
        if not session_id:  # asked outside any client's call (or after it ended)
            return self._refusal(asker, name, server, params, NO_CALL)
        return await self._served(server, name, params, asker)

    async def _served(
        self, server: str, name: str, params: types.CreateMessageRequestParams, asker: Asker
    ) -> Result:
        forward = _forwarding_of(asker)
        if forward is not None and takes_sampling(forward.client):
            return await self._forwarded(forward, server, name, params, asker)
        if self.sampling is not None:
            return await serve_sampling(server, name, params, asker, self.sampling)
        return self._refusal(asker, name, server, params, NO_SAMPLING)

    def _refusal(
        self,
        asker: Asker,
        name: str,
        server: str,
        params: types.CreateMessageRequestParams,
        why: str,
    ) -> types.ErrorData:
        _log.info("MCP server %r: sampling refused: %s", server, why)
        try:
            shown: Any = sampling_request(server, params)
        except Refused:
            shown = {"server": server}
        asker.audit(name, shown, "deny", why)
        return _refused(why)

    async def _forwarded(
        self,
        forward: Forwarding,
        server: str,
        name: str,
        params: types.CreateMessageRequestParams,
        asker: Asker,
    ) -> Result:
        client = forward.client
        assert client is not None
        try:
            request = sampling_request(server, params)  # not counted: the client's model pays
            await permit(asker, name, request)
        except Refused as exc:
            _log.info("MCP server %r: sampling refused: %s", server, exc)
            return _refused(str(exc))
        except Exception as exc:  # the approver's fault: said by its type only
            _log.warning("MCP server %r: sampling failed", server, exc_info=exc)
            why = f"sampling failed: {type(exc).__name__}"
            return types.ErrorData(code=types.INTERNAL_ERROR, message=why)
        sent = types.CreateMessageRequest(params=params.model_copy(update={"meta": None}))
        related = ServerMessageMetadata(related_request_id=forward.request_id)
        try:
            result = await client.send_request(sent, types.CreateMessageResult, metadata=related)
        except MCPError as exc:  # the client's own refusal: the server's error
            why = f"the client refused: {exc.error.message[:300]}"
            asker.audit(name, request, "deny", why)
            return types.ErrorData(code=exc.error.code, message=f"sampling refused: {why}")
        except ValidationError:
            why = "the client's answer is not a sampling result"
            return self._refusal(asker, name, server, params, why)
        except Exception as exc:  # the client went away, or failed: said by its type only
            _log.warning("sampling of %s not forwarded: %s", server, exc)
            why = f"the client did not answer ({type(exc).__name__})"
            return self._refusal(asker, name, server, params, why)
        if result.role != "assistant":
            why = "the client's answer is not an assistant's message"
            return self._refusal(asker, name, server, params, why)
        asker.audit(name, request, "sampled", f"answered by the client's model {result.model}")
        return result


class GatewaySource(McpSource):
    """The gateway's MCP source: :class:`~tooldeck.mcp.McpSource` declaring sampling to
    every upstream server, answered by :class:`UpstreamSampling`."""

    def __init__(
        self, config: McpConfig, *, upstream_sampling: UpstreamSampling, **options: Any
    ) -> None:
        super().__init__(config, **options)
        self.upstream_sampling = upstream_sampling
        for name, server in self._servers.items():
            server.conn.sampling = self._gateway_sampling(name)

    def _gateway_sampling(self, name: str) -> Callable[..., Awaitable[Result]]:
        called = request_name(name, "sampling/createMessage", prefixed=self.server_prefix)

        async def sample(context: Any, params: types.CreateMessageRequestParams) -> Result:
            return await answer_routed(
                self._servers[name].inflight,
                self.approver,
                self._caller_loop,
                called,
                lambda asker: self.upstream_sampling.answer(name, called, params, asker),
                _refused,
            )

        return sample
