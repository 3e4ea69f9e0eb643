"""A gateway session keeps its dispatcher from call to call (made again when what it runs
with changes): each call is still judged, approved and audited as its own.

Real sessions (an empty upstream configuration, one native tool), real audit logs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anyio

from gateway_client import audit_lines
from tooldeck.approvals import ApprovalAnswer, ApprovalRequest
from tooldeck.gateway import Catalog
from tooldeck.gateway.session import GatewaySession
from tooldeck.mcp import McpSource
from tooldeck.policy import Policy
from tooldeck.tools import Tool


def _session(state: Path) -> GatewaySession:
    def note(text: str) -> str:
        return f"noted {text}"

    tool = Tool.from_function(note, name="note", description="a WRITE tool", read_only=False)
    catalog = Catalog(
        McpSource({"mcpServers": {}}, prefixed=False), semantic=False, native=[tool], core=["*"]
    )
    return GatewaySession(catalog, Policy(), state)


def _answering(approved: bool):  # type: ignore[no-untyped-def]
    async def ask(requests: Sequence[ApprovalRequest]) -> list[ApprovalAnswer]:
        return [ApprovalAnswer(approved, "" if approved else "no") for _ in requests]

    return ask


def test_each_call_gets_its_own_approver_and_audit_line(tmp_path: Path) -> None:
    session = _session(tmp_path)
    deny, allow = _answering(False), _answering(True)

    async def main() -> list[str]:
        texts = []
        for asker, args in (
            (deny, {"text": "a"}),
            (deny, {"text": "b"}),  # the same approver again
            (allow, {"text": "c"}),  # another approver: this one answers
            (deny, {"text": "d"}),  # and back
            (deny, {"text": 5}),  # invalid: never judged, the gateway's own line
            (allow, {"text": "e"}),
        ):
            result = await session.call("note", args, asker, who="tester")
            texts.append(result.text())
        unknown = await session.call("nope", {}, allow, who="tester")
        texts.append(unknown.text())
        return texts

    texts = anyio.run(main)
    assert [t.startswith("Denied") for t in texts[:4]] == [True, True, False, True]
    assert texts[2] == "noted c" and texts[5] == "noted e"
    assert texts[6].startswith("Unknown tool 'nope'")
    lines = [(e["decision"], e["level"], e["approved_by"]) for e in audit_lines(tmp_path)]
    asked = ("ask", "tier", None)
    assert lines == [
        asked,
        ("deny", "approval", None),
        asked,
        ("deny", "approval", None),
        asked,
        ("approve", "approval", "tester"),
        asked,
        ("deny", "approval", None),
        ("invalid", "gateway", None),
        asked,
        ("approve", "approval", "tester"),
        ("unknown", "gateway", None),
    ]
    session.close()
