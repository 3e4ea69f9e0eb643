"""Prompt caching on a 300-tool catalog: tokens billed at full price, with and without.

Issue 35 item 3. A ten-step turn against a local server that speaks each provider's wire
format and reports usage the way the provider does, its cache simulated from the request
bodies it receives (tokens estimated as JSON characters / 4, the same for every run):

- **Anthropic** (Messages, hosted tool search): 300 tools sent with ``defer_loading``
  (they stay out of the prompt prefix); each step the model searches, a found tool is
  expanded and called. The cache follows Anthropic's documented rules: an entry is
  written at each ``cache_control`` breakpoint (prefix order tools, system, messages), a
  breakpoint reads the longest entry found at it or up to 20 blocks before it, at least
  1,024 tokens. ``input_tokens`` is what is billed at full price; writes are billed at
  1.25x and reads at 0.1x (reported too, as "cost units" of full-price tokens).
- **OpenAI** (Chat Completions, local ``tool_search``): the core tools and the local
  search tool are sent; each step the model searches, the found tool is loaded (sent
  from the next step on) and called. OpenAI caches automatically: ``cached_tokens`` is
  the longest prefix shared with an earlier request (tools first, then messages), in
  128-token steps from 1,024. Without ``cache`` a loaded tool is inserted in catalog
  order, cutting the shared prefix there; with it, it is appended. (``prompt_cache_key``
  only routes requests to the same cache machine, which a local server cannot show.)

- **Gemini** (generateContent, local ``tool_search``): the same flow as OpenAI. Gemini
  caches implicitly (Gemini 2.5 and later): ``cachedContentTokenCount`` is the longest
  prefix shared with an earlier request (declarations, then the system instruction, then
  the contents), from 1,024 tokens; hits are billed at 0.25x (Gemini 2.5's 75% discount).
  ``cache`` sends nothing to Gemini; it keeps declarations where first sent.

Run: ``uv run --locked python bench/prompt_cache.py``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _bigcatalog import real_tools  # noqa: E402
from tooldeck import ModelSettings, Session, Tool  # noqa: E402
from tooldeck.plan import ToolPlanner  # noqa: E402
from tooldeck.providers.anthropic import AnthropicModel  # noqa: E402
from tooldeck.providers.chat_completions import ChatCompletionsModel  # noqa: E402
from tooldeck.providers.gemini import GeminiModel  # noqa: E402

STEPS = 10
CATALOG = 300
MIN_CACHE = 1024


def tokens(value: Any) -> int:
    return max(1, len(json.dumps(value, sort_keys=True)) // 4)


def bare(value: Any) -> Any:
    """A block without its ``cache_control`` marker (markers are not prompt content)."""
    if isinstance(value, dict):
        return {k: bare(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [bare(v) for v in value]
    return value


class AnthropicCache:
    """Anthropic's prompt cache as documented, over the blocks of each request."""

    def __init__(self) -> None:
        self.entries: set[str] = set()

    def usage(self, body: dict[str, Any]) -> dict[str, int]:
        blocks: list[Any] = [t for t in body.get("tools", []) if not t.get("defer_loading")]
        system = body.get("system")
        blocks += system if isinstance(system, list) else [system] if system else []
        for message in body["messages"]:
            content = message["content"]
            blocks += content if isinstance(content, list) else [content]
        sizes = [tokens(bare(b)) for b in blocks]
        digests, running = [], hashlib.sha256()
        for block in blocks:
            running.update(json.dumps(bare(block), sort_keys=True).encode())
            digests.append(running.copy().hexdigest())
        marks = [i for i, b in enumerate(blocks) if isinstance(b, dict) and "cache_control" in b]
        read = 0
        for mark in marks:
            for at in range(mark, max(-1, mark - 21), -1):
                if digests[at] in self.entries:
                    read = max(read, sum(sizes[: at + 1]))
                    break
        cached_to = sum(sizes[: marks[-1] + 1]) if marks else 0
        written = 0
        if marks and cached_to >= MIN_CACHE:
            for mark in marks:
                self.entries.add(digests[mark])
            written = max(0, cached_to - read)
        total = sum(sizes)
        return {
            "input_tokens": total - read - written,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
            "output_tokens": 40,
        }


class OpenAICache:
    """OpenAI's automatic prefix cache: the longest prefix seen before, in 128-token steps."""

    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    def usage(self, body: dict[str, Any]) -> dict[str, Any]:
        parts = [json.dumps(t, sort_keys=True) for t in body.get("tools", [])]
        parts += [json.dumps(m, sort_keys=True) for m in body["messages"]]
        total = sum(len(p) // 4 for p in parts)
        best = 0
        for earlier in self.seen:
            shared = 0
            for a, b in zip(parts, earlier, strict=False):
                if a != b:
                    break
                shared += len(a) // 4
            best = max(best, shared)
        self.seen.append(parts)
        cached = (best // 128) * 128 if best >= MIN_CACHE else 0
        return {
            "prompt_tokens": total,
            "completion_tokens": 40,
            "total_tokens": total + 40,
            "prompt_tokens_details": {"cached_tokens": cached},
        }


class GeminiCache:
    """Gemini's implicit cache: the longest prefix seen before, from 1,024 tokens."""

    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    def usage(self, body: dict[str, Any]) -> dict[str, Any]:
        parts = [
            json.dumps(d, sort_keys=True)
            for t in body.get("tools", [])
            for d in t.get("functionDeclarations", [])
        ]
        if "systemInstruction" in body:
            parts.append(json.dumps(body["systemInstruction"], sort_keys=True))
        parts += [json.dumps(c, sort_keys=True) for c in body["contents"]]
        total = sum(len(p) // 4 for p in parts)
        best = 0
        for earlier in self.seen:
            shared = 0
            for a, b in zip(parts, earlier, strict=False):
                if a != b:
                    break
                shared += len(a) // 4
            best = max(best, shared)
        self.seen.append(parts)
        cached = best if best >= MIN_CACHE else 0
        return {
            "promptTokenCount": total,
            "candidatesTokenCount": 40,
            "cachedContentTokenCount": cached,
            "totalTokenCount": total + 40,
        }


class Server:
    """A local provider: scripted steps, usage from the simulated cache."""

    def __init__(self, wire: str, targets: list[str]) -> None:
        self.wire, self.targets = wire, targets
        caches = {"anthropic": AnthropicCache, "gemini": GeminiCache}
        self.cache: Any = caches.get(wire, OpenAICache)()
        self.usages: list[dict[str, Any]] = []
        self.step = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                reply = json.dumps(server.answer(body)).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        usage = self.cache.usage(body)
        self.usages.append(usage)
        self.step += 1
        last = self.step >= STEPS
        if self.wire == "anthropic":
            return self._anthropic(usage, last)
        if self.wire == "gemini":
            return self._gemini(body, usage, last)
        return self._chat(body, usage, last)

    def _anthropic(self, usage: dict[str, int], last: bool) -> dict[str, Any]:
        n = self.step
        if last:
            content: list[Any] = [{"type": "text", "text": "All done."}]
        else:
            name = self.targets[n]
            content = [
                {
                    "type": "server_tool_use",
                    "id": f"srvtoolu_{n}",
                    "name": "tool_search_tool_bm25",
                    "input": {"query": name.replace("_", " ")},
                },
                {
                    "type": "tool_search_tool_result",
                    "tool_use_id": f"srvtoolu_{n}",
                    "content": {
                        "type": "tool_search_tool_search_result",
                        "tool_references": [{"type": "tool_reference", "tool_name": name}],
                    },
                },
                {"type": "tool_use", "id": f"toolu_{n}", "name": name, "input": {}},
            ]
        return {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "content": content,
            "stop_reason": "end_turn" if last else "tool_use",
            "stop_sequence": None,
            "usage": usage,
        }

    def _chat(self, body: dict[str, Any], usage: dict[str, Any], last: bool) -> dict[str, Any]:
        n = self.step
        shown = {t["function"]["name"] for t in body.get("tools", [])}
        target = self.targets[(n - 1) // 2]
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if last:
            message["content"] = "All done."
        elif target in shown:  # found by the last search: call it
            message["tool_calls"] = [
                {
                    "id": f"call_{n}",
                    "type": "function",
                    "function": {"name": target, "arguments": "{}"},
                }
            ]
        else:
            query = json.dumps({"query": target.replace("_", " "), "limit": 1})
            message["tool_calls"] = [
                {
                    "id": f"call_{n}",
                    "type": "function",
                    "function": {"name": "tool_search", "arguments": query},
                }
            ]
        return {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-4.1",
            "choices": [
                {"index": 0, "finish_reason": "stop" if last else "tool_calls", "message": message}
            ],
            "usage": usage,
        }

    def _next_call(self, shown: set[str]) -> tuple[str, dict[str, Any]]:
        """The local-search flow: search for the step's target, then call it."""
        target = self.targets[(self.step - 1) // 2]
        if target in shown:  # found by the last search: call it
            return target, {}
        return "tool_search", {"query": target.replace("_", " "), "limit": 1}

    def _gemini(self, body: dict[str, Any], usage: dict[str, Any], last: bool) -> dict[str, Any]:
        shown = {d["name"] for t in body.get("tools", []) for d in t["functionDeclarations"]}
        if last:
            parts: list[Any] = [{"text": "All done."}]
        else:
            name, args = self._next_call(shown)
            parts = [{"functionCall": {"id": f"c{self.step}", "name": name, "args": args}}]
        return {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": usage,
            "modelVersion": "gemini-2.5-flash",
        }

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


def catalog() -> list[Tool]:
    made = []
    for t in real_tools()[:CATALOG]:
        schema = {"type": "object", "properties": {}, **t["input_schema"]}
        schema["required"] = []  # the scripted calls send {}
        made.append(
            Tool.from_schema(
                schema,
                lambda _a, _c: "ok",
                name=t["name"],
                description=t["description"],
                read_only=True,
            )
        )
    return made


INSTRUCTIONS = (
    "You are an operations agent for a mid-size company. Use the tools to look things up "
    "and act; search for a tool when none shown fits. Answer briefly. " * 6
)


def run(wire: str, cache: bool, *, eager: bool = False) -> dict[str, int]:
    tools = catalog()
    names = [t.name for t in tools]
    targets = random.Random(35).sample(names[20:], STEPS)  # found in no catalog order
    server = Server(wire, targets)
    try:
        if wire == "anthropic":
            model: Any = AnthropicModel(
                "claude-sonnet-4-6", api_key="k", base_url=server.url, max_retries=0
            )
        elif wire == "gemini":
            model = GeminiModel("gemini-2.5-flash", api_key="k", base_url=server.url, max_retries=0)
        else:
            model = ChatCompletionsModel(
                "gpt-4.1", api_key="k", base_url=server.url + "/v1", max_retries=0
            )
        threshold = CATALOG if eager else 16  # eager: every tool sent in full, every step
        planner = ToolPlanner(tools, model=model, threshold=threshold, semantic=False)
        session = Session(
            model,
            planner,
            instructions=INSTRUCTIONS,
            settings=ModelSettings(cache=cache),
            max_steps=STEPS + 2,
        )
        result = asyncio.run(session.run("Handle today's queue."))
        assert result.steps == STEPS, (result.steps, result.reason)
    finally:
        server.close()
    if wire == "anthropic":
        full = sum(u["input_tokens"] for u in server.usages)
        read = sum(u["cache_read_input_tokens"] for u in server.usages)
        write = sum(u["cache_creation_input_tokens"] for u in server.usages)
    elif wire == "gemini":
        read = sum(u["cachedContentTokenCount"] for u in server.usages)
        full = sum(u["promptTokenCount"] for u in server.usages) - read
        write = 0
    else:
        read = sum(u["prompt_tokens_details"]["cached_tokens"] for u in server.usages)
        full = sum(u["prompt_tokens"] for u in server.usages) - read
        write = 0
    # what tooldeck itself reports, to check it reads the wire's usage
    assert result.usage.cache_read_tokens == read, (result.usage, read)
    return {
        "full": full,
        "read": read,
        "write": write,
        "cost": round(full + 1.25 * write + (0.1 if wire == "anthropic" else 0.25) * read),
    }


def main() -> None:
    print(f"{CATALOG}-tool catalog, {STEPS} steps; tokens per turn (estimated, JSON chars / 4)")
    print("| run | cache | full price | cache reads | cache writes | cost units |")
    print("|---|---|---:|---:|---:|---:|")
    runs = [
        ("anthropic, 300 tools eager", "anthropic", True),
        ("anthropic, hosted tool search", "anthropic", False),
        ("openai-chat, local tool_search", "openai-chat", False),
        ("gemini, local tool_search", "gemini", False),
    ]
    for label, wire, eager in runs:
        for cache in (False, True):
            r = run(wire, cache, eager=eager)
            print(
                f"| {label} | {cache} | {r['full']:,} | {r['read']:,} | {r['write']:,} | "
                f"{r['cost']:,} |"
            )


if __name__ == "__main__":
    main()
