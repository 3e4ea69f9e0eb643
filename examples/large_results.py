"""Large results and recall: a log of 60,000 characters is stored, the model sees a summary.

With a home folder in the turn, a result over 15,000 tokens is written under
<home>/.tooldeck/tool-offload/ and the model gets a summary with a ref id; the
recall_tool_result tool (offered from the next step) pages through the original.
Without a home, the same result would only be cut (guard only, nothing written).
"""

import re
import tempfile
from pathlib import Path

import tooldeck
from tooldeck import TurnContext
from tooldeck.providers import model_from_env
from tooldeck.testing import ScriptedModel, call, reply


@tooldeck.tool(read_only=True)
def fetch_logs(service: str) -> str:
    """The service's full log."""
    lines = [
        f"2026-12-01T10:{i // 60 % 60:02d}:{i % 60:02d} {service} ok request {i}"
        for i in range(1_500)
    ]
    lines[1_234] = f"2026-12-01T12:44:36 {service} ERROR disk full"
    return "\n".join(lines)


def script(request):  # offline: fetch, then page through the stored log to the error
    outputs = [i for i in request.transcript if isinstance(i, tooldeck.ToolOutput)]
    if not outputs:
        return reply(call("fetch_logs", {"service": "api"}))
    last = outputs[-1].text
    if "ERROR" in last and len(outputs) > 1:
        return reply(
            f"Found it after {len(outputs) - 1} page(s): " + last[last.index("ERROR") :][:15]
        )
    ref = re.search(r"ref_[0-9a-f]{16}", outputs[0].text).group(0)
    offset = int(re.search(r"offset=(\d+)\)", last).group(1)) if len(outputs) > 1 else 0
    return reply(call("recall_tool_result", {"ref_id": ref, "offset": offset}))


with tempfile.TemporaryDirectory() as home:
    session = tooldeck.Session(
        model_from_env(ScriptedModel(script)),
        [fetch_logs],
        session_id="logs",
        turn=TurnContext("logs", home=home),
    )
    result = session.run_sync("Why did the api service fail?")
    summary = result.tool_outputs[0].text
    stored = list(Path(home).rglob("ref_*.json"))
    print(f"the model saw {len(summary):,} characters instead of the full log")
    print("stored:", stored[0].relative_to(home) if stored else "nothing")
    print("recall calls:", sum(o.name == "recall_tool_result" for o in result.tool_outputs))
    print("answer:", result.output)
