"""Cases for tests/test_packaging.py, run by the Python of a clean virtual environment
with the tooldeck wheel (and only the extras the test installed): a one-tool scripted
agent, then each case named on the command line, done the way a user's program does it.
Prints one JSON line for the agent and one per case: the message the case ended with
(``Type: message``), or what it returned.
"""

from __future__ import annotations

import asyncio
import json
import sys

import tooldeck
from tooldeck.providers import model_from_string
from tooldeck.testing import ScriptedModel, call, reply


@tooldeck.tool(read_only=True)
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tooldeck.tool()
async def save(text: str) -> str:
    """Save a text."""
    return "saved"


model = ScriptedModel([reply(call("add", {"a": 2, "b": 3})), reply("2 + 3 = 5")])
result = asyncio.run(tooldeck.run(model, [add], "What is 2 + 3?"))
print(json.dumps({"agent": [result.output, result.stop_reason.value]}))


def ask_at_the_console():
    script = ScriptedModel([reply(call("save", {"text": "x"})), reply("done")])
    asyncio.run(tooldeck.run(script, [save], "save x", protect=tooldeck.Protection.ask("WRITE")))


def cron():
    from tooldeck.schedules import Timing

    Timing.cron("0 9 * * *")


def postgres():
    from tooldeck.workflows.store import open_store

    open_store(dsn="postgresql://postgres@127.0.0.1:5432/test")


def otel():
    tooldeck.telemetry.setup_otlp("http://127.0.0.1:9")


def ddgs():
    from tooldeck.web.ddgs_search import DdgsSearch

    asyncio.run(DdgsSearch().search("tooldeck"))


def pdf():
    from tooldeck.builtin.web.convert import convert

    return convert(b"%PDF-1.4\n%\xe2\xe3\n", "application/pdf", "https://x.test/a.pdf", False).text


def embedder(kind):
    def make():
        from tooldeck.search import FastEmbedEmbedder, OnnxEmbedder, WordLlamaEmbedder

        {
            "onnx": lambda: OnnxEmbedder("/nowhere"),
            "fastembed": FastEmbedEmbedder,
            "semantic": WordLlamaEmbedder.load,
        }[kind]()

    return make


CASES = {
    "openai": lambda: model_from_string("openai:gpt-5.4"),
    "openrouter": lambda: model_from_string("openrouter:z-ai/glm-4.6"),
    "anthropic": lambda: model_from_string("anthropic:claude-sonnet-4-6"),
    "gemini": lambda: model_from_string("gemini:gemini-2.5-flash"),
    "mcp": lambda: __import__("tooldeck.mcp"),
    "gateway": lambda: __import__("tooldeck.gateway"),
    "search": lambda: __import__("tooldeck.search"),
    "console approvals": ask_at_the_console,
    "cron": cron,
    "postgres": postgres,
    "dbos": lambda: __import__("tooldeck.workflows.worker"),
    "otel": otel,
    "ddgs": ddgs,
    "pdf": pdf,
    "onnx": embedder("onnx"),
    "fastembed": embedder("fastembed"),
    "semantic": embedder("semantic"),
}
for name in sys.argv[1:]:
    try:
        said = CASES[name]()
        said = said if isinstance(said, str) else "no error"
    except Exception as exc:
        said = f"{type(exc).__name__}: {exc}"
    print(json.dumps({name: said}))
