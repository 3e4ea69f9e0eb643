"""Where a call through ``tooldeck serve`` spends its CPU: the gateway over stdio in
front of tests/mcp_servers/basic.py, relaying N ``echo`` calls from the official SDK
client, with the CPU time per call (the gateway's process, from /proc, after start-up)
and, with ``--profile``, a cProfile (CPU time) of the calls grouped by package (own time of
the functions, blocking waits left out).

    uv run python bench/gateway_profile.py [--calls 2000] [--profile] [--instructions]
        [--src DIR] [--http]

``--instructions`` runs the gateway under valgrind's callgrind and counts the instructions
of the measured calls only (the machine's load does not change them; slow: use
``--calls 200``). With ``--profile``, the event loop's iterations per call are counted
too (its wake-ups and the callbacks it ran). ``--http``: the gateway serves streamable
HTTP (``--http PORT``) and the client connects over it (the upstream is still over stdio).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pstats
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import get_default_environment, stdio_client

from gateway_proxy import connect_http, cpu_seconds, free_port, tooldeck_args, wait_listening

HERE = Path(__file__).parent
PY = sys.executable
LOOP = {  # what the event loop did per call: its wake-ups, and the steps it ran
    "wake-ups (selector polls)": ("selectors.py", "select"),
    "loop iterations": ("base_events.py", "_run_once"),
    "callbacks run (task steps included)": ("events.py", "_run"),
}
WAITS = ("select", "poll", "epoll", "{method 'control'", "sleep", "{built-in method posix.read}")


def _group(filename: str) -> str:
    if filename.startswith("~") or filename.startswith("<"):
        return "builtins"
    parts = Path(filename).parts
    for marker in ("site-packages", "src"):
        if marker in parts:
            rest = parts[parts.index(marker) + 1 :]
            return rest[0] if rest else marker
    return "stdlib:" + Path(filename).stem if "python3" in filename else Path(filename).stem


def report(path: Path, calls: int) -> None:
    stats = pstats.Stats(str(path))
    raw = stats.stats  # type: ignore[attr-defined]
    groups: dict[str, float] = defaultdict(float)
    top: list[tuple[float, str]] = []
    for (filename, line, name), (_cc, _nc, tottime, _ct, _callers) in raw.items():
        label = f"{filename}:{line}({name})"
        if any(w in label for w in WAITS):
            continue
        group = _group(filename)
        group = "asyncio" if group.startswith("stdlib:") and "asyncio" in filename else group
        groups[group] += tottime
        top.append((tottime, label))
    total = sum(groups.values())
    print(f"profiled CPU (waits left out): {total * 1e3 / calls:.3f} ms/call")
    counted = {label: 0 for label in LOOP}
    for (filename, _line, name), (_cc, nc, _tt, _ct, _callers) in raw.items():
        for label, (file_end, function) in LOOP.items():
            if filename.endswith(file_end) and name == function:
                counted[label] += nc
    print("event loop per call: " + ", ".join(f"{v / calls:.1f} {k}" for k, v in counted.items()))
    for group, seconds in sorted(groups.items(), key=lambda kv: -kv[1])[:16]:
        print(f"  {group:32s} {100 * seconds / total:5.1f}%  {seconds * 1e3 / calls:.3f} ms/call")
    if os.environ.get("CALLERS"):
        stats.print_callers(os.environ["CALLERS"])
    print("tooldeck's functions (cumulative time, calls per call):")
    ours = [
        (ct, nc, f"{Path(f).name}:{line}({name})")
        for (f, line, name), (_cc, nc, _tt, ct, _callers) in raw.items()
        if "/src/tooldeck/" in f
    ]
    for ct, nc, label in sorted(ours, reverse=True)[:25]:
        print(f"  {ct * 1e3 / calls:.4f} ms/call  x{nc / calls:.1f}  {label}")
    print("top functions (own time):")
    for seconds, label in sorted(top, reverse=True)[:30]:
        print(f"  {seconds * 1e3 / calls:.4f} ms/call  {label[-110:]}")


async def run(args: argparse.Namespace, root: Path) -> None:
    env = get_default_environment()
    if args.src:
        env["PYTHONPATH"] = str(args.src)
    serve = tooldeck_args(root, "profile")
    prof = root / "gateway.prof"
    command = [*([str(HERE / "_profiled.py"), str(prof)] if args.profile else []), *serve]
    grind = root / "callgrind.out"
    errlog = (root / "stderr").open("w") if args.instructions else sys.stderr
    valgrind = ["--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={grind}"]
    async with contextlib.AsyncExitStack() as stack:
        if args.http:
            port = free_port()
            grinding = ["valgrind", *valgrind] if args.instructions else []
            if args.instructions:
                env["PYTHONHASHSEED"] = "0"
            proc = subprocess.Popen(  # noqa: ASYNC220
                [*grinding, PY, *command, "--http", str(port)], env=env, stderr=errlog
            )
            stack.callback(proc.wait)
            stack.callback(proc.terminate)
            wait_listening(proc, port, "tooldeck serve --http", 900 if grinding else 60)
            client = await stack.enter_async_context(connect_http(f"http://127.0.0.1:{port}/mcp"))
        else:
            if args.instructions:  # the gateway under callgrind, counting only around the calls
                env["PYTHONHASHSEED"] = "0"
                params = StdioServerParameters(
                    command="valgrind", args=[*valgrind, PY, *command], env=env
                )
            else:
                params = StdioServerParameters(command=PY, args=command, env=env)
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
            client = await stack.enter_async_context(ClientSession(read, write))
            await client.initialize()
        for _ in range(300):  # settled: the upstream is up
            listing = await client.list_tools()
            if not (listing.meta or {}).get("tooldeck/starting"):
                break
            await anyio.sleep(0.05)
        for _ in range(50):  # warm
            await client.call_tool("echo__echo", {"text": "warm"})
        pid = _gateway_pid(root)
        if args.profile:
            os.kill(pid, signal.SIGUSR2)
            await client.call_tool("echo__echo", {"text": "warm"})  # the handler has run
        if args.instructions:
            _callgrind(pid, "-i", "on")
        before, started = cpu_seconds(pid), time.perf_counter()
        for _ in range(args.calls):
            result = await client.call_tool("echo__echo", {"text": "hello, gateway"})
            assert not result.is_error
        cpu, wall = cpu_seconds(pid) - before, time.perf_counter() - started
        if args.instructions:
            _callgrind(pid, "-i", "off")
        if args.profile:
            os.kill(pid, signal.SIGUSR1)
            for _ in range(600):
                await anyio.sleep(0.1)
                if prof.exists():
                    break
    print(f"load: {os.getloadavg()}")
    print(f"{args.calls} calls: CPU {cpu * 1e3 / args.calls:.3f} ms/call (gateway process), "
          f"wall {wall * 1e3 / args.calls:.3f} ms/call")  # fmt: skip
    if args.profile:
        report(prof, args.calls + 1)
    if args.instructions:
        count = _instructions(root / "stderr") / args.calls
        print(f"instructions: {count:,.0f} per call (callgrind, the gateway process)")


def _callgrind(pid: int, *args: str) -> None:
    subprocess.run(["callgrind_control", *args, str(pid)], check=True, capture_output=True)


def _instructions(log: Path) -> int:
    """The instructions callgrind counted (only while on: around the calls), from the
    summary it writes to the gateway's stderr at exit."""
    found = re.search(r"I\s+refs:\s+([\d,]+)", log.read_text(errors="replace"))
    if found is None:
        raise RuntimeError(f"no callgrind summary in {log}")
    return int(found.group(1).replace(",", ""))


def _gateway_pid(root: Path) -> int:
    """The gateway's process: the one whose command line names this run's state folder."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if str(root).encode() in cmdline and b"serve" in cmdline:
            return int(entry.name)
    raise RuntimeError("the gateway's process was not found")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--profile", action="store_true", help="cProfile the gateway")
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions (valgrind callgrind)"
    )
    parser.add_argument("--src", type=Path, help="another checkout's src folder")
    parser.add_argument("--http", action="store_true", help="the gateway over streamable HTTP")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        anyio.run(run, args, Path(tmp))


if __name__ == "__main__":
    main()
