"""Where tooldeck spends its time in the three benchmarked paths (cProfile + step timings).

- ``call``: the (a) path for ``async def add``, step by step (µs per step, no profiler),
  then cProfile of 20,000 calls;
- ``build``: cProfile of ``tool(fn)`` + ``project(t, "openai-responses")`` for 1,000
  generated tools in this (fresh) process, plus a per-phase split timed without profiler;
- ``external``: cProfile of ``validate_arguments`` on the (c) schema's valid instance.

cProfile inflates small Python functions; read it for *where*, the step timings for *how
much*.

Run: ``uv run --group bench python bench/profile_tooldeck.py [call|build|external] [--top N]``
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import importlib
import inspect
import json
import pstats
import time
import typing
from collections.abc import Callable
from typing import Any

import tooldeck
from _harness import summary_us
from tooldeck import ToolContext, ToolResult, validate_arguments
from tooldeck.schema import project


def _step(label: str, fn: Callable[[], Any], n: int = 20000) -> None:
    clock = time.perf_counter_ns
    samples = []
    for _ in range(n):
        t0 = clock()
        fn()
        samples.append(clock() - t0)
    med, p90 = summary_us(samples)
    print(f"  {label:<58} {med:7.2f} µs (p90 {p90:.2f})")


def _profile(fn: Callable[[], Any], top: int) -> None:
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


def profile_call(top: int) -> None:
    from call_overhead import RAW, AddParams, add

    t = tooldeck.tool(add)
    validated = validate_arguments(t, RAW)
    params = validated.params
    loop = asyncio.new_event_loop()
    result = loop.run_until_complete(t.invoke(params, ToolContext()))
    execute = t._execute
    assert execute is not None
    is_async_callable = importlib.import_module("tooldeck.tools")._is_async_callable

    def run_coro(coro: Any) -> Any:
        try:
            coro.send(None)
        except StopIteration as stop:
            return stop.value
        raise AssertionError("the coroutine suspended")

    print("tooldeck call path, one step at a time (coroutines driven without a loop):")
    _step("validate_arguments(t, RAW)", lambda: validate_arguments(t, RAW))
    _step(
        "  AddParams.model_validate_json(RAW) (its fast path)",
        lambda: AddParams.model_validate_json(RAW),
    )
    _step("ToolContext()", ToolContext)
    _step(
        "t.invoke(params, ctx) (driven to completion)",
        lambda: run_coro(t.invoke(params, ToolContext())),
    )
    _step("  execute(params, ctx) wrapper alone", lambda: run_coro(execute(params, ctx0)))
    _step(
        "  tooldeck.tools._is_async_callable(execute)",
        lambda: is_async_callable(execute),
    )
    _step("  inspect.isawaitable(3)", lambda: inspect.isawaitable(3))
    _step("  await add(a=1, b=2) (the function itself)", lambda: run_coro(add(a=1, b=2)))
    _step("  ToolResult.wrap(3)", lambda: ToolResult.wrap(3))
    _step("result.text()", result.text)
    print("floor steps:")
    _step(
        "json.loads(RAW) + AddParams.model_validate",
        lambda: AddParams.model_validate(json.loads(RAW)),
    )
    _step("json.dumps(3)", lambda: json.dumps(3))
    _step(
        "json.dumps(3, ensure_ascii=False, separators=(',', ':'), default=str)",
        lambda: json.dumps(3, ensure_ascii=False, separators=(",", ":"), default=str),
    )

    async def many() -> None:
        for _ in range(20000):
            v = validate_arguments(t, RAW)
            r = await t.invoke(v.params, ToolContext())
            r.text()

    print("\ncProfile of 20,000 tooldeck calls:")
    _profile(lambda: loop.run_until_complete(many()), top)
    loop.close()


ctx0 = ToolContext()


def profile_build(top: int) -> None:
    import docstring_parser

    from _toolgen import functions
    from tooldeck._function_schema import inspect_function
    from tooldeck._parameters import schema_of as _model_schema
    from tooldeck._strict import convert

    tooldeck.tool(functions(1, seed=1)[0])  # lazy first-use costs out of the way
    clock = time.perf_counter

    def phase(label: str, fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
        t0 = clock()
        out = [fn(x) for x in items]
        print(f"  {label:<58} {(clock() - t0) * 1e3:8.1f} ms / {len(items):,}")
        return out

    print("tooldeck build phases, 1,000 fresh functions each (no profiler):")
    fns = functions(1000, seed=101)
    phase(
        "inspect.signature + typing.get_type_hints",
        lambda f: (
            inspect.signature(f),
            typing.get_type_hints(f, include_extras=True),
        ),
        fns,
    )
    phase(
        "docstring_parser.parse (style auto, as tooldeck)",
        lambda f: docstring_parser.parse(inspect.getdoc(f) or ""),
        fns,
    )
    phase(
        "docstring_parser.parse (style=GOOGLE)",
        lambda f: docstring_parser.parse(
            inspect.getdoc(f) or "", style=docstring_parser.DocstringStyle.GOOGLE
        ),
        fns,
    )
    sigs = phase(
        "inspect_function (all of the above + schema, no model class)",
        lambda f: inspect_function(f, f.__name__),
        fns,
    )
    models = phase(
        "LazyModel.get(): create_model (at first validation)", lambda s: s.params.get(), sigs
    )
    phase("model_json_schema (_NoTitles) of those models (old path)", _model_schema, models)
    tools = phase("tool(fn) total (other fresh functions)", tooldeck.tool, functions(1000, 102))
    phase("_strict.convert(schema, 'openai')", lambda t: convert(t.schema, "openai"), tools)
    phase("project(t, 'openai-responses') (cold)", lambda t: project(t, "openai-responses"), tools)
    phase("project(t, 'openai-responses') (warm)", lambda t: project(t, "openai-responses"), tools)
    phase("t.params (first access creates the model; not part of (b))", lambda t: t.params, tools)

    fresh = functions(1000, seed=103)
    print("\ncProfile of tool(fn) + project(t, 'openai-responses') for 1,000 fresh functions:")
    _profile(lambda: [project(tooldeck.tool(f), "openai-responses") for f in fresh], top)


def profile_external(top: int) -> None:
    from external_schema import SCHEMA, VALID
    from tooldeck import Tool

    t = Tool.from_schema(
        name="create_event", description="d", json_schema=SCHEMA, execute=lambda p, c: "ok"
    )
    raw = json.dumps(VALID)
    validate_arguments(t, raw)
    spec = t._arg_spec
    print("tooldeck external-schema path, one step at a time:")
    _step("validate_arguments(t, raw) (valid)", lambda: validate_arguments(t, raw), 5000)
    _step("json.loads(raw)", lambda: json.loads(raw), 5000)
    _step(
        "validator.iter_errors(value) collected",
        lambda: list(spec.validator.iter_errors(VALID)),
        5000,
    )
    print("\ncProfile of 5,000 valid calls:")
    _profile(lambda: [validate_arguments(t, raw) for _ in range(5000)], top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("call", "build", "external"), nargs="?", default="call")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    {"call": profile_call, "build": profile_build, "external": profile_external}[args.what](
        args.top
    )


if __name__ == "__main__":
    main()
