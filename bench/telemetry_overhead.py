"""(e) What telemetry costs: one call through the dispatcher and one whole turn, with
telemetry off (no provider: the default), and on (the OpenTelemetry SDK with a batch span
processor whose exporter drops everything, so only the in-process cost is measured),
with metrics too, and with content capture too.

The turn is ``tooldeck.run`` with a scripted model (not a real one): one step with one
``add`` call, then a final answer, so on it makes four spans (``invoke_agent``, two
``chat``, one ``execute_tool``). Cases are interleaved round by round; "added" is the
median of each round's (case median - off median).

Run: ``uv run --group bench python bench/telemetry_overhead.py [--rounds N] [--quick]``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

RAW = '{"a": 1, "b": 2}'


class Dropping(SpanExporter):
    """Accepts every batch and keeps nothing (no network, no memory growth)."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


@dataclass
class Case:
    label: str
    kind: str  # "call" or "turn"
    setup: dict[str, Any]  # telemetry.configure arguments, or {} for off
    call: Callable[[], Awaitable[Any]] | None = None
    round_medians: list[float] = field(default_factory=list)
    samples: list[int] = field(default_factory=list)


def cases() -> list[Case]:
    from tooldeck import Dispatcher, Toolset, telemetry, tool
    from tooldeck.testing import ScriptedModel, call, reply
    from tooldeck.transcript import AssistantMessage, ToolCall, ToolOutput

    @tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    tracing = TracerProvider()
    tracing.add_span_processor(BatchSpanProcessor(Dropping(), max_queue_size=65536))
    metering = MeterProvider([InMemoryMetricReader()])
    setups = {
        "off": {},
        "spans": {"tracer_provider": tracing},
        "spans + metrics": {"tracer_provider": tracing, "meter_provider": metering},
        "spans + metrics + content": {
            "tracer_provider": tracing,
            "meter_provider": metering,
            "capture_content": True,
        },
    }
    the_call = ToolCall("call_1", "add", RAW)

    def script(request: Any) -> AssistantMessage:
        if any(isinstance(i, ToolOutput) for i in request.transcript):
            return reply("3")
        return reply(call("add", RAW, call_id="call_1"))

    model = ScriptedModel(script)
    out: list[Case] = []
    for name, setup in setups.items():
        telemetry.reset()
        if setup:
            telemetry.configure(**setup)
        dispatcher = Dispatcher(Toolset([add]))  # decides on telemetry now

        async def one_call(d: Any = dispatcher) -> Any:
            result = await d.dispatch([the_call])
            return result.outputs[0].text

        out.append(Case(f"one call, {name}", "call", setup, one_call))
    for name, setup in setups.items():

        async def one_turn() -> Any:
            model.requests.clear()
            return (await telemetry_run(model, add)).output

        out.append(Case(f"one turn (1 call), {name}", "turn", setup, one_turn))
    telemetry.reset()
    return out


async def telemetry_run(model: Any, add: Any) -> Any:
    import tooldeck

    return await tooldeck.run(model, [add], "add 1 and 2", guard=False)


async def measure(rounds: int, per_call: int, per_turn: int) -> list[Case]:
    from tooldeck import telemetry

    all_cases = cases()
    clock = time.perf_counter_ns
    for case in all_cases:  # warm up
        telemetry.reset()
        telemetry.configure(**case.setup)
        assert case.call is not None
        for _ in range(200):
            await case.call()
    for _ in range(rounds):
        for case in all_cases:
            telemetry.reset()
            if case.setup:
                telemetry.configure(**case.setup)
            assert case.call is not None
            n = per_call if case.kind == "call" else per_turn
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
    telemetry.reset()
    return all_cases


def report(all_cases: list[Case], note: str) -> str:
    sys.path.insert(0, str(Path(__file__).parent))
    from _harness import machine_lines, summary_us, table

    offs = {c.kind: c for c in all_cases if c.label.endswith(", off")}
    rows = []
    for case in all_cases:
        off = offs[case.kind]
        med, p90 = summary_us(case.samples)
        added = statistics.median(
            [a - b for a, b in zip(case.round_medians, off.round_medians, strict=True)]
        )
        rows.append(
            [case.label, f"{med:.2f}", f"{p90:.2f}", f"{added:+.2f}", f"{len(case.samples):,}"]
        )
    lines = [
        *machine_lines(("tooldeck", "opentelemetry-api", "opentelemetry-sdk", "pydantic")),
        f"- {note}",
        "",
        table(["case", "median µs", "p90 µs", "added vs off (paired by round) µs", "runs"], rows),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--per-call", type=int, default=3000)
    parser.add_argument("--per-turn", type=int, default=600)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    from _harness import BackgroundLoad, wait_for_idle

    if args.quick:
        args.rounds, args.per_call, args.per_turn = 3, 300, 60
    idle = wait_for_idle()
    load = BackgroundLoad()
    measured = asyncio.run(measure(args.rounds, args.per_call, args.per_turn))
    print(report(measured, f"{idle}; {load.report()}"))


if __name__ == "__main__":
    main()
