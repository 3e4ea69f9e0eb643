"""What a budget costs a turn (issue 34 item 4), in instructions (no timing: load-proof).

``PYTHONHASHSEED=0 valgrind --tool=cachegrind --cache-sim=no python bench/budget_cost.py MODE``
for MODE in ``startup`` (imports only), ``none``, ``budget`` (requests, total tokens and tool
calls), ``priced`` (requests and a cost with a ``per_million`` table): 200 turns of 5 model
steps and 4 tool calls each with the scripted model. Per turn: (MODE - startup) / 200.
"""

import asyncio
import sys

from tooldeck import Budget, Session, tool
from tooldeck.budget import per_million
from tooldeck.testing import ScriptedModel, call, reply


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


mode = sys.argv[1]
script = [reply(call("add", {"a": 1, "b": 2})) for _ in range(4)] + [reply("done")]


async def main() -> None:
    if mode == "startup":
        return
    for _ in range(200):
        budget = None
        if mode == "budget":
            budget = Budget(requests=100, total_tokens=10**6, tool_calls=100)
        elif mode == "priced":
            budget = Budget(requests=100, cost=100, prices=per_million({"scripted": (1.0, 2.0)}))
        session = Session(ScriptedModel(list(script)), [add], guard=False)
        await session.run("go", budget=budget)


asyncio.run(main())
