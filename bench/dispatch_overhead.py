"""(d) One call through ``Dispatcher.dispatch``, against the plain-Python floor, in one run.

For ``add(a: int, b: int)`` each case turns the JSON arguments the model sent into a
validated call, runs it and produces the text the model gets:

- floor (async): ``json.loads`` + ``model_validate`` + ``await add()`` + ``json.dumps``;
- floor (thread): the same with ``add`` run by ``asyncio.to_thread``;
- tooldeck: ``await Dispatcher(...).dispatch([call])`` and ``outputs[0].text``, for an
  ``async def add`` and a default (worker thread) ``def add``, and again with an event
  subscriber attached (events are only built when somebody listens).

The dispatcher does everything it always does: lookup, validation, the policy hook, the
approval check, grouping, the timeout (300 s) and the abort signal, freezing the result,
one output per call. Cases are interleaved round by round, and each ratio is paired by
round (case median / floor median of the same round), so drift hits both alike.

``--src DIR`` imports tooldeck from another checkout's ``src`` (e.g. the commit before a
change) so that before and after can be measured the same way, each with its own floor.
``--against DIR`` measures both in one process: another checkout's ``src/tooldeck`` is
loaded beside this one as the package ``tooldeck_before`` (tooldeck imports itself only
relatively), and its dispatcher cases join the interleaved rounds.

Run: ``uv run --group bench python bench/dispatch_overhead.py [--rounds N] [--quick]``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

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


Call = Callable[[], Awaitable[str]]


@dataclass
class Case:
    label: str
    kind: str  # "async" or "thread": which floor it is compared with
    call: Call
    threaded: bool = False
    round_medians: list[float] = field(default_factory=list)
    samples: list[int] = field(default_factory=list)


def cases(package: str = "tooldeck", floors: bool = True) -> list[Case]:
    import importlib

    tooldeck: Any = importlib.import_module(package)
    Dispatcher, Toolset = tooldeck.Dispatcher, tooldeck.Toolset
    EventBus = importlib.import_module(f"{package}.events").EventBus
    ToolCall = importlib.import_module(f"{package}.transcript").ToolCall
    who = "tooldeck" if package == "tooldeck" else "before"

    loads, dumps, validate = json.loads, json.dumps, AddParams.model_validate

    async def floor_async() -> str:
        p = validate(loads(RAW))
        return dumps(await add(a=p.a, b=p.b))

    async def floor_thread() -> str:
        p = validate(loads(RAW))
        return dumps(await asyncio.to_thread(add_sync, a=p.a, b=p.b))

    t_async = tooldeck.tool(add)
    t_sync = tooldeck.tool(name="add")(add_sync)
    call = ToolCall("call_1", "add", RAW)

    def through(t: Any, listening: bool) -> Call:
        bus = EventBus()
        if listening:
            bus.subscribe(lambda event: None)
        dispatcher = Dispatcher(Toolset([t]), events=bus)

        async def run() -> str:
            result = await dispatcher.dispatch([call])
            return result.outputs[0].text

        return run

    made = [
        Case("floor: json.loads + model_validate + await add() + json.dumps", "async", floor_async),
        Case(f"{who}: Dispatcher.dispatch, async def add", "async", through(t_async, False)),
        Case(
            f"{who}: Dispatcher.dispatch, async def add, an event subscriber",
            "async",
            through(t_async, True),
        ),
        Case("floor: same, add() via asyncio.to_thread", "thread", floor_thread, True),
        Case(
            f"{who}: Dispatcher.dispatch, def add (worker thread, default)",
            "thread",
            through(t_sync, False),
            True,
        ),
    ]
    return made if floors else [c for c in made if not c.label.startswith("floor")]


async def measure(
    rounds: int, per_round: int, per_thread: int, against: bool = False
) -> list[Case]:
    all_cases = cases()
    if against:  # before and after alternate within each round: floor, before, after...
        before = cases("tooldeck_before", floors=False)
        floor, tool_a, tool_b, thread_floor, tool_t = all_cases
        all_cases = [floor, before[0], tool_a, before[1], tool_b, thread_floor, before[2], tool_t]
    for case in all_cases:
        assert await case.call() == "3", case.label
        for _ in range(200):  # warm up
            await case.call()
    clock = time.perf_counter_ns
    for _ in range(rounds):
        for case in all_cases:
            n = per_thread if case.threaded else per_round
            samples: list[int] = []
            gc.collect()
            gc.disable()
            try:
                for _ in range(n):
                    t0 = clock()
                    await case.call()
                    samples.append(clock() - t0)
            finally:
                gc.enable()
            case.samples.extend(samples)
            case.round_medians.append(statistics.median(samples) / 1000)
    return all_cases


def report(all_cases: list[Case], note: str) -> str:
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from _harness import machine_lines, summary_us, table

    floors = {c.kind: c for c in all_cases if c.label.startswith("floor")}
    rows = []
    for case in all_cases:
        floor = floors[case.kind]
        med, p90 = summary_us(case.samples)
        ratios = [a / b for a, b in zip(case.round_medians, floor.round_medians, strict=True)]
        rows.append(
            [
                case.label,
                f"{med:.2f}",
                f"{p90:.2f}",
                f"{statistics.median(ratios):.2f}x",
                f"{len(case.samples):,}",
            ]
        )
    lines = [
        *machine_lines(("tooldeck", "pydantic", "pydantic-core", "anyio")),
        f"- {note}",
        "",
        table(["case", "median µs", "p90 µs", "× its floor (paired by round)", "calls"], rows),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--per-round", type=int, default=4_000)
    parser.add_argument("--per-round-thread", type=int, default=800)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--src", help="import tooldeck from this src directory instead")
    parser.add_argument(
        "--against", help="a src directory whose tooldeck is measured beside, as before"
    )
    args = parser.parse_args()
    if args.src:
        sys.path.insert(0, args.src)
    tmp = None
    if args.against:
        import shutil
        import tempfile
        from pathlib import Path

        tmp = tempfile.mkdtemp()
        shutil.copytree(Path(args.against) / "tooldeck", Path(tmp) / "tooldeck_before")
        sys.path.insert(0, tmp)
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from _harness import BackgroundLoad, wait_for_idle

    if args.quick:
        args.rounds, args.per_round, args.per_round_thread = 3, 500, 100
    idle = wait_for_idle()
    load = BackgroundLoad()
    measured = asyncio.run(
        measure(args.rounds, args.per_round, args.per_round_thread, bool(args.against))
    )
    import tooldeck

    where: Any = tooldeck.__file__
    against = f"; before: {args.against}" if args.against else ""
    print(report(measured, f"{idle}; {load.report()}; tooldeck imported from {where}{against}"))
    if tmp is not None:
        import shutil

        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
