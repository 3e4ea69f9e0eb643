"""The client's roots through ``tooldeck serve`` to its upstream servers.

A real gateway reached by the official MCP SDK client declaring roots, over stdio and
HTTP; upstream, npm's ``@modelcontextprotocol/server-filesystem`` started with no
directory (it works in the roots its client gives: ``list_allowed_directories`` says
which). Over HTTP two client sessions share the upstream: it is told the part of their
roots they have in common, and the other's again when one ends.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway_client import (
    ALLOW_ALL,
    gateway,
    http_client,
    node_server,
    npm_server,
    served_gateway,
    text_of,
    write_config,
    write_policy,
)
from tooldeck.gateway.roots import common, paths_of

FILESYSTEM = ("@modelcontextprotocol/server-filesystem", "2026.8.31", "mcp-server-filesystem")
ALLOWED = "fs__list_allowed_directories"
# handshake-era features, which the SDK client warns of
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


class Roots:
    """A client's roots callback, answering the folders it is set to."""

    def __init__(self, *folders: Path) -> None:
        self.folders = list(folders)
        self.asked = 0
        self.broken = False

    async def __call__(self, context: Any) -> types.ListRootsResult:
        self.asked += 1
        if self.broken:
            raise RuntimeError("the roots dialog crashed")
        return types.ListRootsResult(
            roots=[types.Root(uri=f.as_uri(), name=f.name) for f in self.folders]
        )


def serving(tmp_path: Path) -> tuple[Path, str, str, str, str]:
    entry = npm_server(*FILESYSTEM)
    config = write_config(tmp_path, {"fs": node_server(entry)})
    return config, "--core", "*", "--policy", str(write_policy(tmp_path, ALLOW_ALL))


async def allowed(client: Any) -> str:
    return text_of(await client.call_tool(ALLOWED, {}))


async def until_allowed(client: Any, *folders: Path, not_: tuple[Path, ...] = ()) -> str:
    """Wait until the server works in ``folders`` (and not in ``not_``): it asks for the
    roots on its own once told they changed."""
    with anyio.fail_after(30):
        while True:
            text = await allowed(client)
            if all(str(f) in text for f in folders) and not any(
                str(f) + "\n" in text + "\n" for f in not_
            ):
                return text
            await anyio.sleep(0.1)


def folders(tmp_path: Path, *names: str) -> list[Path]:
    made = [(tmp_path / n).resolve() for n in names]
    for folder in made:
        folder.mkdir(parents=True)
    return made


def test_server_filesystem_works_in_the_clients_root_and_follows_its_change(
    tmp_path: Path,
) -> None:
    first, second = folders(tmp_path, "first", "second")
    (first / "a.txt").write_text("in the first root")
    roots = Roots(first)

    async def main() -> None:
        config, *args = serving(tmp_path)
        async with gateway(config, tmp_path / "state", *args, roots=roots) as client:
            text = await until_allowed(client, first)
            assert str(second) not in text
            read = await client.call_tool("fs__read_text_file", {"path": str(first / "a.txt")})
            assert "in the first root" in text_of(read)
            roots.folders = [second]
            await client.send_roots_list_changed()
            await until_allowed(client, second, not_=(first,))
            refused = await client.call_tool("fs__read_text_file", {"path": str(first / "a.txt")})
            assert refused.is_error and "in the first root" not in text_of(refused)

            # a flood of changes: asked one at a time, and the last one is what counts
            asked = roots.asked
            for i in range(50):
                roots.folders = [first if i % 2 else second]
                await client.send_roots_list_changed()
            await until_allowed(client, first, not_=(second,))
            assert roots.asked - asked <= 25, roots.asked - asked

            # a client whose answer fails: the roots stay as they were, the session goes on
            asked = roots.asked
            roots.broken = True
            roots.folders = [second]
            await client.send_roots_list_changed()
            with anyio.fail_after(30):
                while roots.asked == asked:  # noqa: ASYNC110 (the client's own counter)
                    await anyio.sleep(0.05)
            await anyio.sleep(0.5)
            text = await allowed(client)
            assert str(first) in text and str(second) not in text

    anyio.run(main)


def test_over_http_the_upstream_gets_what_the_client_sessions_share(tmp_path: Path) -> None:
    shared, mine, deep, theirs = folders(tmp_path, "shared", "mine", "shared/deep", "theirs")
    a_roots, b_roots = Roots(shared, mine), Roots(deep, theirs)

    async def main() -> None:
        config, *args = serving(tmp_path)
        with served_gateway(config, tmp_path / "state", *args) as url:
            async with http_client(url, roots=a_roots) as a:
                await until_allowed(a, shared, mine)
                async with http_client(url, roots=b_roots) as b:
                    # in a root of both: shared/deep only (not mine, not theirs)
                    text = await until_allowed(b, deep, not_=(shared, mine))
                    assert str(theirs) not in text
                # b ended: a's roots again
                await until_allowed(a, shared, mine)
            async with http_client(url) as c:  # declares no roots: no say
                text = await allowed(c)
                assert str(shared) in text and str(mine) in text

    anyio.run(main)


def test_roots_of_other_schemes_and_relative_paths_are_left_out() -> None:
    answer = types.ListRootsResult(
        roots=[
            types.Root(uri="file:///tmp/a%20b"),
            types.Root(uri="file://elsewhere/tmp"),
            types.Root.model_construct(uri="https://example.org/tmp"),  # the SDK refuses it
            types.Root(uri="file:///tmp/a%20b"),
        ]
    )
    assert paths_of(answer) == (Path("/tmp/a b").resolve(),)


def test_common_roots() -> None:
    a, b = Path("/r/a"), Path("/r/b")
    assert common([]) == ()
    assert common([[a, b]]) == (a, b)
    assert common([[Path("/r")], [a, Path("/s")]]) == (a,)
    assert common([[a], [b]]) == ()
    assert common([[Path("/r"), a], [a / "x", a]]) == (a,)


parts = st.lists(st.sampled_from("abc"), min_size=1, max_size=3)
paths = st.builds(lambda p: Path("/", *p), parts)


@given(st.lists(st.lists(paths, max_size=4), min_size=1, max_size=4))
def test_a_common_root_is_inside_a_root_of_every_list(declared: list[list[Path]]) -> None:
    shared = common(declared)
    for path in shared:
        assert all(any(path.is_relative_to(r) for r in roots) for roots in declared)
    # and nothing every list has is lost: each list's own roots inside all others are covered
    for roots in declared:
        for path in roots:
            if all(any(path.is_relative_to(r) for r in other) for other in declared):
                assert any(path.is_relative_to(s) for s in shared)
