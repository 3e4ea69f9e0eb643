"""web_fetch under hostile pages: bounded in memory and in CPU.

A compression bomb (``Content-Encoding: gzip, gzip``), a PDF whose pages share one huge
content stream and a page that declares ``charset=punycode`` (a quadratic decoder) are
served by a real local server. Each fetch runs in a fresh interpreter (the probe below),
which reports its peak memory (``ru_maxrss``) and, one second after the call ended (its
answer, or its deadline or abort when the answer came later), which of its threads are
still inside conversion code and which child processes are still alive.
"""

from __future__ import annotations

import asyncio
import gzip
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _local_http import RecordingServer, gzip_bomb, serving
from tooldeck import ToolContext, ToolResult, validate_arguments
from tooldeck.assembly import TurnContext
from tooldeck.builtin import load_builtin_registry
from tooldeck.builtin.web import worker
from tooldeck.web.netbody import MAX_LAYERS, read_capped

sys.path.insert(0, str(Path(__file__).parent / "web_pages"))
import make_pdf

PROBE = r"""
import asyncio, json, os, resource, sys, threading, time
from pathlib import Path
from tooldeck import AbortSignal, ToolContext, validate_arguments
from tooldeck.assembly import TurnContext
from tooldeck.builtin import load_builtin_registry

WEB = "tooldeck/builtin/web/"
CONVERTING = (WEB + "convert.py", WEB + "documents.py", WEB + "markdown.py", "/pypdf/",
              "/trafilatura/", "/charset_normalizer/", "/encodings/", "/lxml/")


TURN = TurnContext("probe", Path("."), web_provider="fetch-only")
TOOLSET = load_builtin_registry().toolset(TURN)


def fetch(url, timeout, abort_after):
    tool = TOOLSET["web_fetch"]
    signal = AbortSignal()
    ctx = ToolContext(call_id="c", tool_name="web_fetch", session_id="probe", turn=TURN,
                      toolset=TOOLSET, signal=signal)
    params = validate_arguments(tool, json.dumps({"url": url, "timeout": timeout})).params

    async def main():
        if abort_after:
            asyncio.get_running_loop().call_later(abort_after, signal.abort, "user stop")
        return await tool.invoke(params, ctx)

    return asyncio.run(main())


def converting_threads():
    me = threading.get_ident()
    found = []
    for ident, frame in sys._current_frames().items():
        files = []
        while frame is not None:
            files.append(frame.f_code.co_filename.replace(os.sep, "/"))
            frame = frame.f_back
        if ident != me and any(part in f for f in files for part in CONVERTING):
            found.append(files[0])
    return found


def children():
    # {pid: CPU ticks it used in half a second} of the live children of this process

    def ticks():
        found = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if int(stat[1]) == os.getpid() and stat[0] != "Z":
                    found[entry] = int(stat[11]) + int(stat[12])  # utime + stime
        return found

    before = ticks()
    time.sleep(0.5)
    return {pid: used - before.get(pid, used) for pid, used in ticks().items()}


report = []
for url, timeout, abort_after in json.loads(sys.argv[1]):
    started = time.monotonic()
    result = fetch(url, timeout, abort_after)
    answered = time.monotonic() - started
    text = result.text()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # look one second after the call ended: its answer, or its deadline (or abort) if the
    # answer came later than that
    ended = min(answered, abort_after or timeout)
    time.sleep(max(0.0, started + ended + 1.0 - time.monotonic()))
    report.append({
        "text": text if len(text) < 600 else f"{text[:300]} ... {text[-300:]}",
        "is_error": result.is_error, "details": result.details, "seconds": round(answered, 2),
        "peak_mib": round(peak, 1), "threads": converting_threads(), "children": children(),
    })
print(json.dumps(report), flush=True)
os._exit(0)  # a converting thread left behind must not keep this process alive
"""


def probe(*fetches: tuple[str, int, float | None]) -> list[dict[str, Any]]:
    """Run the fetches one after another in a fresh interpreter; what each left behind."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(fetches)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**_environ(), "TOOLDECK_WEB_ALLOW": "127.0.0.1"},
    )
    assert proc.returncode == 0, proc.stderr
    report: list[dict[str, Any]] = json.loads(proc.stdout)
    return report


def _environ() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if "PROXY" not in k.upper()}


STACKED_PAGE = (
    "<html><head><title>Stacked</title></head><body><main><h1>Stacked codings</h1>"
    + "".join(f"<p>This is paragraph {n} of the page.</p>" for n in range(500))
    + "</main></body></html>"
).encode()


@pytest.fixture(scope="module")
def hostile() -> Iterator[RecordingServer]:
    routes = {
        "/small": ([("Content-Type", "text/plain; charset=utf-8")], b"a small page\n"),
        "/bomb": (
            [("Content-Type", "text/plain"), ("Content-Encoding", "gzip, gzip")],
            gzip_bomb(),
        ),
        "/pdf-bomb": ([("Content-Type", "application/pdf")], make_pdf.bomb()),
        "/punycode": ([("Content-Type", "text/html; charset=punycode")], b"x" * 1_900_000),
        "/stacked": (
            [("Content-Type", "text/html; charset=utf-8"), ("Content-Encoding", "gzip, deflate")],
            zlib.compress(gzip.compress(STACKED_PAGE)),
        ),
        "/br": ([("Content-Type", "text/html"), ("Content-Encoding", "br")], b"\x8b\x03\x80"),
        "/report.pdf": (
            [("Content-Type", "application/pdf")],
            (Path(__file__).parent / "web_pages" / "report.pdf").read_bytes(),
        ),
    }
    with serving("127.0.0.1", "hostile", routes=routes) as server:
        yield server


def test_a_stacked_gzip_bomb_adds_less_than_64_mib_of_peak_memory(
    hostile: RecordingServer,
) -> None:
    assert len(hostile.routes["/bomb"][1]) < 1000  # 384 MiB inside
    control, bomb = probe((f"{hostile.url}/small", 30, None), (f"{hostile.url}/bomb", 30, None))
    assert "a small page" in control["text"]
    grew = bomb["peak_mib"] - control["peak_mib"]
    print(f"peak memory: control {control['peak_mib']} MiB, after the bomb {bomb['peak_mib']} MiB")
    assert grew < 64, f"the gzip bomb raised peak memory by {grew:.0f} MiB"
    assert not bomb["is_error"], bomb["text"]
    assert bomb["details"]["bytes_read"] == 2_000_000 and bomb["details"]["capped"]
    assert "[Download stopped at the byte limit" in bomb["text"]


@pytest.fixture(scope="module")
def slow_pages(hostile: RecordingServer) -> dict[str, dict[str, Any]]:
    """What each slow page left behind, one after another in one fresh interpreter."""
    names = ("pdf bomb", "pdf bomb, aborted", "punycode", "pdf after them")
    reports = probe(
        (f"{hostile.url}/pdf-bomb", 2, None),
        (f"{hostile.url}/pdf-bomb", 30, 1.0),
        (f"{hostile.url}/punycode", 10, None),
        (f"{hostile.url}/report.pdf", 30, None),
    )
    return dict(zip(names, reports, strict=True))


@pytest.mark.parametrize("case", ["pdf bomb", "pdf bomb, aborted"])
def test_a_pdf_bomb_is_stopped_when_the_call_ends_and_leaves_nothing_running(
    hostile: RecordingServer, slow_pages: dict[str, dict[str, Any]], case: str
) -> None:
    bomb = slow_pages[case]
    if case == "pdf bomb":
        assert bomb["text"] == f"Timed out after 2 s fetching {hostile.url}/pdf-bomb."
    else:
        assert bomb["text"] == f"Fetching {hostile.url}/pdf-bomb was aborted (user stop)."
    assert bomb["threads"] == [], "a thread is still converting the page"
    assert bomb["children"] == {}, "the process that converted the page is still there"
    # the next fetch is served as usual (by a fresh converter)
    after = slow_pages["pdf after them"]
    assert not after["is_error"] and "Harbor Street Traffic Study" in after["text"]


def test_a_page_in_a_quadratic_charset_is_refused_and_leaves_nothing_running(
    slow_pages: dict[str, dict[str, Any]],
) -> None:
    page = slow_pages["punycode"]
    assert not page["is_error"], page["text"]
    assert (
        "[The page declares the charset 'punycode', which is not a text encoding" in (page["text"])
    )
    assert page["threads"] == []
    # the worker that answered waits for the next page (idle: no CPU)
    assert all(used <= 1 for used in page["children"].values()), page["children"]


# -- decoding: every layer inflated in bounded steps -------------------------------------------


class Chunks(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


ENCODERS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "x-gzip": gzip.compress,
    "deflate": zlib.compress,  # zlib-wrapped, as the RFC says
    "raw deflate": lambda data: zlib.compress(data, wbits=-15)[:],  # as many servers send
    "identity": lambda data: data,
}


def served(data: bytes, codings: list[str], cuts: list[int]) -> httpx.Response:
    """A response whose body is ``data`` encoded with ``codings`` (in order), arriving in
    pieces cut at ``cuts``."""
    for coding in codings:
        data = ENCODERS[coding](data)
    bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    chunks = [data[a:b] for a, b in itertools.pairwise(bounds)]
    header = ", ".join("deflate" if c == "raw deflate" else c for c in codings)
    return httpx.Response(200, headers={"Content-Encoding": header}, stream=Chunks(chunks))


bodies = st.one_of(
    st.binary(max_size=3000),
    st.tuples(st.binary(min_size=1, max_size=40), st.integers(1, 6000)).map(lambda t: t[0] * t[1]),
)
codings = st.lists(st.sampled_from(sorted(ENCODERS)), max_size=4).filter(
    lambda cs: sum(c != "identity" for c in cs) <= MAX_LAYERS
)


@settings(max_examples=150, deadline=None)
@given(bodies, codings, st.lists(st.integers(0, 10**6), max_size=6), st.integers(0, 300_000))
def test_read_capped_gives_the_body_up_to_the_limit_through_any_stack_of_codings(
    data: bytes, stack: list[str], cuts: list[int], limit: int
) -> None:
    body, capped = asyncio.run(read_capped(served(data, stack, cuts), limit))
    assert body == data[:limit]
    assert capped == (len(data) > limit)


def test_a_three_layer_bomb_costs_a_few_steps_of_memory() -> None:
    bomb = gzip_bomb(mib=256, layers=3)
    tracemalloc.start()
    try:
        response = httpx.Response(
            200, headers={"Content-Encoding": "gzip, gzip, gzip"}, stream=Chunks([bomb])
        )
        body, capped = asyncio.run(read_capped(response, 2_000_000))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert capped and body == bytes(2_000_000)
    assert peak < 16 * 2**20, f"{peak / 2**20:.1f} MiB"  # the 2 MB body, twice, and steps


@pytest.mark.parametrize(
    ("header", "why"),
    [
        ("br", "the body is encoded with 'br', which is not decoded (only gzip, deflate are"),
        ("zstd", "the body is encoded with 'zstd', which is not decoded"),
        ("gzip, gzip, gzip, gzip", "the body is encoded 4 times over"),
    ],
)
def test_codings_that_cannot_be_bounded_are_refused_in_one_line(header: str, why: str) -> None:
    response = httpx.Response(200, headers={"Content-Encoding": header}, stream=Chunks([b"x"]))
    with pytest.raises(httpx.DecodingError, match=re.escape(why)):
        asyncio.run(read_capped(response, 100))


# -- web_fetch in this process -----------------------------------------------------------------


@pytest.fixture
def allow_local(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "TOOLDECK_WEB_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TOOLDECK_WEB_ALLOW", "127.0.0.1")


def web_fetch(
    url: str, timeout: int = 30, on_start: Callable[[], None] | None = None
) -> ToolResult:
    turn = TurnContext("s", Path("."), web_provider="fetch-only")
    toolset = load_builtin_registry().toolset(turn)
    tool = toolset["web_fetch"]
    ctx = ToolContext(
        call_id="c", tool_name="web_fetch", session_id="s", turn=turn, toolset=toolset
    )
    params = validate_arguments(tool, json.dumps({"url": url, "timeout": timeout})).params
    return asyncio.run(tool.invoke(params, ctx))


def test_a_page_in_two_codings_reads_in_full(hostile: RecordingServer, allow_local: None) -> None:
    result = web_fetch(f"{hostile.url}/stacked")
    assert not result.is_error, result.text()
    assert "# Stacked codings" in result.text() and "paragraph 499 of the page" in result.text()
    assert not result.details["capped"]


def test_a_coding_that_was_not_asked_for_is_refused(
    hostile: RecordingServer, allow_local: None
) -> None:
    result = web_fetch(f"{hostile.url}/br")
    assert result.is_error
    assert result.text() == (
        f"Could not fetch {hostile.url}/br: DecodingError: the body is encoded with 'br', "
        "which is not decoded (only gzip, deflate are, and only those are asked for)"
    )
    assert hostile.hits[-1].startswith("GET /br ")


# -- the conversion worker ----------------------------------------------------------------------


def workers_of_this_process() -> list[int]:
    """The conversion workers this process started (live ones)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[1]) == os.getpid() and stat[0] != "Z" and b"web.worker" in cmdline:
            found.append(int(entry))
    return found


@pytest.fixture
def fresh_workers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A pool of its own for the test (so module settings changed by it apply)."""
    pool = worker._Pool()
    monkeypatch.setattr(worker, "_pool", pool)
    yield
    pool.close()


def test_a_worker_killed_from_outside_is_a_note_and_is_replaced(
    hostile: RecordingServer, allow_local: None, fresh_workers: None
) -> None:
    # What the system's OOM killer does: the worker converting the page dies.
    def kill_the_worker() -> None:
        time.sleep(1.0)  # the page has long arrived: its worker is converting it
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            before = {pid: cpu_ticks(pid) for pid in workers_of_this_process()}
            time.sleep(0.25)
            busy = [pid for pid, ticks in before.items() if cpu_ticks(pid) - ticks >= 5]
            for pid in busy:
                os.kill(pid, signal.SIGKILL)
            if busy:
                return

    killer = threading.Thread(target=kill_the_worker)
    killer.start()
    result = web_fetch(f"{hostile.url}/pdf-bomb", timeout=60)
    killer.join()
    assert not result.is_error
    assert "[The page could not be converted: the converter stopped (exit status -9).]" in (
        result.text()
    )
    assert result.details["format"] == "error"
    after = web_fetch(f"{hostile.url}/report.pdf")
    assert "Harbor Street Traffic Study" in after.text()


def cpu_ticks(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(stat[11]) + int(stat[12])


def test_a_page_that_needs_more_memory_than_allowed_is_a_note(
    hostile: RecordingServer,
    allow_local: None,
    fresh_workers: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(worker, "MEMORY_LIMIT", 150 * 2**20)
    result = web_fetch(f"{hostile.url}/pdf-bomb", timeout=60)
    assert not result.is_error, result.text()
    assert result.text().endswith(
        "[The page could not be converted: reading it needs more than the 150 MiB allowed.]"
    )


def test_without_an_interpreter_to_start_pages_are_converted_in_a_thread(
    hostile: RecordingServer,
    allow_local: None,
    fresh_workers: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(sys, "frozen", True, raising=False)  # as a frozen application is
    before = workers_of_this_process()
    first = web_fetch(f"{hostile.url}/report.pdf")
    second = web_fetch(f"{hostile.url}/small")
    assert "Harbor Street Traffic Study" in first.text() and "a small page" in second.text()
    assert workers_of_this_process() == before
    warnings = [r.getMessage() for r in caplog.records if "in a thread" in r.getMessage()]
    assert warnings == [
        "web_fetch converts pages in a thread: no worker process (this is a frozen "
        "application or has no Python interpreter); the deadline then bounds the wait for "
        "a conversion, not the conversion"
    ]
