"""How long an out-of-band approval adds to a gateway call, once the person has answered.

A real ``tooldeck serve`` (stdio) in front of tests/mcp_servers/basic.py, reached with
the official MCP client SDK (no elicitation, so asks wait for ``tooldeck approve``).
Each round: a call to ``alpha__echo`` (WRITE: asked) starts; when its pending file
appears, the answers are written the way ``tooldeck approve`` writes them (under the
pending file's lock, ``save_answers``; the prompt and the approver's process start are a
person's time, not measured); measured is the time from that write to the client
holding the result. The floor, in the same run, alternated: the same call allowed by
the policy (no ask), end to end.

Run: ``uv run python bench/gateway_approvals.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tooldeck.approvals import ApprovalAnswer
from tooldeck.policy._files import locked
from tooldeck.policy.pending import read_pending, save_answers

HERE = Path(__file__).parent
PY = sys.executable
BASIC = HERE.parent / "tests" / "mcp_servers" / "basic.py"


async def answer_when_asked(state: Path) -> float:
    """Wait for the pending file, write an approval as tooldeck approve does; when."""
    while True:
        found = sorted((state / "approvals").glob("*.pending.json"))
        if found:
            break
        await anyio.sleep(0.01)
    path = found[0]
    session_id, _, step = read_pending(path)
    with locked(path):
        save_answers(
            path.with_name(f"{session_id}.answers.json"),
            session_id,
            {c.call_id: ApprovalAnswer(True) for c in step.calls},
        )
        return time.perf_counter()


async def answer(state: Path, written: list[float]) -> None:
    written.append(await answer_when_asked(state))


async def run(rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        config = root / "mcp.json"
        config.write_text(
            json.dumps({"mcpServers": {"alpha": {"command": PY, "args": [str(BASIC), "stdio"]}}})
        )
        policy = root / "policy.toml"
        policy.write_text('[profile]\n[[profile.rules]]\ntools = "alpha__add"\naction = "allow"\n')
        state = root / "s"
        serve = ["-m", "tooldeck.cli", "serve", "--mcp", str(config), "--state", str(state)]
        params = StdioServerParameters(
            command=PY, args=[*serve, "--lexical", "--core", "*", "--policy", str(policy)]
        )
        answered: list[float] = []
        allowed: list[float] = []
        written: list[float] = []
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            await client.call_tool("alpha__add", {"a": 1, "b": 1})  # warm
            for _ in range(rounds):
                start = time.perf_counter()
                await client.call_tool("alpha__add", {"a": 1, "b": 2})
                allowed.append(time.perf_counter() - start)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(answer, state, written)
                    result = await client.call_tool("alpha__echo", {"text": "x"})
                done = time.perf_counter()
                assert not result.is_error, result
                answered.append(done - written[-1])
    return {"allowed": allowed, "answered": answered}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    rounds = parser.parse_args().rounds
    out = anyio.run(run, rounds)
    for name, values in out.items():
        ms = sorted(v * 1000 for v in values)
        p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
        print(
            f"{name:>9}: median {statistics.median(ms):7.1f} ms  p95 {p95:7.1f} ms  "
            f"min {ms[0]:7.1f} ms  max {ms[-1]:7.1f} ms  (n={len(ms)})"
        )


if __name__ == "__main__":
    main()
