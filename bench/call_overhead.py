"""(a) Per-call overhead: JSON argument string -> validated call -> result text.

For ``add(a: int, b: int)``, each case turns the raw JSON arguments the model sent into
a validated call, runs it, and packages the return value as the text the model gets.
Every case is an ``async def`` awaited by the same timing loop, so the loop's own cost
(about 0.1 µs) is in every row alike. Cases are interleaved round by round so drift
(thermal, other load) hits all of them equally.

Run: ``uv run --group bench python bench/call_overhead.py [--rounds N] [--quick]``
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
from pydantic import BaseModel, ConfigDict

import tooldeck
from _harness import (
    BackgroundLoad,
    machine_lines,
    sample_async,
    summary_us,
    table,
    wait_for_idle,
)
from tooldeck import ToolContext, validate_arguments

RAW = '{"a": 1, "b": 2}'
EXPECTED = "3"
CALL_ID = "call_1"


# -- the functions under test ---------------------------------------------------------
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def add_sync(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class AddParams(BaseModel):
    model_config = ConfigDict(extra="forbid")  # what tooldeck's generated model does too
    a: int
    b: int


# Other argument shapes, tooldeck only (second table): a dict instead of a JSON string
# (Anthropic sends parsed objects), and an optional parameter with a default.
ARGS = {"a": 1, "b": 2}


async def add_default(a: int, b: int = 0) -> int:
    """Add two integers; b defaults to 0."""
    return a + b


async def add_nullable(a: int, b: int | None = None) -> int:
    """Add two integers; b is optional."""
    return a + (b or 0)


class AddDefaultParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    a: int
    b: int = 0


class AddNullableParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    a: int
    b: int | None = None


Call = Callable[[], Awaitable[str]]


@dataclass
class Case:
    label: str
    group: str  # "async", "sync-inline", "sync-thread", or an "extra:" shape
    call: Call
    threaded: bool = False
    samples: list[int] = field(default_factory=list)
    cpu_ns: list[float] = field(default_factory=list)  # process CPU per call, per round
    round_medians: list[float] = field(default_factory=list)  # wall median, per round


# -- floors: plain Python ---------------------------------------------------------------
def floor_cases() -> list[Case]:
    loads, dumps, validate = json.loads, json.dumps, AddParams.model_validate

    async def floor_sync() -> str:
        p = validate(loads(RAW))
        return dumps(add_sync(a=p.a, b=p.b))

    async def floor_async() -> str:
        p = validate(loads(RAW))
        return dumps(await add(a=p.a, b=p.b))

    async def floor_thread() -> str:
        p = validate(loads(RAW))
        value = await anyio.to_thread.run_sync(functools.partial(add_sync, a=p.a, b=p.b))
        return dumps(value)

    async def floor_asyncio_thread() -> str:
        p = validate(loads(RAW))
        return dumps(await asyncio.to_thread(add_sync, a=p.a, b=p.b))

    return [
        Case("floor: json.loads + model_validate + add() + json.dumps", "sync-inline", floor_sync),
        Case("floor: same, `await add()` (async def)", "async", floor_async),
        Case(
            "floor: same, add() via anyio.to_thread.run_sync",
            "sync-thread",
            floor_thread,
            threaded=True,
        ),
        Case(
            "floor: same, add() via asyncio.to_thread",
            "sync-thread",
            floor_asyncio_thread,
            threaded=True,
        ),
    ]


# -- tooldeck -----------------------------------------------------------------------
def tooldeck_cases() -> list[Case]:
    t_async = tooldeck.tool(add)
    t_thread = tooldeck.tool(name="add")(add_sync)
    t_inline = tooldeck.tool(name="add", run_sync_in_thread=False)(add_sync)

    def make(t: tooldeck.Tool) -> Call:
        async def call() -> str:
            validated = validate_arguments(t, RAW)
            result = await t.invoke(validated.params, ToolContext())
            return result.text()

        return call

    return [
        Case("tooldeck: async def add", "async", make(t_async)),
        Case("tooldeck: def add, run_sync_in_thread=False", "sync-inline", make(t_inline)),
        Case("tooldeck: def add (worker thread, default)", "sync-thread", make(t_thread), True),
    ]


def extra_cases() -> list[Case]:
    loads, dumps = json.loads, json.dumps
    t_add = tooldeck.tool(add)
    t_default = tooldeck.tool(add_default)
    t_nullable = tooldeck.tool(add_nullable)

    async def floor_dict() -> str:
        p = AddParams.model_validate(ARGS)
        return dumps(await add(a=p.a, b=p.b))

    async def floor_default() -> str:
        p = AddDefaultParams.model_validate(loads(RAW))
        return dumps(await add_default(a=p.a, b=p.b))

    async def floor_nullable() -> str:
        p = AddNullableParams.model_validate(loads(RAW))
        return dumps(await add_nullable(a=p.a, b=p.b))

    def make(t: tooldeck.Tool, raw: Any) -> Call:
        async def call() -> str:
            validated = validate_arguments(t, raw)
            result = await t.invoke(validated.params, ToolContext())
            return result.text()

        return call

    return [
        Case("floor: model_validate(dict) + await add() + json.dumps", "extra:dict", floor_dict),
        Case("tooldeck: async def add, arguments as a dict", "extra:dict", make(t_add, ARGS)),
        Case("floor: add(a: int, b: int = 0)", "extra:default", floor_default),
        Case("tooldeck: add(a: int, b: int = 0)", "extra:default", make(t_default, RAW)),
        Case("floor: add(a: int, b: int | None = None)", "extra:nullable", floor_nullable),
        Case(
            "tooldeck: add(a: int, b: int | None = None)",
            "extra:nullable",
            make(t_nullable, RAW),
        ),
    ]


# -- pydantic-ai ----------------------------------------------------------------------
def pydantic_ai_cases() -> list[Case]:
    # What ToolManager._validate_tool_args + FunctionToolset.call_tool do for one call:
    # args = validator.validate_json(raw), then function_schema.call(args, ctx); the
    # model sees ToolReturnPart.model_response_str(). The RunContext is built once here
    # (a run builds one per call with dataclasses.replace; not counted, in its favour).
    from pydantic_ai import RunContext, Tool
    from pydantic_ai.messages import ToolReturnPart
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.usage import RunUsage

    ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())

    def make(fn: Callable[..., Any]) -> Call:
        schema = Tool(fn, name="add").function_schema
        validator = schema.validator

        async def call() -> str:
            args = validator.validate_json(RAW, allow_partial="off", context=None)
            value = await schema.call(args, ctx)
            part = ToolReturnPart(tool_name="add", content=value, tool_call_id=CALL_ID)
            return part.model_response_str()

        return call

    return [
        Case("pydantic-ai: async def add", "async", make(add)),
        Case("pydantic-ai: def add (run_in_executor)", "sync-thread", make(add_sync), True),
    ]


# -- openai-agents -----------------------------------------------------------------------
def openai_agents_cases() -> list[Case]:
    # FunctionTool.on_invoke_tool(ctx, raw_json) parses, validates and calls; the runner
    # then turns the return value into the function_call_output item the model sees.
    from agents import function_tool
    from agents.items import ItemHelpers
    from agents.tool_context import ToolContext as AgentsToolContext
    from openai.types.responses import ResponseFunctionToolCall

    model_call = ResponseFunctionToolCall(
        arguments=RAW, call_id=CALL_ID, name="add", type="function_call"
    )

    def make(fn: Callable[..., Any]) -> Call:
        ft = function_tool(fn, name_override="add")
        on_invoke = ft.on_invoke_tool

        async def call() -> str:
            ctx = AgentsToolContext(
                context=None, tool_name="add", tool_call_id=CALL_ID, tool_arguments=RAW
            )
            value = await on_invoke(ctx, RAW)
            return ItemHelpers.tool_call_output_item(model_call, value)["output"]

        return call

    return [
        Case("openai-agents: async def add", "async", make(add)),
        Case("openai-agents: def add (asyncio.to_thread)", "sync-thread", make(add_sync), True),
    ]


# -- langchain / langgraph ---------------------------------------------------------------
def langchain_cases() -> list[Case]:
    # From the JSON string: a ToolCall dict, then BaseTool.ainvoke(tool_call) returns the
    # ToolMessage whose content the model sees. ToolNode is LangGraph's prebuilt node
    # (called directly with the runtime it expects; no compiled graph around it).
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool as lc_tool
    from langgraph.prebuilt import ToolNode
    from langgraph.runtime import Runtime

    config: Any = {"configurable": {"__pregel_runtime": Runtime(context=None)}}
    loads = json.loads

    def make(fn: Callable[..., Any]) -> Call:
        t = lc_tool("add")(fn)

        async def call() -> str:
            tool_call = {"name": "add", "args": loads(RAW), "id": CALL_ID, "type": "tool_call"}
            msg = await t.ainvoke(tool_call)
            return str(msg.content)

        return call

    def make_node(fn: Callable[..., Any]) -> Call:
        node = ToolNode([lc_tool("add")(fn)])

        async def call() -> str:
            tool_call = {"name": "add", "args": loads(RAW), "id": CALL_ID, "type": "tool_call"}
            state = {"messages": [AIMessage(content="", tool_calls=[tool_call])]}
            out = await node.ainvoke(state, config)
            return str(out["messages"][0].content)

        return call

    return [
        Case("langchain-core: @tool async def add, ainvoke(tool_call)", "async", make(add)),
        Case("langgraph: ToolNode, async def add", "async", make_node(add)),
        Case(
            "langchain-core: @tool def add (run_in_executor)",
            "sync-thread",
            make(add_sync),
            True,
        ),
        Case(
            "langgraph: ToolNode, def add (run_in_executor)",
            "sync-thread",
            make_node(add_sync),
            True,
        ),
    ]


# -- runner ------------------------------------------------------------------------------
async def run(
    rounds: int, per_round: int, per_round_thread: int, warmup: int
) -> tuple[list[Case], str]:
    cases = (
        floor_cases()
        + tooldeck_cases()
        + pydantic_ai_cases()
        + openai_agents_cases()
        + langchain_cases()
        + extra_cases()
    )
    for case in cases:
        got = await case.call()
        if got != EXPECTED:
            raise SystemExit(f"{case.label}: returned {got!r}, expected {EXPECTED!r}")
    for case in cases:  # warm-up: caches, lazy imports, worker threads
        await sample_async(case.call, warmup, [])
    gc.collect()
    load = BackgroundLoad()
    for _ in range(rounds):
        for case in cases:
            n = per_round_thread if case.threaded else per_round
            cpu0 = time.process_time_ns()
            await sample_async(case.call, n, case.samples)
            case.cpu_ns.append((time.process_time_ns() - cpu0) / n)
            case.round_medians.append(statistics.median(case.samples[-n:]))
    return cases, load.report()


def _cpu_us(case: Case) -> float:
    """CPU µs per call in the least disturbed round (the intrinsic cost)."""
    return min(case.cpu_ns) / 1000.0


def _ratio(case: Case, floor: Case) -> float:
    """Median over rounds of (case's round median / floor's round median), paired by round."""
    pairs = zip(case.round_medians, floor.round_medians, strict=True)
    return statistics.median(c / f for c, f in pairs)


def report(cases: list[Case]) -> str:
    floors: dict[str, Case] = {}
    for c in cases:  # the fastest floor of each kind is that kind's reference
        if c.label.startswith("floor:") and (
            c.group not in floors
            or summary_us(c.samples)[0] < summary_us(floors[c.group].samples)[0]
        ):
            floors[c.group] = c
    base = floors["sync-inline"]
    base_cpu = _cpu_us(base)
    rows = []
    order = {"async": 0, "sync-inline": 1, "sync-thread": 2}
    main_cases = [c for c in cases if not c.group.startswith("extra:")]
    for case in sorted(main_cases, key=lambda c: order[c.group]):
        med, p90 = summary_us(case.samples)
        cpu = _cpu_us(case)
        rows.append(
            [
                case.label,
                f"{med:.2f}",
                f"{p90:.2f}",
                f"{cpu:.2f}",
                f"{_ratio(case, base):.2f}x",
                f"{cpu / base_cpu:.2f}x",
                f"{_ratio(case, floors[case.group]):.2f}x",
                f"{len(case.samples):,}",
            ]
        )
    headers = [
        "case",
        "median µs",
        "p90 µs",
        "CPU µs/call",
        "× floor",
        "× floor (CPU)",
        "× floor of its kind",
        "calls timed",
    ]
    return table(headers, rows)


def report_extra(cases: list[Case]) -> str:
    rows = []
    extra = [c for c in cases if c.group.startswith("extra:")]
    floors = {c.group: c for c in extra if c.label.startswith("floor:")}
    for case in extra:
        med, p90 = summary_us(case.samples)
        floor = floors[case.group]
        rows.append(
            [
                case.label,
                f"{med:.2f}",
                f"{p90:.2f}",
                f"{_cpu_us(case):.2f}",
                f"{_ratio(case, floor):.2f}x",
                f"{_cpu_us(case) / _cpu_us(floor):.2f}x",
            ]
        )
    headers = ["case", "median µs", "p90 µs", "CPU µs/call", "× its floor", "× its floor (CPU)"]
    return table(headers, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--per-round", type=int, default=2000)
    parser.add_argument("--per-round-thread", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.per_round, args.per_round_thread, args.warmup = 2, 200, 50, 100
    idle = wait_for_idle()
    started = time.perf_counter()
    cases, load = asyncio.run(run(args.rounds, args.per_round, args.per_round_thread, args.warmup))
    print("## (a) Per-call overhead: JSON arguments -> validated call -> result text\n")
    print("\n".join(machine_lines()))
    print(
        f"- rounds: {args.rounds} x {args.per_round} calls per case "
        f"({args.per_round_thread} for thread-hopping cases), {args.warmup} warm-up calls each; "
        f"wall {time.perf_counter() - started:.0f} s; {idle}; {load}\n"
    )
    print(report(cases))
    print(
        "\nmedian / p90: wall time of single calls, all rounds. CPU µs/call: process CPU time "
        "(all threads) of a round's batch divided by its calls, in the least disturbed round "
        "(the intrinsic cost; other processes on the machine inflate wall time more). "
        "`× floor` columns: median over rounds of the case's round median divided by the "
        "floor's round median in the same round (paired, so load that comes and goes cancels); "
        "`× floor (CPU)`: ratio of the CPU columns. "
        "`× floor` is against the sync floor (plain `json.loads` + `model_validate` + "
        "direct call + `json.dumps`); `× floor of its kind` is against the floor with the "
        "same kind of `add` (async / inline sync / sync through a worker thread; for the "
        "last, the faster of the two thread floors)."
    )
    print("\n" + verdict(cases))
    print(
        "\nOther argument shapes, tooldeck only (async def; each against the plain-Python "
        "floor for the same shape). The dict case is what Anthropic sends (already parsed); "
        "`b: int = 0` is an optional parameter that does not accept null, which takes "
        "tooldeck's null-mapping path; `b: int | None = None` accepts null and does not:\n"
    )
    print(report_extra(cases))


def verdict(cases: list[Case]) -> str:
    by_label = {c.label: c for c in cases}
    floor = by_label["floor: json.loads + model_validate + add() + json.dumps"]
    floor_async = by_label["floor: same, `await add()` (async def)"]
    lines = ["Goal: tooldeck at most 2x the floor"]
    for label in ("tooldeck: async def add", "tooldeck: def add, run_sync_in_thread=False"):
        td = by_label[label]
        wall = _ratio(td, floor)
        wall_async = _ratio(td, floor_async)
        cpu = _cpu_us(td) / _cpu_us(floor)
        ok = "MET" if max(wall, cpu) <= 2.0 else "MISSED"
        lines.append(
            f"- {label}: {ok} (wall {wall:.2f}x the sync floor, {wall_async:.2f}x the "
            f"async floor; CPU {cpu:.2f}x the sync floor)"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
