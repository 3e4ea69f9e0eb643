"""What a shared session store (``tooldeck serve --sessions``) costs a request.

Real ``tooldeck serve --http`` processes in front of tests/mcp_servers/basic.py, each
reached by the official SDK client over streamable HTTP: the gateway as it is (sessions
in the process: the floor), with ``--sessions`` on a SQLite file, and on the PostgreSQL
server at ``$TOOLDECK_TEST_PG_DSN`` (default ``postgresql://postgres@127.0.0.1:5432/test``,
in a schema of its own, dropped at the end; left out when nothing answers there). Each
client searches once (a found tool), then the rounds alternate the cases: a
``tools/list`` (with a store: the session read) and a call of the found tool (read, and
the use merged back), each timed from the client's send to its answer.

    uv run python bench/gateway_sessions.py [--rounds 200]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from _harness import BackgroundLoad, machine_lines, percentile, wait_for_idle

HERE = Path(__file__).parent
PY = sys.executable
BASIC = HERE.parent / "tests" / "mcp_servers" / "basic.py"
PG_DSN = os.environ.get("TOOLDECK_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
POLICY = '[profile]\n[[profile.rules]]\ntools = "alpha__*"\naction = "allow"\n'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def postgres_answers() -> bool:
    import psycopg

    try:
        psycopg.connect(PG_DSN, connect_timeout=3).close()
    except psycopg.OperationalError:
        return False
    return True


def start(
    root: Path, name: str, extra: list[str], env: dict[str, str]
) -> tuple[str, subprocess.Popen[bytes]]:
    config = root / "mcp.json"
    policy = root / "policy.toml"
    port = free_port()
    command = [PY, "-m", "tooldeck.cli", "serve", "--mcp", str(config), "--policy", str(policy)]
    command += ["--state", str(root / f"state-{name}"), "--lexical", "--http", str(port)]
    proc = subprocess.Popen(
        [*command, *extra], env={**os.environ, **env}, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 60
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the {name} gateway did not start")
        time.sleep(0.2)
    return f"http://127.0.0.1:{port}/mcp", proc


@asynccontextmanager
async def client(url: str) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=300)) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as c,
    ):
        await c.initialize()
        with anyio.fail_after(60):  # the upstream server is up: its tools are found
            while True:
                searched = await c.call_tool("tool_search", {"query": "echo the text back"})
                if "alpha__echo" in str(searched):
                    break
                await anyio.sleep(0.2)
        yield c


def stats(values: list[float]) -> str:
    ordered = sorted(values)
    return (
        f"{statistics.median(ordered) * 1000:.2f} ms | {percentile(ordered, 0.9) * 1000:.2f} ms"
        f" | {ordered[0] * 1000:.2f} ms | {ordered[-1] * 1000:.2f} ms | {len(ordered)}"
    )


async def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "mcp.json").write_text(
            json.dumps({"mcpServers": {"alpha": {"command": PY, "args": [str(BASIC), "stdio"]}}})
        )
        (root / "policy.toml").write_text(POLICY)
        schema = f"bench_sessions_{uuid.uuid4().hex[:8]}"
        cases: list[tuple[str, list[str], dict[str, str]]] = [
            ("in the process (floor)", [], {}),
            ("--sessions SQLite file", ["--sessions", str(root / "sessions.sqlite3")], {}),
        ]
        if postgres_answers():
            cases.append(
                (
                    "--sessions PostgreSQL",
                    ["--sessions", PG_DSN],
                    {"TOOLDECK_WORKFLOWS_SCHEMA": schema},
                )
            )
        procs: list[subprocess.Popen[bytes]] = []
        try:
            urls = {}
            for name, extra, env in cases:
                url, proc = start(root, name.split()[0].strip("-"), extra, env)
                urls[name] = url
                procs.append(proc)
            idle = wait_for_idle()
            load = BackgroundLoad()
            timings: dict[tuple[str, str], list[float]] = {}
            async with AsyncExitStack() as stack:
                clients = {n: await stack.enter_async_context(client(u)) for n, u in urls.items()}
                for n in range(rounds + 10):
                    for name, c in clients.items():
                        began = time.perf_counter()
                        await c.list_tools()
                        listed = time.perf_counter() - began
                        began = time.perf_counter()
                        result = await c.call_tool("alpha__echo", {"text": f"round {n}"})
                        called = time.perf_counter() - began
                        assert not result.is_error, result
                        if n >= 10:  # warm-up left out
                            timings.setdefault((name, "tools/list"), []).append(listed)
                            timings.setdefault((name, "tools/call"), []).append(called)
            print("\n".join(machine_lines()))
            print(f"- {idle}")
            print(f"- {load.report()}\n")
            print("| sessions | request | median | p90 | min | max | n |")
            print("| :--- | :--- | ---: | ---: | ---: | ---: | ---: |")
            for (name, request), samples in sorted(timings.items(), key=lambda kv: kv[0][1]):
                print(f"| {name} | {request} | {stats(samples)} |")
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            for proc in procs:
                proc.wait(20)
            if len(cases) == 3:
                import psycopg
                from psycopg import sql

                with psycopg.connect(PG_DSN, autocommit=True) as conn:
                    conn.execute(
                        sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    anyio.run(main, args.rounds)
