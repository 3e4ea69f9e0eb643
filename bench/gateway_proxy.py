"""What a call costs through the gateway: ``tooldeck serve`` side by side with the same
upstream called directly and with peer proxies, over stdio and streamable HTTP.

The upstream is tests/mcp_servers/basic.py (its ``echo`` tool; the SDK's own server),
every client the official MCP client SDK. Over stdio: the upstream directly, a bare byte
relay in between (the floor of any process in between: bench/_relay.py), ``tooldeck
serve``, and fastmcp's proxy (``fastmcp.server.create_proxy``: bench/_fastmcp_proxy.py).
Over HTTP: the upstream serving HTTP directly, and each proxy serving HTTP in front of
the upstream over stdio: ``tooldeck serve --http``, fastmcp's proxy, and ``mcp-proxy``
(which turns a stdio server into an HTTP one; it needs ``mcp<2``, so it runs from its
own environment, made on first use with ``uv`` under ~/.cache/tooldeck-bench/).

Measured, in one run:

- latency: calls alternated round-robin between the targets (the order rotated each
  round), so load that comes and goes hits them alike; median and p99 per target, and
  the ratio to the direct call;
- CPU per call: the CPU time (user + system, all threads, from /proc) of the process in
  between, divided by the calls it relayed in the latency phase (its upstream is a
  separate process, not counted);
- upstream CPU per call: the same of the upstream server behind it (the process in
  between's child processes; the server itself for the direct call). Each proxy has its
  own upstream, the same program, but not the same work: a client of the 2026-07-28
  protocol (tooldeck's) sends every request its envelope in ``_meta``, which the server
  reads each time; an older one (mcp-proxy's, fastmcp's) negotiates a session once. A
  call's wall time is the client's, the proxy's and the upstream's CPU (plus wake-ups),
  so this column is part of every proxy's latency and calls/s;
- throughput: calls/s with 1 and with 16 concurrent clients (over stdio 16 concurrent
  calls on the one connection a stdio server has; over HTTP 16 client sessions), in
  short windows alternated between the targets: the median window (the slowest and
  the fastest in brackets; on a shared machine use many ``--rounds``), and the median
  over rounds of the target's calls/s over the direct call's in the same round (paired:
  the load drifts over a run more than within a round);
- start-up (stdio): from spawning the process to its ``initialize`` answered, each
  round a fresh process per target, alternated.

``--load`` keeps every core busy with a busy-loop process meanwhile (a loaded machine);
``--before DIR`` measures another checkout's ``src`` as a further target (e.g. the
commit before, exported with ``git archive``).

    uv run python bench/gateway_proxy.py [--calls 2000] [--load] [--before DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client

from _harness import BackgroundLoad, machine_lines, percentile, wait_for_idle

HERE = Path(__file__).parent
PY = sys.executable
BASIC = HERE.parent / "tests" / "mcp_servers" / "basic.py"
SRC = HERE.parent / "src"
UPSTREAM = [PY, str(BASIC), "stdio"]
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tooldeck-bench"
MCP_PROXY = "0.13.0"
TEXT = "hello, gateway"
TICK = os.sysconf("SC_CLK_TCK")


# -- processes ------------------------------------------------------------------------------
def mcp_proxy() -> Path:
    """The ``mcp-proxy`` program of its own environment (made on first use)."""
    venv = CACHE / f"mcp-proxy-{MCP_PROXY}"
    program = venv / "bin" / "mcp-proxy"
    if not program.exists():
        uv = [os.environ.get("UV") or shutil.which("uv") or "uv"]  # ``uv run`` sets UV
        subprocess.run([*uv, "venv", "-q", str(venv)], check=True)
        subprocess.run(
            [*uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
             f"mcp-proxy=={MCP_PROXY}"],
            check=True,
        )  # fmt: skip
    return program


def children(pid: int | None = None) -> set[int]:
    """The child processes of ``pid`` (default: this one)."""
    out: set[int] = set()
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid or os.getpid()}/task").iterdir():
            with contextlib.suppress(OSError):
                out.update(int(p) for p in (task / "children").read_text().split())
    return out


def descendants(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        new = children(todo.pop()) - found
        found |= new
        todo.extend(new)
    return found


def cpu_of(pids: set[int]) -> float:
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            total += cpu_seconds(pid)
    return total


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads, not its children)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rfind(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_listening(proc: subprocess.Popen[Any], port: int, what: str, within: float = 60) -> None:
    deadline = time.monotonic() + within
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited ({proc.returncode})")
        if time.monotonic() > deadline:
            raise SystemExit(f"{what} did not listen within {within:g} s")
        time.sleep(0.1)


def stop(proc: subprocess.Popen[Any]) -> None:
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def busy_cores(n: int) -> Iterator[None]:
    """``n`` busy-loop processes in the background (a loaded machine)."""
    procs = [subprocess.Popen([PY, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


# -- targets ---------------------------------------------------------------------------------
@dataclass
class Target:
    """One way of reaching the upstream's echo tool."""

    name: str
    transport: str  # "stdio": the client spawns ``command``; "http": ``command`` serves url
    command: list[str]
    tool: str
    env: dict[str, str] | None = None
    url: str | None = None
    proc: subprocess.Popen[Any] | None = None
    pid: int | None = None  # the process in between (None: the upstream itself)
    server: int | None = None  # the upstream itself, when called directly
    direct: bool = False
    sessions: list[ClientSession] = field(default_factory=list)
    latencies: list[int] = field(default_factory=list)
    cpu: float = 0.0
    upstream_cpu: float = 0.0
    rates: dict[int, list[float]] = field(default_factory=dict)
    cpu_busy: dict[int, tuple[float, int]] = field(default_factory=dict)
    startups: list[float] = field(default_factory=list)


def tooldeck_args(root: Path, name: str) -> list[str]:
    config = root / "mcp.json"
    policy = root / "policy.toml"
    if not config.exists():
        servers = {"echo": {"command": PY, "args": [str(BASIC), "stdio"]}}
        config.write_text(json.dumps({"mcpServers": servers}))
        policy.write_text('[profile]\n[[profile.rules]]\ntools = "echo__*"\naction = "allow"\n')
    state = root / f"state-{name}-{time.monotonic_ns()}"
    return [
        "-m", "tooldeck", "serve", "--mcp", str(config), "--state", str(state),
        "--lexical", "--core", "*", "--policy", str(policy),
    ]  # fmt: skip


def targets(root: Path, before: Path | None, peers: bool) -> tuple[list[Target], list[Target]]:
    trees = {"tooldeck": SRC} | ({"tooldeck (before)": before} if before else {})
    env = get_default_environment()
    stdio = [Target("direct", "stdio", UPSTREAM, "echo", direct=True)]
    stdio.append(Target("bare relay", "stdio", [PY, str(HERE / "_relay.py"), *UPSTREAM], "echo"))
    for name, src in trees.items():
        serve = [PY, *tooldeck_args(root, name)]
        tree_env = {**env, "PYTHONPATH": str(src)}
        stdio.append(Target(name, "stdio", serve, "echo__echo", env=tree_env))
    if peers:
        fast = [PY, str(HERE / "_fastmcp_proxy.py"), "stdio", "--", *UPSTREAM]
        stdio.append(Target("fastmcp proxy", "stdio", fast, "echo"))
    http = [Target("direct", "http", [PY, str(BASIC), "http", "{port}"], "echo", direct=True)]
    for name, src in trees.items():
        serve = [PY, *tooldeck_args(root, name + "-http"), "--http", "{port}"]
        env_http = {**os.environ, "PYTHONPATH": str(src)}
        http.append(Target(name, "http", serve, "echo__echo", env=env_http))
    if peers:
        fast = [PY, str(HERE / "_fastmcp_proxy.py"), "http", "{port}", "--", *UPSTREAM]
        http.append(Target("fastmcp proxy", "http", fast, "echo"))
        proxy = [str(mcp_proxy()), "--host", "127.0.0.1", "--port", "{port}",
                 "--pass-environment", "--", *UPSTREAM]  # fmt: skip
        http.append(Target("mcp-proxy 0.13", "http", proxy, "echo"))
    return stdio, http


def start_http(target: Target) -> None:
    port = free_port()
    command = [part.replace("{port}", str(port)) for part in target.command]
    target.proc = subprocess.Popen(
        command, env=target.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    wait_listening(target.proc, port, target.name)
    target.url = f"http://127.0.0.1:{port}/mcp"
    target.pid = None if target.direct else target.proc.pid
    target.server = target.proc.pid if target.direct else None


@asynccontextmanager
async def connect_http(url: str) -> AsyncIterator[ClientSession]:
    """One initialized client session to the streamable-HTTP server at ``url``."""
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=300)) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@asynccontextmanager
async def connect(target: Target, errlog: Any) -> AsyncIterator[ClientSession]:
    """One initialized client session to ``target``; over stdio, a fresh process."""
    async with AsyncExitStack() as stack:
        if target.transport == "stdio":
            params = StdioServerParameters(
                command=target.command[0], args=target.command[1:], env=target.env
            )
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
        else:
            assert target.url is not None
            yield await stack.enter_async_context(connect_http(target.url))
            return
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        yield session


async def call(target: Target, session: ClientSession) -> None:
    result = await session.call_tool(target.tool, {"text": TEXT})
    if result.is_error or TEXT not in json.dumps(result.model_dump(mode="json")):
        raise SystemExit(f"{target.name}: unexpected answer {result}")


# -- phases ------------------------------------------------------------------------------------
async def latency(group: list[Target], calls: int) -> None:
    clock = time.perf_counter_ns
    for target in group:  # warm up: imports, caches, the upstream started
        for _ in range(50):
            await call(target, target.sessions[0])
    cpu0 = {t.name: cpu_seconds(t.pid) for t in group if t.pid}
    # the upstream: the server called directly, else every process below the one between
    ups = {t.name: {t.server} if t.server else descendants(t.pid or 0) for t in group}
    up0 = {name: cpu_of(pids) for name, pids in ups.items()}
    for i in range(calls):
        k = i % len(group)
        for target in group[k:] + group[:k]:
            session = target.sessions[0]
            t0 = clock()
            await call(target, session)
            target.latencies.append(clock() - t0)
    for target in group:
        if target.pid:
            target.cpu = (cpu_seconds(target.pid) - cpu0[target.name]) / calls
        used = cpu_of(ups[target.name]) - up0[target.name]
        target.upstream_cpu = used / calls if ups[target.name] else float("nan")


async def throughput(
    group: list[Target], clients: int, window: float, rounds: int, errlog: Any
) -> None:
    async with AsyncExitStack() as stack:
        for target in group:  # over HTTP one session per client; over stdio the one
            while target.transport == "http" and len(target.sessions) < clients:
                target.sessions.append(await stack.enter_async_context(connect(target, errlog)))
        for r in range(rounds):
            k = r % len(group)
            for target in group[k:] + group[:k]:
                count = 0
                deadline = time.perf_counter() + window
                cpu0 = cpu_seconds(target.pid) if target.pid else 0.0

                async def worker(
                    session: ClientSession, target: Target = target, deadline: float = deadline
                ) -> None:
                    nonlocal count
                    while time.perf_counter() < deadline:
                        await call(target, session)
                        count += 1

                started = time.perf_counter()
                async with anyio.create_task_group() as tg:
                    for n in range(clients):
                        tg.start_soon(worker, target.sessions[n % len(target.sessions)])
                took = time.perf_counter() - started
                target.rates.setdefault(clients, []).append(count / took)
                if target.pid:
                    cpu, n = target.cpu_busy.get(clients, (0.0, 0))
                    used = cpu_seconds(target.pid) - cpu0
                    target.cpu_busy[clients] = (cpu + used, n + count)
        for target in group:
            del target.sessions[1:]


async def startup(group: list[Target], rounds: int, errlog: Any) -> None:
    for r in range(rounds):
        k = r % len(group)
        for target in group[k:] + group[:k]:
            started = time.perf_counter()
            async with connect(target, errlog):
                target.startups.append(time.perf_counter() - started)


# -- report ------------------------------------------------------------------------------------
def ms(ns: float) -> str:
    return f"{ns / 1e6:.2f}"


def spread(rates: list[float]) -> str:
    """The median window's calls/s, and the slowest and fastest window's (the load of a
    shared machine moves a window by more than the proxies differ)."""
    ordered = sorted(rates)
    return f"{ordered[len(ordered) // 2]:,.0f} ({ordered[0]:,.0f}–{ordered[-1]:,.0f})"


def paired(rates: list[float], direct: list[float]) -> str:
    """The median over rounds of the target's calls/s over the direct call's in the same
    round: the load of a shared machine drifts over a run, less within a round."""
    ratios = sorted(r / d for r, d in zip(rates, direct, strict=True))
    return f"{ratios[len(ratios) // 2]:.2f}"


def report(group: list[Target], clients: tuple[int, ...]) -> None:
    direct = next(t for t in group if t.direct)
    d_sorted = sorted(direct.latencies)
    d50, d99 = percentile(d_sorted, 0.5), percentile(d_sorted, 0.99)
    heads = [
        "target",
        "median ms",
        "p99 ms",
        "× direct (median)",
        "× direct (p99)",
        "CPU ms/call",
        "upstream CPU ms/call",
    ] + [f"calls/s, {c} client{'s' * (c > 1)}" for c in clients]
    heads += [f"calls/s × direct, {c} client{'s' * (c > 1)} (paired)" for c in clients]
    heads += [f"CPU ms/call, {clients[-1]} clients"]  # fmt: skip
    print("| " + " | ".join(heads) + " |")
    print("| :--- |" + " ---: |" * (len(heads) - 1))
    for t in group:
        ordered = sorted(t.latencies)
        m50, m99 = percentile(ordered, 0.5), percentile(ordered, 0.99)
        cpu = f"{t.cpu * 1000:.2f}" if t.pid else "(upstream)"
        busy = t.cpu_busy.get(clients[-1])
        cpu_busy = f"{busy[0] / busy[1] * 1000:.2f}" if busy and busy[1] else "(upstream)"
        rates = [spread(t.rates[c]) for c in clients]
        rates += [paired(t.rates[c], direct.rates[c]) for c in clients]
        up = f"{t.upstream_cpu * 1000:.2f}"
        row = [t.name, ms(m50), ms(m99), f"{m50 / d50:.2f}", f"{m99 / d99:.2f}", cpu, up, *rates]
        print("| " + " | ".join([*row, cpu_busy]) + " |")
    print()


def report_startup(group: list[Target]) -> None:
    print("| target (stdio) | spawn → initialize answered: median ms | p90 ms | min | max | n |")
    print("| :--- | ---: | ---: | ---: | ---: | ---: |")
    for t in group:
        s = sorted(t.startups)
        print(
            f"| {t.name} | {percentile(s, 0.5) * 1000:.0f} | {percentile(s, 0.9) * 1000:.0f} "
            f"| {s[0] * 1000:.0f} | {s[-1] * 1000:.0f} | {len(s)} |"
        )
    print()


async def main(args: argparse.Namespace) -> None:
    clients = (1, args.clients)
    with (
        tempfile.TemporaryDirectory() as tmp,
        open(os.devnull, "w") as errlog,  # noqa: ASYNC230
        contextlib.ExitStack() as procs,
    ):
        root = Path(tmp)
        stdio, http = targets(root, args.before, not args.no_peers)
        groups = {"stdio": stdio, "http": http}
        if args.only:
            groups = {args.only: groups[args.only]}
        note = "load: none added" if not args.load else f"load: {os.cpu_count()} busy loops"
        idle = wait_for_idle(max_wait=30) if not args.load else "no idle check (loaded on purpose)"
        if args.load:
            procs.enter_context(busy_cores(os.cpu_count() or 1))
        load = BackgroundLoad()
        for transport, group in groups.items():
            async with AsyncExitStack() as stack:
                for target in group:
                    if transport == "http":
                        start_http(target)
                        procs.callback(stop, target.proc)  # type: ignore[arg-type]
                    before = children()
                    session = await stack.enter_async_context(connect(target, errlog))
                    target.sessions.append(session)
                    if transport == "stdio":
                        new = children() - before
                        found = next(iter(new)) if len(new) == 1 else None
                        if target.direct:
                            target.server = found
                        else:
                            target.pid = found
                await latency(group, args.calls)
                for c in clients:
                    await throughput(group, c, args.window, args.rounds, errlog)
            if transport == "http":
                for target in group:
                    if target.proc is not None:
                        stop(target.proc)
        if "stdio" in groups and args.startups:
            await startup(stdio, args.startups, errlog)
        print("\n".join(machine_lines((*_PACKAGES,))))
        print(f"- {idle}; {note}")
        print(f"- {load.report()}" + (" (the busy loops included)\n" if args.load else "\n"))
        for transport, group in groups.items():
            print(f"**{transport}** ({args.calls} calls per target alternated; throughput: "
                  f"{args.rounds} windows of {args.window:g} s per target)\n")  # fmt: skip
            report(group, clients)
        if "stdio" in groups and args.startups:
            report_startup(stdio)


_PACKAGES = ("tooldeck", "mcp", "fastmcp", "httpx2", "anyio", "uvicorn", "starlette", "pydantic")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="latency calls per target")
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients")
    parser.add_argument("--window", type=float, default=1.0, help="seconds per window")
    parser.add_argument("--rounds", type=int, default=5, help="throughput windows per target")
    parser.add_argument("--startups", type=int, default=10, help="start-up rounds (stdio)")
    parser.add_argument("--load", action="store_true", help="a busy loop on every core")
    parser.add_argument("--before", type=Path, help="another checkout's src folder")
    parser.add_argument("--no-peers", action="store_true", help="tooldeck and direct only")
    parser.add_argument("--only", choices=("stdio", "http"))
    anyio.run(main, parser.parse_args())
