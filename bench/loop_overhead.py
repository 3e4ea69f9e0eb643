"""Loop overhead: the agent loop + dispatcher per tool step, and ten parallel tools.

Side by side in one process: tooldeck, pydantic-ai, openai-agents and LangGraph, each
driven by its own scripted/test model facility (no network, no real model):

- tooldeck: ``tooldeck.run(ScriptedModel(fn), tools, prompt, max_steps=...)``
- pydantic-ai: ``Agent(FunctionModel(fn)).run(prompt)``
- openai-agents: a minimal ``agents.Model`` subclass returning ``ModelResponse`` with
  ``ResponseFunctionToolCall`` items, driven by ``Runner.run`` (tracing disabled)
- LangGraph: ``langgraph.prebuilt.create_react_agent`` over a tiny ``BaseChatModel``
  subclass that supports ``bind_tools`` and returns ``AIMessage(tool_calls=[...])``

Measure 1, per tool step: the scripted model asks for one call of an async ``add(a, b)``
on each of N steps, then answers. Per step = (run with N steps - run with 0 steps) / N,
from paired runs (a 0-step run, then an N-step run) so load that comes and goes cancels.

Measure 2, ten parallel tools: one model step asks for ten calls of a tool that does
``await asyncio.sleep(0.05)``, then the model answers. Tool phase = (that run - a run
with 0 calls), paired the same way.

Frameworks are interleaved round by round (order rotated each round).

Run: ``uv run --group bench python bench/loop_overhead.py [--rounds N] [--quick]``
Profile tooldeck's loop instead: ``... bench/loop_overhead.py --profile``
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import itertools
import json
import os
import pstats
import statistics
import time
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from _harness import BackgroundLoad, machine_lines, percentile, table, wait_for_idle

HEADING = "## Loop overhead (issue: dispatcher and agent loop)"
COMMAND = "uv run --group bench python bench/loop_overhead.py"
ADD_ARGS = {"a": 1, "b": 2}
ADD_JSON = json.dumps(ADD_ARGS)
PAUSE_SECONDS = 0.05
PAUSE_ARGS = {"seconds": PAUSE_SECONDS}
PAUSE_JSON = json.dumps(PAUSE_ARGS)
ANSWER = "done"
PROMPT = "Add some numbers."
STEP_GOAL_FACTOR = 10.0  # tooldeck per step at least 10x lower than the fastest peer
PARALLEL_GOAL_MS = 55.0


# -- the script every framework's model follows ------------------------------------------
class Script:
    """What the stand-in model says next: batches of calls, then a text answer.

    Shared by all four frameworks so every model does the same (trivial) work per step:
    pop the next batch, build that many calls in its own message types.
    """

    def __init__(self) -> None:
        self.batches: list[tuple[str, int]] = []
        self.ids = itertools.count(1)

    def load(self, tool_name: str, batches: list[int]) -> None:
        self.batches = [(tool_name, n) for n in reversed(batches)]

    def next(self) -> tuple[str, list[str]] | None:
        """(tool name, call ids) for the next step, or None: answer with text."""
        if not self.batches:
            return None
        name, n = self.batches.pop()
        return name, [f"call_{next(self.ids)}" for _ in range(n)]


SCRIPT = Script()


def arguments_for(name: str) -> tuple[dict[str, Any], str]:
    return (ADD_ARGS, ADD_JSON) if name == "add" else (PAUSE_ARGS, PAUSE_JSON)


# -- framework adapters -------------------------------------------------------------------
# Each adapter exposes ``steps(k)`` (k steps of one ``add`` call, then an answer) and
# ``parallel(k)`` (one step of k ``pause`` calls, then an answer). Both check that the
# run did what was scripted, cheaply, so a broken adapter cannot report a fast number.
Runner = Callable[[int], Awaitable[None]]


@dataclass
class Framework:
    name: str
    steps: Runner
    parallel: Runner
    note: str = ""  # how measure 1 drives it
    par_note: str = ""  # how measure 2 declares its tool


def make_tooldeck() -> list[Framework]:
    import tooldeck
    from tooldeck.testing import ScriptedModel, call, reply

    @tooldeck.tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @tooldeck.tool(read_only=True)
    async def pause(seconds: float) -> str:
        """Wait a while (read-only, so calls run in parallel)."""
        await asyncio.sleep(seconds)
        return "ok"

    @tooldeck.tool(name="pause")
    async def pause_default(seconds: float) -> str:
        """Wait a while (default @tool: not read-only, so sequential)."""
        await asyncio.sleep(seconds)
        return "ok"

    def fn(request: Any) -> Any:
        nxt = SCRIPT.next()
        if nxt is None:
            return reply(ANSWER)
        name, ids = nxt
        raw = arguments_for(name)[1]
        return reply(*(call(name, raw, call_id=i) for i in ids))

    def check(result: Any, k: int) -> None:
        outs = result.tool_outputs
        if result.output != ANSWER or len(outs) != k or any(o.result.is_error for o in outs):
            raise AssertionError(f"tooldeck run went wrong: {result.reason}, {outs[:1]}")

    async def steps(k: int) -> None:
        SCRIPT.load("add", [1] * k)
        result = await tooldeck.run(ScriptedModel(fn), [add], PROMPT, max_steps=k + 2)
        check(result, k)

    def parallel_with(tool: Any) -> Runner:
        async def parallel(k: int) -> None:
            SCRIPT.load("pause", [k] if k else [])
            result = await tooldeck.run(ScriptedModel(fn), [tool], PROMPT, max_steps=3)
            check(result, k)

        return parallel

    async def no_steps(k: int) -> None:  # this row is in measure 2 only
        raise NotImplementedError

    return [
        Framework(
            "tooldeck",
            steps,
            parallel_with(pause),
            "`ScriptedModel(fn)`, `tooldeck.run`",
            "`@tool(read_only=True)`: read-only tools run in parallel",
        ),
        Framework(
            "tooldeck, default `@tool`",
            no_steps,
            parallel_with(pause_default),
            par_note="not read-only, so sequential by design (information only)",
        ),
    ]


def make_pydantic_ai() -> Framework:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def fn(messages: list[Any], info: AgentInfo) -> ModelResponse:
        nxt = SCRIPT.next()
        if nxt is None:
            return ModelResponse(parts=[TextPart(ANSWER)])
        name, ids = nxt
        raw = arguments_for(name)[1]
        return ModelResponse(parts=[ToolCallPart(name, raw, tool_call_id=i) for i in ids])

    agent: Agent[None, str] = Agent(FunctionModel(fn))

    @agent.tool_plain
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @agent.tool_plain
    async def pause(seconds: float) -> str:
        """Wait a while."""
        await asyncio.sleep(seconds)
        return "ok"

    def check(result: Any, k: int) -> None:
        returns = [
            p
            for m in result.all_messages()
            for p in getattr(m, "parts", ())
            if getattr(p, "part_kind", "") == "tool-return"
        ]
        if result.output != ANSWER or len(returns) != k:
            raise AssertionError(f"pydantic-ai run went wrong: {result.output!r}, {len(returns)}")

    async def steps(k: int) -> None:
        SCRIPT.load("add", [1] * k)
        check(await agent.run(PROMPT), k)

    async def parallel(k: int) -> None:
        SCRIPT.load("pause", [k] if k else [])
        check(await agent.run(PROMPT), k)

    return Framework(
        "pydantic-ai", steps, parallel, "`FunctionModel`, `Agent.run`", "`@agent.tool_plain`"
    )


def make_openai_agents() -> Framework:
    import agents
    from agents import Agent, ModelResponse, Runner, Usage, function_tool
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    agents.set_tracing_disabled(True)

    class ScriptedAgentsModel(agents.Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            nxt = SCRIPT.next()
            output: list[Any]
            if nxt is None:
                text = ResponseOutputText(
                    text=ANSWER, type="output_text", annotations=[], logprobs=[]
                )
                output = [
                    ResponseOutputMessage(
                        id="msg_1",
                        type="message",
                        role="assistant",
                        status="completed",
                        content=[text],
                    )
                ]
            else:
                name, ids = nxt
                raw = arguments_for(name)[1]
                output = [
                    ResponseFunctionToolCall(
                        id=f"fc_{i}", call_id=i, type="function_call", name=name, arguments=raw
                    )
                    for i in ids
                ]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    @function_tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @function_tool
    async def pause(seconds: float) -> str:
        """Wait a while."""
        await asyncio.sleep(seconds)
        return "ok"

    agent = Agent(name="bench", model=ScriptedAgentsModel(), tools=[add, pause])

    def check(result: Any, k: int) -> None:
        outs = [i for i in result.new_items if type(i).__name__ == "ToolCallOutputItem"]
        if result.final_output != ANSWER or len(outs) != k:
            raise AssertionError(f"openai-agents went wrong: {result.final_output!r}, {len(outs)}")

    async def steps(k: int) -> None:
        SCRIPT.load("add", [1] * k)
        check(await Runner.run(agent, PROMPT, max_turns=k + 2), k)

    async def parallel(k: int) -> None:
        SCRIPT.load("pause", [k] if k else [])
        check(await Runner.run(agent, PROMPT, max_turns=3), k)

    return Framework(
        "openai-agents", steps, parallel, "custom `Model`, `Runner.run`", "`@function_tool`"
    )


def make_floor() -> Framework:
    """Measure 2's floor: ``asyncio.gather`` of the same sleeps, no framework, no model."""

    async def pause(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "ok"

    async def parallel(k: int) -> None:
        if k:
            await asyncio.gather(*(pause(PAUSE_SECONDS) for _ in range(k)))

    async def no_steps(k: int) -> None:
        raise NotImplementedError

    return Framework(
        "floor: plain `asyncio.gather`",
        no_steps,
        parallel,
        par_note="no framework: what the event loop's timers cost on this machine now",
    )


def make_langgraph(n_steps: int) -> Framework:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool as lc_tool
    from langchain_core.utils.function_calling import convert_to_openai_tool

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated in LangGraph 1.x
        from langgraph.prebuilt import create_react_agent

    class ScriptedChatModel(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "scripted"

        def _message(self) -> AIMessage:
            nxt = SCRIPT.next()
            if nxt is None:
                return AIMessage(content=ANSWER)
            name, ids = nxt
            args = arguments_for(name)[0]  # LangChain providers hand over parsed args
            calls = [{"name": name, "args": dict(args), "id": i, "type": "tool_call"} for i in ids]
            return AIMessage(content="", tool_calls=calls)

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any):
            return ChatResult(generations=[ChatGeneration(message=self._message())])

        async def _agenerate(
            self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> ChatResult:
            return ChatResult(generations=[ChatGeneration(message=self._message())])

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    @lc_tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @lc_tool
    async def pause(seconds: float) -> str:
        """Wait a while."""
        await asyncio.sleep(seconds)
        return "ok"

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = create_react_agent(ScriptedChatModel(), [add, pause])
    # Each step is two graph steps (model, tools); the default limit of 25 stops N=20.
    config = {"recursion_limit": 2 * n_steps + 10}

    def check(state: Any, k: int) -> None:
        msgs = state["messages"]
        outs = [m for m in msgs if m.type == "tool"]
        if msgs[-1].content != ANSWER or len(outs) != k:
            raise AssertionError(f"LangGraph went wrong: {msgs[-1].content!r}, {len(outs)}")

    async def steps(k: int) -> None:
        SCRIPT.load("add", [1] * k)
        check(await graph.ainvoke({"messages": [("user", PROMPT)]}, config=config), k)

    async def parallel(k: int) -> None:
        SCRIPT.load("pause", [k] if k else [])
        check(await graph.ainvoke({"messages": [("user", PROMPT)]}, config=config), k)

    return Framework(
        "LangGraph",
        steps,
        parallel,
        "`create_react_agent` + scripted `BaseChatModel`, `ainvoke`",
        "`@langchain_core.tools.tool` (ToolNode, v2: one `Send` per call)",
    )


# -- timing -------------------------------------------------------------------------------
@dataclass
class Series:
    """Paired samples of one framework for one measure."""

    name: str
    note: str
    deltas: list[float] = field(default_factory=list)  # per pair, seconds (already / N)
    round_medians: list[float] = field(default_factory=list)
    full: list[float] = field(default_factory=list)  # the loaded run's wall time, seconds
    cpu: list[float] = field(default_factory=list)  # per round, CPU seconds (already / N)

    @property
    def median(self) -> float:
        return statistics.median(self.round_medians)

    @property
    def p90(self) -> float:
        return percentile(sorted(self.deltas), 0.9)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu)


async def timed(run: Runner, k: int) -> tuple[float, float]:
    c0, t0 = time.process_time(), time.perf_counter()
    await run(k)
    return time.perf_counter() - t0, time.process_time() - c0


async def measure(
    frameworks: list[tuple[Framework, Runner]], k: int, rounds: int, reps: int, warmup: int
) -> tuple[list[Series], str]:
    """Pairs (0, k) per rep; per round, per framework: median of the pair differences / k."""
    for _fw, run in frameworks:
        for _ in range(warmup):
            await run(0)
            await run(k)
    series = [
        Series(fw.name, fw.note if run is fw.steps else fw.par_note) for fw, run in frameworks
    ]
    load = BackgroundLoad()
    for r in range(rounds):
        order = list(range(len(frameworks)))
        order = order[r % len(order) :] + order[: r % len(order)]
        for index in order:
            _, run = frameworks[index]
            s = series[index]
            gc.collect()
            deltas, cpus = [], []
            for _ in range(reps):
                t_zero, c_zero = await timed(run, 0)
                t_full, c_full = await timed(run, k)
                deltas.append((t_full - t_zero) / k)
                cpus.append((c_full - c_zero) / k)
                s.full.append(t_full)
            s.deltas += deltas
            s.round_medians.append(statistics.median(deltas))
            s.cpu.append(statistics.median(cpus))
    return series, load.report()


# -- report -------------------------------------------------------------------------------
def step_table(series: list[Series]) -> str:
    td = next(s for s in series if s.name == "tooldeck")
    rows = []
    for s in series:
        rows.append(
            [
                s.name,
                f"{s.median * 1e6:,.0f}",
                f"{s.p90 * 1e6:,.0f}",
                f"{s.cpu_median * 1e6:,.0f}",
                f"{statistics.median(s.full) * 1e3:.1f}",
                f"{s.median / td.median:.1f}x",
                s.note,
            ]
        )
    headers = [
        "framework",
        "µs / tool step (median)",
        "p90",
        "CPU µs / step",
        "N-step run ms",
        "× tooldeck",
        "driven by",
    ]
    return table(headers, rows)


def parallel_table(series: list[Series], k: int) -> str:
    rows = []
    for s in series:
        rows.append(
            [
                s.name,
                f"{s.median * k * 1e3:.1f}",
                f"{s.p90 * k * 1e3:.1f}",
                f"{s.cpu_median * k * 1e3:.2f}",
                f"{statistics.median(s.full) * 1e3:.1f}",
                f"{(s.median * k - PAUSE_SECONDS) * 1e3:.1f}",
                s.note,
            ]
        )
    headers = [
        "framework",
        "tool phase ms (median)",
        "p90",
        "CPU ms",
        "whole run ms",
        "over one 50 ms sleep",
        "tools",
    ]
    return table(headers, rows)


def verdicts(steps: list[Series], par: list[Series], k: int) -> list[str]:
    td = next(s for s in steps if s.name == "tooldeck")
    peers = [s for s in steps if s.name != "tooldeck"]
    fastest = min(peers, key=lambda s: s.median)
    factor = fastest.median / td.median
    fastest_cpu = min(peers, key=lambda s: s.cpu_median)
    cpu_factor = fastest_cpu.cpu_median / td.cpu_median
    ok1 = "MET" if factor >= STEP_GOAL_FACTOR else "MISSED"
    tdp = next(s for s in par if s.name == "tooldeck")
    floor = next(s for s in par if s.name.startswith("floor"))
    ms = tdp.median * k * 1e3
    ok2 = "MET" if ms < PARALLEL_GOAL_MS else "MISSED"
    return [
        f"- Goal 1, per tool step at least {STEP_GOAL_FACTOR:g}x lower than the fastest peer: "
        f"**{ok1}** (wall: tooldeck {td.median * 1e6:,.0f} µs, fastest peer {fastest.name} "
        f"{fastest.median * 1e6:,.0f} µs, {factor:.1f}x; tooldeck p90 {td.p90 * 1e6:,.0f} µs. "
        f"CPU: tooldeck {td.cpu_median * 1e6:,.0f} µs, fastest peer {fastest_cpu.name} "
        f"{fastest_cpu.cpu_median * 1e6:,.0f} µs, {cpu_factor:.1f}x)",
        f"- Goal 2, ten parallel 50 ms tools under {PARALLEL_GOAL_MS:g} ms: **{ok2}** "
        f"(tooldeck {ms:.1f} ms median, p90 {tdp.p90 * k * 1e3:.1f} ms; the no-framework "
        f"floor took {floor.median * k * 1e3:.1f} ms, so tooldeck added "
        f"{(tdp.median - floor.median) * k * 1e3:.1f} ms of wall time; its tool phase used "
        f"{tdp.cpu_median * k * 1e3:.2f} ms of CPU, the floor's "
        f"{floor.cpu_median * k * 1e3:.2f} ms; the goal is on the median)"
        + (
            "; the floor alone is over the goal, so this machine's load decides it"
            if floor.median * k * 1e3 >= PARALLEL_GOAL_MS
            else ""
        ),
    ]


async def main_async(args: argparse.Namespace) -> list[str]:
    tooldeck_fws = make_tooldeck()
    peers = [make_pydantic_ai(), make_openai_agents(), make_langgraph(args.n)]
    step_fws = [(fw, fw.steps) for fw in [tooldeck_fws[0], *peers]]
    par_fws = [(fw, fw.parallel) for fw in [make_floor(), tooldeck_fws[0], *peers, tooldeck_fws[1]]]

    started = time.perf_counter()
    steps, load1 = await measure(step_fws, args.n, args.rounds, args.reps, args.warmup)
    t1 = time.perf_counter() - started
    started = time.perf_counter()
    # The sequential tooldeck row takes 0.5 s a run: one pair per round is enough.
    par, load2 = await measure(par_fws[:-1], args.calls, args.rounds, args.par_reps, 1)
    seq, _ = await measure(par_fws[-1:], args.calls, max(3, args.rounds // 5), 1, 0)
    t2 = time.perf_counter() - started

    out = [
        f"### Measure 1: loop overhead per tool step (N = {args.n}, async `add(a, b)`)",
        "",
        f"- {args.rounds} rounds x {args.reps} pairs (0-step run, {args.n}-step run) per "
        f"framework, frameworks interleaved, {args.warmup} warm-up pairs; wall {t1:.0f} s; "
        f"{load1}",
        "",
        step_table(steps),
        "",
        f"µs / tool step: (N-step run − 0-step run) / N for each pair; median = median over "
        f"rounds of each round's median pair; p90 over all {args.rounds * args.reps} pairs. "
        "A step is one scripted model response with one call + running the call + feeding "
        "the output back. CPU µs / step: process CPU time, same pairing (median of round "
        "medians), which other load on the machine inflates less than wall time.",
        "",
        f"### Measure 2: {args.calls} parallel tools, each `await asyncio.sleep(0.05)`",
        "",
        f"- {args.rounds} rounds x {args.par_reps} pairs (0-call run, {args.calls}-call run) "
        f"per framework; wall {t2:.0f} s; {load2}",
        "",
        parallel_table(par + seq, args.calls),
        "",
        f"tool phase = ({args.calls}-call run − 0-call run), which also holds the one extra "
        "model step; 50 ms is the floor. All three peers ran the calls concurrently "
        "(anything near 500 ms would mean one after another).",
        "",
        "### Goals",
        "",
        *verdicts(steps, par, args.calls),
    ]
    return out


def profile(args: argparse.Namespace) -> None:
    """cProfile of tooldeck's runs for one measure (how a missed goal is traced)."""
    tooldeck_fw = make_tooldeck()[0]
    steps = args.profile == "steps"
    run, k = (tooldeck_fw.steps, args.n) if steps else (tooldeck_fw.parallel, args.calls)
    runs = args.profile_runs if steps else max(1, args.profile_runs // 5)

    async def go(times: int) -> None:
        for _ in range(times):
            await run(k)

    asyncio.run(go(20))
    prof = cProfile.Profile()
    c0, t0 = time.process_time(), time.perf_counter()
    prof.enable()
    asyncio.run(go(runs))
    prof.disable()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    what = f"{k} steps of one call" if steps else f"one step of {k} parallel sleeps"
    print(
        f"# cProfile: {runs} tooldeck runs x {what}; under the profiler "
        f"wall {wall / runs * 1e3:.2f} ms/run, CPU {cpu / runs * 1e3:.2f} ms/run"
    )
    for key in ("tottime", "cumulative"):
        stats.sort_stats(key).print_stats(args.profile_top)
    print(buf.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20, help="tool steps per run (measure 1)")
    parser.add_argument("--calls", type=int, default=10, help="parallel calls (measure 2)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--reps", type=int, default=7, help="pairs per round, measure 1")
    parser.add_argument("--par-reps", type=int, default=3, help="pairs per round, measure 2")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument(
        "--profile",
        nargs="?",
        const="steps",
        choices=["steps", "parallel"],
        help="instead of the comparison: cProfile tooldeck's runs of one measure",
    )
    parser.add_argument("--profile-runs", type=int, default=300)
    parser.add_argument("--profile-top", type=int, default=30)
    args = parser.parse_args()
    if args.profile:
        profile(args)
        return
    if args.quick:
        args.rounds, args.reps, args.par_reps, args.warmup = 2, 2, 1, 1
    idle = wait_for_idle()
    started = time.perf_counter()
    body = asyncio.run(main_async(args))
    print(HEADING + "\n")
    rerun = COMMAND + (" --quick" if args.quick else "")
    print(f"Rerun: `{rerun}` (cProfile of tooldeck's loop: `{COMMAND} --profile`)\n")
    print("\n".join(machine_lines()))
    print(f"- {idle}; whole run {time.perf_counter() - started:.0f} s; pid {os.getpid()}\n")
    print("\n".join(body))


if __name__ == "__main__":
    main()
