"""Shared test settings."""

import gc
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=200
)
settings.register_profile(
    "ci",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    max_examples=300,
    derandomize=True,
)
settings.load_profile("ci" if __import__("os").environ.get("CI") else "default")

# Tool search caches embeddings under the user's cache folder; tests keep theirs private.
os.environ.setdefault("TOOLDECK_CACHE_DIR", tempfile.mkdtemp(prefix="tooldeck-test-cache-"))

# The tests' PostgreSQL sessions (theirs and their worker processes', through libpq) do not
# wait for each commit to reach the disk: a commit there waits for a WAL flush (5.4 ms on the
# project's machines, 0.07 ms without), and a three-worker test makes hundreds. Only a crash
# of the server could lose such commits, and no test crashes it.
os.environ.setdefault("PGOPTIONS", "-c synchronous_commit=off")

# Tests that run worker, scheduler or job processes take the longest (10-30 s each): run
# them first, so that with several test processes (pytest-xdist) the run does not end with one
# process still in a long test while the others have nothing left to do.
_LONG_FIRST = (
    # the mypy group (one process): mypy on a user's file, which writes the mypy cache the
    # docs blocks' mypy then reads, and every docs block, a process each
    "test_typed_entry_points.py",
    "test_docs_blocks.py",
    "test_worker_logs.py",
    "test_jobs_dbos.py",
    "test_workflows_workers.py",
    "test_workflows_faults.py",
    "test_gateway_out_of_band.py",
    "test_gateway_clients_cli.py",
    "test_jobs_processes.py",
    "test_gateway_stateless.py",
    "test_telemetry_integration.py",
)


def _module_scoped(item: pytest.Item) -> bool:
    """Whether the test uses a fixture set up once per module (a server, a build)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(defs[-1].scope == "module" for defs in info.name2fixturedefs.values() if defs)


# Tests that run DBOS or job workers on PostgreSQL, some of them behind a relay that drops
# their packets: on one test process, one after the other. DBOS makes its tables (per test,
# in a schema of its own) with CREATE INDEX CONCURRENTLY, which waits for every transaction
# open in the database; a worker whose network was dropped leaves one open until its
# idle-in-transaction timeout, so a test of one process making DBOS's tables while a test of
# the other dropped a worker's network waited 15-20 s (seen in pg_locks: virtualxid).
_PG_WORKERS = frozenset(
    {
        "test_worker_logs.py",
        "test_jobs_dbos.py",
        "test_workflows_workers.py",
        "test_workflows_faults.py",
        "test_workflows_queue.py",
        "test_jobs_processes.py",
        "test_jobs_faults.py",
        "test_jobs_policy.py",
        "test_telemetry_integration.py",
    }
)


def pytest_itemcollected(item: pytest.Item) -> None:
    if item.path.name in _PG_WORKERS and not any(item.iter_markers("xdist_group")):
        item.add_marker(pytest.mark.xdist_group("pg-workers"))
        return
    # A module-scoped fixture is set up once per test process that runs one of its tests:
    # the tests of a module that share one (an OAuth gateway, a web server, a parsed
    # OpenAPI spec) run on one process, unless they are in a group of their own already.
    # (Here, not in pytest_collection_modifyitems: pytest-xdist reads the marks there.)
    if _module_scoped(item) and not any(item.iter_markers("xdist_group")):
        item.add_marker(pytest.mark.xdist_group(f"module:{item.path.name}"))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Make ``--dist loadgroup`` group again: pytest-xdist (3.8) writes the group into the
    legacy ``item._nodeid`` (``...::test@group``), which pytest 9.2 no longer reads (its
    node ids are structured, ``item._id``), so every ``xdist_group`` mark was ignored and
    grouped tests spread over both processes (pytest-xdist issue 1386, fix pending in
    pull request 1388). Runs after pytest-xdist's hook; a no-op where the two agree.

    And the long tests first (``_LONG_FIRST``)."""

    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return _LONG_FIRST.index(name) if name in _LONG_FIRST else len(_LONG_FIRST)

    items.sort(key=rank)  # stable: the order inside each group is kept
    if not config.getoption("loadgroup", default=False):
        return
    for item in items:
        legacy = getattr(item, "_nodeid", None)
        if isinstance(legacy, str) and legacy != item.nodeid and hasattr(item, "_id"):
            from _pytest.nodeid import NodeId

            item._id = NodeId.parse(legacy)


# The collector. A test process holds half a million objects that live as long as it does
# (the modules of tooldeck, the MCP and provider SDKs, Hypothesis, pytest's items), and
# every full collection walks them all: the automatic ones, and each gc.collect() of a test
# (tests/providers/ collect an earlier test's dropped clients first), 0.2-0.7 CPU-s each.
# What is still alive once collection ends, and after each test file (its module fixtures
# torn down), is moved out of the collector's sight (gc.freeze); collections then walk only
# what was made since. A frozen object is still freed when its last reference goes: only a
# reference cycle of frozen objects would stay until the process exits.
def pytest_collection_finish(session: pytest.Session) -> None:
    gc.collect()
    gc.freeze()


# Per-test CPU, for finding where the suite's time goes (off unless asked):
# `TOOLDECK_TEST_CPU=/tmp/cpu pytest ...` appends one line per test to
# `/tmp/cpu.<pid>.tsv`: start (epoch), wall, CPU of the test process, CPU of the processes
# it started and waited for (set-up and teardown included, so a module fixture counts on
# its first test), and the node id. The processes the fork server ran (below) are not the
# test process's children: their CPU is in `/tmp/cpu.zygote.<pid>.tsv`, a line each (end,
# CPU, command line), to match with the tests by time.
_CPU_LOG = os.environ.get("TOOLDECK_TEST_CPU")


def _cpu() -> tuple[float, float]:
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):  # type: ignore[no-untyped-def]
    start, wall, (own, kids) = time.time(), time.perf_counter(), _cpu() if _CPU_LOG else (0, 0)
    yield
    if nextitem is not None and nextitem.path != item.path:  # the file's last test: freeze
        gc.collect()
        gc.freeze()
    if _CPU_LOG:
        wall, (own2, kids2) = time.perf_counter() - wall, _cpu()
        with open(f"{_CPU_LOG}.{os.getpid()}.tsv", "a") as out:
            cpu = f"{own2 - own:.2f}\t{kids2 - kids:.2f}"
            out.write(f"{start:.1f}\t{wall:.2f}\t{cpu}\t{item.nodeid}\n")


# The fork server (tests/_zygote.py): one per test process, which the test MCP servers
# (tests/mcp_servers/) and the gateways (tests/gateway_client.py) this process starts hand
# off to, so that they need not import the MCP SDK each (~0.8 CPU-s a process).
# `TOOLDECK_TEST_ZYGOTE=0` runs without it; `@pytest.mark.no_zygote` runs one test without.
_zygote: subprocess.Popen[bytes] | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _zygote
    config.addinivalue_line(
        "markers", "no_zygote: the processes this test starts are started as usual"
    )
    worker = hasattr(config, "workerinput")
    controller = not worker and (config.getoption("numprocesses", default=None) or 0) > 0
    if os.environ.get("TOOLDECK_TEST_ZYGOTE") == "0" or controller or sys.platform != "linux":
        return
    _zygote = subprocess.Popen(
        [sys.executable, str(Path(__file__).parent / "_zygote.py"), str(os.getpid())],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )


# `python -m MODULE ...` commands a test starts itself, run by the fork server too (through
# tests/_zygote_run.py): the gateway and the short CLI commands, and PyPI's time server;
# not the commands that start workers (their own process trees, kills and takeovers).
_FORKED_COMMANDS = {
    "tooldeck.cli": {"serve", "approve", "mcp", "tools", "search", "policy", "toolkits",
                     "timeline", "report", "sessions", "version"},
    "mcp_server_time": None,  # any arguments
}  # fmt: skip
_RUN = str(Path(__file__).parent / "_zygote_run.py")
_popen_init = subprocess.Popen.__init__


def _through_zygote(args: Any) -> Any:
    if _zygote is None or not isinstance(args, list | tuple) or len(args) < 3:
        return args
    if args[0] != sys.executable or args[1] != "-m" or args[2] not in _FORKED_COMMANDS:
        return args
    commands = _FORKED_COMMANDS[args[2]]
    if commands is not None and (len(args) < 4 or args[3] not in commands):
        return args
    return [args[0], _RUN, *args[1:]]


def _popen(self: subprocess.Popen[Any], args: Any, *rest: Any, **options: Any) -> None:
    _popen_init(self, _through_zygote(args), *rest, **options)


subprocess.Popen.__init__ = _popen  # type: ignore[method-assign]


def pytest_unconfigure(config: pytest.Config) -> None:
    global _zygote
    if _zygote is not None:
        assert _zygote.stdin is not None
        _zygote.stdin.close()  # it stops the servers still running, then itself
        try:
            _zygote.wait(20)
        except subprocess.TimeoutExpired:
            _zygote.kill()
            _zygote.wait()
        _zygote = None


@pytest.fixture(autouse=True)
def _without_zygote(request: pytest.FixtureRequest) -> Iterator[None]:
    """For a test marked ``no_zygote``: the fork server refuses while it runs."""
    if _zygote is None or request.node.get_closest_marker("no_zygote") is None:
        yield
        return
    _zygote_control("off")
    try:
        yield
    finally:
        _zygote_control("on")


def _zygote_control(state: str) -> None:
    import json
    import socket
    import struct

    from mcp_servers._zygote_client import address

    payload = json.dumps({"control": state}).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        deadline = time.monotonic() + 30
        while True:  # it listens a moment after it started
            try:
                sock.connect(address(os.getpid()))
                break
            except OSError:
                if _zygote is None or _zygote.poll() is not None or time.monotonic() > deadline:
                    return  # not running: nothing is handed off either
                time.sleep(0.01)
        sock.settimeout(30)
        sock.sendall(struct.pack("!I", len(payload)) + payload)
        assert sock.recv(2) == b"A\n"
