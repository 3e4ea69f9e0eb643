"""A client's answers to the gateway's own requests, passed on to the process that asked.

A call of a handshake-era client that needs approval asks the client's user by
elicitation: the process serving the call sends an ``elicitation/create`` request on
the call's response stream and waits. The client answers with a POST of its own, which
a load balancer may send to another gateway process, where nothing waits for it. With a
shared session store, a process that waits for an answer in a session says so in the
store (its URL, :meth:`Replies.asker`), and a process that receives a client's answers
(a POST of JSON-RPC responses only) in that session passes the POST on, as it came
(its credentials too: the asking process checks them as its own), to every other
process waiting in it (:meth:`Replies.pass_on`); each takes the answers it waits for
and drops the others. A POST passed on carries :data:`PASSED_ON` and is never passed on
again.

The processes reach each other at the address each serves (``--host``, ``--http``): on
several machines, a ``--host`` the others can reach.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio

from ..approvals import ApprovalAnswer, ApprovalRequest, Approver
from ..workflows.store import StoreError
from .session_store import SessionTable

__all__ = ["PASSED_ON", "Replies", "only_answers"]

_log = logging.getLogger("tooldeck.gateway")
PASSED_ON = "x-tooldeck-passed-on"
"""The header of a client's POST one gateway process passed on to another."""
_NOT_PASSED = {b"host", b"content-length", b"connection", b"transfer-encoding"}
PASS_SECONDS = 10.0


def only_answers(body: bytes) -> bool:
    """Whether ``body`` holds JSON-RPC responses only (a client's answers), no request."""
    try:
        message: Any = json.loads(body)
    except ValueError:
        return False
    messages = message if isinstance(message, list) else [message]
    return bool(messages) and all(
        isinstance(m, dict) and "method" not in m and "id" in m and ("result" in m or "error" in m)
        for m in messages
    )


class Replies:
    """Who waits for a client's answers, in ``table``; this process is at :attr:`url`
    (set once it serves; until then nothing is registered or passed on)."""

    def __init__(self, table: SessionTable) -> None:
        self.table = table
        self.url: str | None = None
        self._held: Counter[str] = Counter()

    def asker(self, key: str, asker: Approver) -> Approver:
        """``asker`` (it asks the client of session ``key``), this process registered as
        waiting in that session while it asks."""

        async def ask(requests: Sequence[ApprovalRequest]) -> Sequence[ApprovalAnswer]:
            async with self._waiting(key):
                return await asker(requests)

        return ask

    @asynccontextmanager
    async def _waiting(self, key: str) -> AsyncIterator[None]:
        url = self.url
        if url is None:
            yield
            return
        self._held[key] += 1
        if self._held[key] == 1:
            try:
                await self.table.wait(key, url)
            except StoreError as exc:  # then the answer has to come here by itself
                _log.warning("the session store failed: %s", exc)
        try:
            yield
        finally:
            self._held[key] -= 1
            if not self._held[key]:
                del self._held[key]
                with anyio.CancelScope(shield=True):
                    try:
                        await self.table.unwait(key, url)
                    except StoreError as exc:
                        _log.warning("the session store failed: %s", exc)

    async def pass_on(self, key: str, body: bytes, headers: Sequence[tuple[bytes, bytes]]) -> None:
        """The client of session ``key`` sent answers here: to every other process that
        waits in that session (failures logged: the answer then goes unanswered there,
        and its wait ends as an unanswered approval does)."""
        import httpx2

        try:
            urls = [u for u in await self.table.waiting(key) if u != self.url]
        except StoreError as exc:
            _log.warning("the session store failed: %s", exc)
            return
        if not urls:
            return
        sent = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in headers]
        forwarded = [(k, v) for k, v in sent if k.lower().encode() not in _NOT_PASSED]
        forwarded.append((PASSED_ON, "1"))
        async with httpx2.AsyncClient(timeout=PASS_SECONDS) as http:
            for url in urls:
                try:
                    answer = await http.post(url, content=body, headers=forwarded)
                except httpx2.HTTPError as exc:
                    _log.warning("a client's answer was not passed on to %s: %s", url, exc)
                    continue
                if answer.status_code >= 300:
                    _log.warning(
                        "a client's answer passed on to %s was refused: %s",
                        url,
                        answer.status_code,
                    )
