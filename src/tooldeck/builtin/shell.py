"""The shell tool: ``run_bash`` runs a command with ``bash -c`` in the agent's home.

The command runs in its own session (so its own process group); on timeout, on the
call's abort signal and when the calling task is cancelled the whole group is killed, so
children such as a ``sleep`` started by the command die with it. Output is captured with
a bounded head and tail per stream: a command that prints gigabytes costs bounded memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal as signals
import subprocess
from dataclasses import dataclass, field

from ..context import ToolContext
from ..registry import Handlers
from ..result import ToolResult
from ._common import ToolFailure, home_of

handlers = Handlers("shell")

MAX_TIMEOUT = 600  # seconds; the input schema's maximum too
OUTPUT_HEAD_BYTES = 12_000  # kept from the start of each stream
OUTPUT_TAIL_BYTES = 12_000  # kept from the end of each stream
DRAIN_GRACE = 2.0  # seconds to finish reading output once bash has exited


@dataclass(slots=True)
class _Capture:
    """A stream's first and last bytes, and how many there were in all."""

    head_limit: int = OUTPUT_HEAD_BYTES
    tail_limit: int = OUTPUT_TAIL_BYTES
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    total: int = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.tail_limit:
                del self.tail[: len(self.tail) - self.tail_limit]

    @property
    def cut(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        if not self.cut:
            return bytes(self.head + self.tail).decode("utf-8", "replace")
        head = bytes(self.head).decode("utf-8", "replace")
        tail = bytes(self.tail).decode("utf-8", "replace")
        return (
            f"{head}\n… [{self.cut} bytes cut from the middle; {self.total} bytes in all. "
            "Redirect the output to a file and read it with read_document or grep_files "
            f"to see everything.] …\n{tail}"
        )


class _Protocol(asyncio.SubprocessProtocol):
    """Feeds the captures as data arrives and reports exit and end of output separately.

    (``Process.wait()`` cannot be used to learn that bash exited: on some Python versions
    it also waits for the pipes to close, which a background job can hold open.)
    """

    def __init__(self) -> None:
        self.stdout = _Capture()
        self.stderr = _Capture()
        self.exited = asyncio.Event()
        self.output_closed = asyncio.Event()
        self._open_pipes = {1, 2}

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        chunk = data.encode() if isinstance(data, str) else data
        (self.stdout if fd == 1 else self.stderr).feed(chunk)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open_pipes.discard(fd)
        if not self._open_pipes:
            self.output_closed.set()

    def process_exited(self) -> None:
        self.exited.set()


def _kill_group(pid: int) -> None:
    # start_new_session=True made the shell a session (and process group) leader: pgid == pid.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signals.SIGKILL)


def _exit_label(code: int | None) -> str:
    if code is None:
        return "unknown"
    if code < 0:
        try:
            name = signals.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"{code} (killed by {name})"
    return str(code)


def _section(name: str, capture: _Capture) -> str:
    if not capture.total:
        return f"{name}: (empty)"
    return f"{name}:\n{capture.text().rstrip(chr(10))}"


@handlers("run_bash")
async def run_bash(
    command: str,
    ctx: ToolContext,
    timeout: int = 120,  # noqa: ASYNC109 - the tool's argument, named by the input schema
) -> ToolResult:
    try:
        home = home_of(ctx)
    except ToolFailure as failure:
        return failure.result()
    if not home.is_dir():
        return ToolResult.error(f"The home directory {home} does not exist.")
    if ctx.signal.aborted:
        return ToolResult.error(f"Not run: the call was aborted ({ctx.signal.reason}).")
    timeout = max(1, min(timeout, MAX_TIMEOUT))
    env = {str(k): str(v) for k, v in (getattr(ctx.turn, "env", None) or {}).items()}
    env.setdefault("PATH", os.environ.get("PATH") or os.defpath)

    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await loop.subprocess_exec(
            _Protocol,
            "bash",
            "-c",
            command,
            cwd=home,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return ToolResult.error(f"Could not start bash: {exc}")
    pid = transport.get_pid()
    stopped: list[str] = []  # why the command was killed, if it was
    finished = False

    def on_abort(reason: str) -> None:
        # May run on any thread; os.killpg is safe there.
        if not finished and transport.get_returncode() is None:
            stopped.append(f"aborted ({reason})")
            _kill_group(pid)

    ctx.signal.on_abort(on_abort)
    output_left_open = False
    try:
        try:
            await asyncio.wait_for(protocol.exited.wait(), timeout)
        except TimeoutError:
            stopped.append(f"timed out after {timeout} s")
            _kill_group(pid)
            await protocol.exited.wait()
        try:
            await asyncio.wait_for(protocol.output_closed.wait(), DRAIN_GRACE)
        except TimeoutError:
            # Something still holds the output pipes open (a background job, or a process
            # that left the group with setsid); stop reading rather than wait for it.
            output_left_open = True
    finally:
        finished = True
        if transport.get_returncode() is None:  # the calling task was cancelled
            _kill_group(pid)
        transport.close()

    code = transport.get_returncode()
    stdout, stderr = protocol.stdout, protocol.stderr
    stopped_for = stopped[0] if stopped else None
    lines: list[str] = []
    if stopped_for:
        lines.append(
            f"The command {stopped_for} and was killed, with every process it started in its "
            "process group. Output up to that point:"
        )
    lines.append(f"Exit code: {_exit_label(code)}")
    lines.append(_section("stdout", stdout))
    lines.append(_section("stderr", stderr))
    if output_left_open:
        lines.append(
            "[Background processes still held the output open after bash exited; output "
            "after that point was not captured. Redirect a background job's output to a file.]"
        )
    details = {
        "exit_code": code,
        "stopped": stopped_for,
        "stdout_bytes": stdout.total,
        "stderr_bytes": stderr.total,
        "stdout_cut_bytes": stdout.cut,
        "stderr_cut_bytes": stderr.cut,
        "timeout": timeout,
    }
    return ToolResult(content="\n".join(lines), details=details, is_error=stopped_for is not None)
