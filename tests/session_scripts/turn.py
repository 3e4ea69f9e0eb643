"""One process's turn of a stored session, for tests/test_sessions_store.py.

``python turn.py KIND WHERE SCHEMA SESSION_ID ACTION PROMPT [FOLDER]``: KIND is ``sqlite``
(WHERE a file) or ``postgres`` (WHERE a DSN, SCHEMA its schema). ACTION ``run`` runs a turn
of PROMPT, ``resume`` approves the waiting step. The scripted model (a script, not a
model) calls ``add`` for "add...", ``block`` for "block..." (which writes FOLDER/started
and waits for FOLDER/go), ``launch`` (needs approval) for "launch...", and otherwise says
how many items it was sent. Prints the result as JSON; a user error is one line on stderr,
exit status 2.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from tooldeck import ApprovalAnswer, PolicyDecision, Protection, Session, tool
from tooldeck.approvals import PendingApproval
from tooldeck.model import ModelRequest
from tooldeck.sessions import SessionBusy, SessionStore
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.transcript import AssistantMessage, UserMessage
from tooldeck.workflows.store import PostgresStore

kind, where, schema, session_id, action, prompt = sys.argv[1:7]
folder = Path(sys.argv[7]) if len(sys.argv) > 7 else Path(".")


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


@tool(read_only=True)
async def block() -> str:
    """Wait until told to go."""
    (folder / "started").write_text("yes")
    while not (folder / "go").exists():  # noqa: ASYNC110 - another process writes it
        await asyncio.sleep(0.05)
    return "went"


@tool
def launch() -> str:
    """Launch (needs approval)."""
    return "launched"


def script(request: ModelRequest) -> AssistantMessage:
    last = request.transcript[-1]
    if isinstance(last, UserMessage):
        for name in ("add", "block", "launch"):
            if last.text.startswith(name):
                return reply(call(name, {"a": 2, "b": 3} if name == "add" else {}))
        return reply(f"seen {len(request.transcript)} items")
    return reply("done: " + getattr(last, "text", ""))


def ask_launch(t: Any, params: Any, c: Any) -> PolicyDecision:
    return PolicyDecision("ask" if t.name == "launch" else "allow", "check")


async def later(requests: Any) -> Any:
    raise PendingApproval()


async def main() -> dict[str, Any]:
    db = PostgresStore(where, schema=schema) if kind == "postgres" else None
    async with SessionStore(db or where) as store:
        session = Session(
            ScriptedModel(script),
            [add, block, launch],
            store=store,
            session_id=session_id,
            protect=Protection.policy(ask_launch, approver=later),
        )
        if action == "resume":
            result = await session.resume([ApprovalAnswer(True)])
        else:
            result = await session.run(prompt)
        return {
            "output": result.output,
            "stop": str(result.stop_reason),
            "waiting": result.waiting,
            "items": len(session.transcript),
        }


try:
    print(json.dumps(asyncio.run(main())))
except (SessionBusy, RuntimeError) as exc:
    print(f"error: {exc}", file=sys.stderr)
    sys.exit(2)
