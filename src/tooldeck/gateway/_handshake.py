"""``initialize`` answered before the MCP SDK is loaded (``tooldeck serve`` over stdio).

Loading the MCP SDK is most of the gateway's start (hundreds of milliseconds of
imports), and a client waits for its ``initialize`` answer all that time. Nothing in
that answer needs the SDK: the gateway's name, version, instructions and capabilities
(``tools.listChanged``, ``resources``, ``prompts``), and the protocol version (the
client's when it is one the SDK speaks by handshake, else the latest of those). So
:class:`EarlyInitialize`, a thread started before the imports, reads the client's first
message and, when it is a well-formed ``initialize``, answers it at once. The message is
then handed to the SDK as if it had just arrived (:class:`~._stdin.WireStdin`, so the
SDK's session knows the client, its capabilities included), and the SDK's own answer to
it is not sent again (:class:`~._stdin.WireStdout`). Any other first message (a
2026-07-28 client's request, anything unusual) is left to the SDK, unanswered here.

This module imports nothing of the SDK (nor of the gateway); tests/test_gateway_startup.py
checks that its answer is the SDK's, for every protocol version.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
from typing import Any

__all__ = [
    "HANDSHAKE_VERSIONS",
    "INSTRUCTIONS",
    "EarlyInitialize",
    "initialize_answer",
    "start_for_command",
]

INSTRUCTIONS = (
    "tooldeck gateway: the tools of several MCP servers behind one policy. Only a few "
    "tools are listed; find the others with tool_search (they are then listed, or call "
    "them with call_tool). Large results are stored: read them with recall_tool_result."
)
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The SDK's ``mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS``, the last the latest."""
_CAPABILITIES = {  # as the SDK declares them for the gateway's handlers (content.py too)
    "prompts": {"listChanged": True},
    "resources": {"listChanged": True, "subscribe": True},
    "tools": {"listChanged": True},
}
_MAX_FIRST = 1 << 20  # a first message longer than this is the SDK's to read


def _an_object(value: Any) -> bool:
    return isinstance(value, dict)


def initialize_answer(line: bytes, version: str) -> tuple[int | str, bytes] | None:
    """``(request id, answer line)`` when ``line`` is an ``initialize`` request the SDK
    would accept as it is, else ``None``."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    request_id = message.get("id")
    if message.get("method") != "initialize" or type(request_id) not in (int, str):
        return None
    assert isinstance(request_id, int | str)
    params = message.get("params")
    if not isinstance(params, dict):
        return None
    requested = params.get("protocolVersion")
    capabilities = params.get("capabilities")
    client = params.get("clientInfo")
    if not (
        isinstance(requested, str)
        and isinstance(capabilities, dict)
        and all(_an_object(v) or v is None for v in capabilities.values())
        and isinstance(client, dict)
        and isinstance(client.get("name"), str)
        and isinstance(client.get("version"), str)
    ):
        return None
    negotiated = requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
    result = {
        "capabilities": _CAPABILITIES,
        "instructions": INSTRUCTIONS,
        "protocolVersion": negotiated,
        "serverInfo": {"name": "tooldeck", "version": version},
    }
    answer = {"jsonrpc": "2.0", "id": request_id, "result": result}
    return request_id, (json.dumps(answer, separators=(",", ":")) + "\n").encode("utf-8")


class EarlyInitialize(threading.Thread):
    """Reads the client's first message from fd 0 and answers it when it is
    ``initialize`` (see the module docstring). After ``join()``: ``read``, the bytes
    read (to be read again by the SDK), and ``answered``, the id of the request answered
    here (``None``: none was)."""

    def __init__(self, version: str) -> None:
        super().__init__(name="tooldeck-initialize", daemon=True)
        self.version = version
        self.read = b""
        self.answered: int | str | None = None

    def run(self) -> None:
        try:
            while b"\n" not in self.read and len(self.read) < _MAX_FIRST:
                chunk = os.read(0, 65_536)
                if not chunk:
                    return
                self.read += chunk
            first = initialize_answer(self.read.split(b"\n", 1)[0], self.version)
            if first is None:
                return
            request_id, line = first
            view = memoryview(line)
            while view:
                view = view[os.write(1, view) :]
            self.answered = request_id
        except OSError:
            return  # a non-blocking stdin, a closed stdout: the SDK reads and answers

    @classmethod
    def start_if_piped(cls, version: str) -> EarlyInitialize | None:
        """Started when stdin and stdout are pipes or sockets (a client's), else None;
        the one started already (:func:`start_for_command`), if any."""
        global _started
        if _started is not None:  # taken once: a later serve in this process starts anew
            early, _started = _started, None
            return early
        if sys.platform == "win32":
            return None
        for fd in (0, 1):
            try:
                mode = os.fstat(fd).st_mode
            except OSError:
                return None
            if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
                return None
        early = cls(version)
        early.start()
        return early


_started: EarlyInitialize | None = None
_NOT_STDIO = frozenset(
    {"--http", "--check", "--init", "--force", "--import", "--import-from", "--help", "-h"}
)


def start_for_command(argv: list[str], version: str) -> None:
    """Start :class:`EarlyInitialize` at once when ``argv`` is ``tooldeck serve`` over
    stdio (before the command line's own imports and parsing: typer, most of a start
    under load), so ``initialize`` is answered sooner; ``tooldeck serve`` then takes
    this thread. Anything else (another command, an option that does not serve stdio)
    starts nothing: the command decides as before."""
    if len(argv) < 2 or argv[1] != "serve":
        return
    if any(arg.split("=", 1)[0] in _NOT_STDIO for arg in argv[2:]):
        return
    global _started
    _started = EarlyInitialize.start_if_piped(version)
