"""MCP config parsing, ${VAR} expansion, name mapping and the annotation -> tier rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tooldeck.mcp import McpConfig, McpConfigError, ServerConfig, expand_vars, map_names, tier_for
from tooldeck.mcp.naming import exposed_name, namespace_name
from tooldeck.tools import TOOL_NAME_PATTERN


# -- ${VAR} expansion ----------------------------------------------------------------------------
def test_expand_vars() -> None:
    env = {"HOME": "/home/a", "EMPTY": ""}
    assert expand_vars("${HOME}/x", env) == "/home/a/x"
    assert expand_vars("${MISSING:-fallback}", env) == "fallback"
    assert expand_vars("${EMPTY:-fallback}", env) == "fallback"
    assert expand_vars("${HOME:-fallback}", env) == "/home/a"
    assert expand_vars("cost: $$5 and $HOME", env) == "cost: $5 and $HOME"
    with pytest.raises(KeyError):
        expand_vars("${MISSING}", env)


def test_config_stdio_and_http_with_expansion(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "files": {
                        "command": "${PY:-python3}",
                        "args": ["-m", "srv", "--root", "${ROOT}"],
                        "env": {"TOKEN": "${TOKEN}", "MODE": "${MODE:-fast}"},
                        "cwd": "work",
                        "timeout": 5,
                        "autostart": False,
                    },
                    "remote": {
                        "type": "http",
                        "url": "https://${HOST}/mcp",
                        "headers": {"Authorization": "Bearer ${TOKEN}"},
                        "trust_annotations": True,
                    },
                    "off": {"command": "nothing", "disabled": True},
                }
            }
        )
    )
    env = {"ROOT": "/data", "TOKEN": "t0k", "HOST": "example.test"}
    config = McpConfig.load(path, environ=env)
    assert config.names == ("files", "remote")
    files, remote = config["files"], config["remote"]
    assert files.transport == "stdio" and files.command == "python3"
    assert files.args == ("-m", "srv", "--root", "/data")
    assert dict(files.env) == {"TOKEN": "t0k", "MODE": "fast"}
    assert files.cwd == str((tmp_path / "work").resolve())  # relative to the config file
    assert files.timeout == 5 and files.autostart is False
    assert remote.transport == "http" and remote.url == "https://example.test/mcp"
    assert dict(remote.headers) == {"Authorization": "Bearer t0k"}
    assert remote.trust_annotations and remote.timeout == 60 and remote.tier == "WRITE"
    assert "Bearer" not in remote.describe()


def test_config_errors_name_the_server_and_field() -> None:
    data = {
        "mcpServers": {
            "a": {"command": "x", "env": {"KEY": "${NOPE}"}},
            "b": {"url": "ftp://nowhere"},
            "c": {},
            "d": {"command": "x", "url": "http://h/mcp"},
            "e": {"type": "sse", "url": "http://h/sse"},
            "f": {"command": "x", "timeout": -1, "tier": "ROOT", "autostart": "yes"},
            "g": {"command": "x", "colour": "red"},
            "h": "not an object",
        }
    }
    with pytest.raises(McpConfigError) as info:
        McpConfig.from_dict(data, environ={})
    problems = "\n".join(info.value.problems)
    assert "server 'a': env.KEY: environment variable NOPE is not set" in problems
    assert "server 'b': url must be an http:// or https:// URL" in problems
    assert "server 'c': needs a command (stdio server) or a url" in problems
    assert "server 'd': give either command (stdio) or url (http), not both" in problems
    assert "server 'e': type 'sse'" in problems
    assert "server 'f': timeout must be a positive number" in problems
    assert "server 'f': tier must be one of" in problems
    assert "server 'f': autostart must be true or false" in problems
    assert "server 'g': unknown key(s) 'colour'" in problems
    assert "server 'h': the entry must be an object" in problems
    with pytest.raises(McpConfigError, match="not valid JSON"):
        McpConfig.load(Path(__file__).parent / "mcp_servers" / "basic.py")
    with pytest.raises(McpConfigError, match="cannot read"):
        McpConfig.load("/nonexistent/mcp.json")


def test_bare_mapping_is_accepted() -> None:
    config = McpConfig.from_dict({"x": {"command": "run-x"}}, environ={})
    assert config["x"].command == "run-x"
    with pytest.raises(KeyError, match="configured: x"):
        config["y"]


# -- names ---------------------------------------------------------------------------------------
def test_names_are_provider_safe_and_stable() -> None:
    assert exposed_name("github", "create_issue") == "mcp__github__create_issue"
    assert exposed_name("my server", "do.it/now") == "mcp__my_server__do_it_now"
    long = exposed_name("srv", "t" * 120)
    assert len(long) == 64 and TOOL_NAME_PATTERN.fullmatch(long)
    assert long == exposed_name("srv", "t" * 120)  # stable across calls (and runs)
    assert long != exposed_name("srv", "t" * 121)
    assert TOOL_NAME_PATTERN.fullmatch(namespace_name("ü" * 80))


def test_collisions_resolved_deterministically_and_reported() -> None:
    tools = ["dotted.name", "dotted_name", "dotted name", "plain"]
    names, collisions = map_names("s", tools)
    again, _ = map_names("s", list(reversed(tools)))
    assert names == again  # independent of the listing order
    assert names["plain"] == "mcp__s__plain"
    assert names["dotted_name"] == "mcp__s__dotted_name"  # unchanged name keeps it
    assert names["dotted.name"].startswith("mcp__s__dotted_name_")
    assert len(set(names.values())) == 4
    assert all(TOOL_NAME_PATTERN.fullmatch(n) for n in names.values())
    assert len(collisions) == 1 and set(collisions[0].tools) == {
        "dotted.name",
        "dotted_name",
        "dotted name",
    }
    assert "collide on mcp__s__dotted_name" in collisions[0].describe()


# -- tiers ---------------------------------------------------------------------------------------
def _server(**options: object) -> ServerConfig:
    return ServerConfig.from_entry("s", {"command": "x", **options}, environ={})


@pytest.mark.parametrize(
    ("options", "hints", "expected"),
    [
        ({}, {}, ("WRITE", False, False)),
        ({}, {"readOnlyHint": True}, ("WRITE", True, False)),  # an untrusted hint
        ({"trust_annotations": True}, {"readOnlyHint": True}, ("STANDARD", True, False)),
        ({"trust_annotations": True}, {}, ("WRITE", False, False)),
        ({}, {"destructiveHint": True}, ("WRITE", False, True)),
        ({"destructive_is_dangerous": True}, {"destructiveHint": True}, ("DANGEROUS", False, True)),
        ({"destructive_is_dangerous": True}, {}, ("WRITE", False, False)),
        (
            {"destructive_is_dangerous": True},
            {"readOnlyHint": True, "destructiveHint": True},
            ("WRITE", True, False),
        ),
        (
            {"tier": "DANGEROUS", "trust_annotations": True},
            {"readOnlyHint": True},
            ("DANGEROUS", True, False),
        ),
        ({"tier": "STANDARD"}, {}, ("STANDARD", False, False)),
        (
            {"tier": "STANDARD", "destructive_is_dangerous": True},
            {"destructiveHint": True},
            ("DANGEROUS", False, True),
        ),
    ],
)
def test_annotations_raise_tiers_and_lower_only_when_trusted(
    options: dict[str, object], hints: dict[str, bool], expected: tuple[str, bool, bool]
) -> None:
    assert tier_for(_server(**options), hints) == expected


def test_servers_whose_namespaces_collide_are_refused_at_load() -> None:
    with pytest.raises(McpConfigError) as refused:
        McpConfig.from_dict({"my.server": {"command": "a"}, "my_server": {"command": "b"}})
    assert refused.value.problems == (
        "servers 'my.server' and 'my_server' both become 'my_server' in tool names; "
        "rename one of them",
    )
    # a config built in code is checked too (McpConfig itself, not only its parser)
    a, b = (ServerConfig.from_entry(n, {"command": "x"}, environ={}) for n in ("a b", "a_b"))
    with pytest.raises(McpConfigError, match="both become 'a_b'"):
        McpConfig((a, b))


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("docs__internal", "server 'docs__internal': a server name may not contain '__'"),
        ("docs. internal", "server 'docs. internal' (docs__internal in tool names): a server"),
        ("docs_", "server 'docs_': a server name may not end with '_'"),
        ("docs.", "server 'docs.' (docs_ in tool names): a server name may not end with '_'"),
    ],
)
def test_server_names_that_could_share_a_tool_name_are_refused(name: str, problem: str) -> None:
    with pytest.raises(McpConfigError) as refused:
        McpConfig.from_dict({name: {"command": "x"}, "other": {"url": "ftp://x"}})
    # reported with the entries' other problems, each one line
    assert len(refused.value.problems) == 2
    assert refused.value.problems[1].startswith(problem)


def test_long_server_names_keep_their_whole_prefix_in_every_tool_name() -> None:
    hostile = "k" * 49
    trusted = hostile + "_admin"
    assert namespace_name(hostile) != namespace_name(trusted)
    for server in (hostile, trusted, "_lead", "z" * 200):
        namespace = namespace_name(server)
        assert len(namespace) <= 40 and "__" not in namespace and not namespace.endswith("_")
        for tool in ("t", "t" * 120, "a.b" * 40):
            assert exposed_name(server, tool).startswith(f"mcp__{namespace}__")
    assert namespace_name("a" * 40) == "a" * 40
    cut = namespace_name("a" * 30 + "_" + "b" * 20)  # cut right after an "_"
    assert cut.startswith("a" * 30 + "_") and len(cut) == 39 and "__" not in cut
