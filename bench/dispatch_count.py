"""Instruction counts of one dispatcher call and one loop step (issue 32 item 4).

Runs MODE N times after a warm-up, to be counted by cachegrind; per call is the
difference of two counts divided by the difference of N (it does not move with load):

    c() { PYTHONHASHSEED=0 valgrind --tool=cachegrind --cache-sim=no \
          --cachegrind-out-file=/dev/null .venv/bin/python bench/dispatch_count.py $1 $2 \
          2>&1 | grep "I *refs"; }
    c dispatch 500; c dispatch 3500    # (second - first) / 3000 per call
    c loop 20; c loop 220              # (second - first) / 600 per step (three turns each)

MODE: ``floor`` (json.loads + model_validate + await add() + json.dumps), ``dispatch``
(``Dispatcher.dispatch`` of an ``async def add``), ``listen`` (the same with an event
subscriber), ``thread`` (a ``def add`` in the worker thread), ``loop`` (``Session.run``
with a scripted model, one ``add`` call per step). ``PYTHONPATH=/tmp/base/src`` runs
another checkout's ``src`` the same way.
"""

import asyncio
import itertools
import json
import sys

from pydantic import BaseModel, ConfigDict

import tooldeck
from tooldeck import Dispatcher, Toolset
from tooldeck.events import EventBus
from tooldeck.transcript import ToolCall

mode, n = sys.argv[1], int(sys.argv[2])
RAW = '{"a": 1, "b": 2}'


class AddParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    a: int
    b: int


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def add_sync(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


call = ToolCall("call_1", "add", RAW)
bus = EventBus()
if mode == "listen":
    bus.subscribe(lambda e: None)
t = tooldeck.tool(name="add")(add_sync) if mode == "thread" else tooldeck.tool(add)
d = Dispatcher(Toolset([t]), events=bus)
loads, dumps, validate = json.loads, json.dumps, AddParams.model_validate


async def floor():
    p = validate(loads(RAW))
    return dumps(await add(a=p.a, b=p.b))


async def disp():
    r = await d.dispatch([call])
    return r.outputs[0].text


if mode == "loop":
    from tooldeck import ScriptedModel, Session
    from tooldeck.providers.scripted import call as scall
    from tooldeck.providers.scripted import reply

    ids = itertools.count()

    def script(k):
        left = [k]

        def fn(request):
            if left[0] == 0:
                return reply("done")
            left[0] -= 1
            return reply(scall("add", RAW, call_id=f"c{next(ids)}"))

        return fn

    async def turns(k):
        for _ in range(3):
            s = Session(ScriptedModel(script(k)), [t], max_steps=k + 2)
            r = await s.run("Add some numbers.")
            assert r.output == "done" and len(r.tool_outputs) == k

    async def main():
        await turns(5)
        await turns(n)

    asyncio.run(main())
    sys.exit()
f = floor if mode == "floor" else disp


async def main():
    for _ in range(200):
        assert await f() == "3"
    for _ in range(n):
        await f()


asyncio.run(main())
