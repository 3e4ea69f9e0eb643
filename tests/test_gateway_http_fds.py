"""``tooldeck serve --http`` keeps its listening socket to itself.

The upstream servers the gateway starts must not inherit the socket it listens on: a
gateway killed (``kill -9``) would otherwise leave its port held by its orphaned
upstream servers, which never accept on it, so the gateway started again on that port
cannot have it, and a client's request to it is held in their backlog until they exit
(a reset: ``ReadError``). Python's own subprocesses close every inherited descriptor,
but uvloop's (the gateway's event loop) only those not marked inheritable.

Real gateway process in front of tests/mcp_servers/basic.py (started, and answering, once
its ``pid`` tool answers); the descriptors of every process are read from /proc (Linux).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

from gateway_client import (
    ALLOW_ALL,
    gateway_process,
    http_client,
    result_of,
    stdio,
    write_config,
    write_policy,
)
from tooldeck.gateway.server import http_socket


def test_the_listening_socket_is_not_inheritable() -> None:
    sock = http_socket("127.0.0.1", 0)
    with sock:
        assert not sock.get_inheritable()


def _listening_inode(port: int) -> str:
    """The inode of the socket listening on ``port`` (/proc/net/tcp)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state, inode = fields[1], fields[3], fields[9]
        if int(local.split(":")[1], 16) == port and state == "0A":  # LISTEN
            return inode
    raise AssertionError(f"nothing listens on {port}")


def _holders(inode: str) -> set[int]:
    """The processes (of this user) with a descriptor of socket ``inode``."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            targets = {os.readlink(fd) for fd in (entry / "fd").iterdir()}
        except OSError:  # gone, or not ours
            continue
        if f"socket:[{inode}]" in targets:
            found.add(int(entry.name))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_an_upstream_server_does_not_hold_the_gateways_listening_socket(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, {"alpha": stdio("basic.py")})
    policy = write_policy(tmp_path, ALLOW_ALL)
    with gateway_process(config, tmp_path / "state", "--policy", str(policy)) as (url, _):
        port = int(url.rsplit(":", 1)[1].split("/")[0])

        async def upstream_pid() -> int:  # the upstream server started, and answering
            async with http_client(url) as c:
                return int(result_of(await c.call_tool("alpha__pid", {})))

        assert anyio.run(upstream_pid) > 0
        holders = _holders(_listening_inode(port))
        assert len(holders) == 1, holders  # the gateway, none of its children
