"""``tooldeck serve --import CLIENT``: the MCP servers a client already has, behind the gateway.

Each client's config is written where that client keeps it (under a fake HOME, Linux and
macOS places; the project's files in the folder the command runs in), in the shape its
documentation shows, then imported through the real CLI. The gateway's config it writes
loads with tooldeck's own loader; the entry it prints is in the client's format and starts
the gateway. The round trip starts the gateway exactly as the printed entry says, with a
real upstream server, and calls a tool through it with the official SDK client. Hostile or
broken client files (huge, not UTF-8, not JSON, the wrong shape) are one line, exit 2,
and nothing is written.
"""

from __future__ import annotations

import json
import sys
import typing
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.client.stdio import get_default_environment
from typer.testing import CliRunner

from gateway_client import (
    APPROVE,
    PY,
    SERVERS,
    Answers,
    search_then_call,
    started_as_entry,
    text_of,
)
from test_config_files import NOT_UTF8, hostile_file
from tooldeck.cli import app
from tooldeck.cli.serve import Clients
from tooldeck.gateway.importer import CLIENTS, NAME
from tooldeck.mcp import McpConfig

TIME = {"command": "uvx", "args": ["mcp-server-time", "--local-timezone", "UTC"]}
MAC = Path("Library/Application Support")


@pytest.fixture
def where(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(HOME, the project folder the command runs in), both empty."""
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    monkeypatch.chdir(project)
    return home, project


def _import(home: Path, *args: str) -> Any:
    env = {"HOME": str(home), "XDG_CONFIG_HOME": None}
    return CliRunner().invoke(app, ["serve", "--import", *args], env=env)


def _write(path: Path, text: str | dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text if isinstance(text, str) else json.dumps(text))


# (client, {file under HOME or ./ (project): its text}, the servers the gateway gets
# {name: what McpConfig makes of it}, the servers left in the client, the variables the
# client's entry passes to the gateway {name: the client's value})
CASES: list[tuple[str, dict[str, Any], dict[str, str], set[str], dict[str, str]]] = [
    (
        "claude-desktop",
        {
            f"~/{MAC}/Claude/claude_desktop_config.json": {
                "mcpServers": {
                    "time": TIME,
                    "price": {"command": "echo", "args": ["costs $5", "${NOT_A_VARIABLE}"]},
                }
            }
        },
        {
            "time": "stdio uvx mcp-server-time --local-timezone UTC",
            "price": "stdio echo costs $5 ${NOT_A_VARIABLE}",
        },
        set(),
        {},
    ),
    (
        "claude-code",
        {
            "~/.claude.json": {
                "numStartups": 3,
                "mcpServers": {"time": TIME},
                "projects": {"<project>": {"mcpServers": {"local-only": {"command": "local"}}}},
            },
            "./.mcp.json": {
                "mcpServers": {
                    "api": {
                        "type": "http",
                        "url": "${API_BASE:-https://api.example.com}/mcp",
                        "headers": {"Authorization": "Bearer ${API_KEY}"},
                    },
                    "old": {"type": "sse", "url": "https://old.example.com/sse"},
                }
            },
        },
        {
            "time": "stdio uvx mcp-server-time --local-timezone UTC",
            "local-only": "stdio local",
            "api": "http https://api.example.com/mcp",
        },
        {"old"},
        {"API_BASE": "${API_BASE:-}", "API_KEY": "${API_KEY}"},
    ),
    (
        "cursor",
        {
            "~/.cursor/mcp.json": {
                "mcpServers": {
                    "time": TIME,
                    "files": {
                        "command": "npx",
                        "args": ["-y", "server-filesystem", "${userHome}/notes"],
                        "env": {"TOKEN": "${env:FILES_TOKEN}"},
                    },
                    "everywhere": {"command": "x", "args": ["${workspaceFolder}"]},
                }
            },
            "./.cursor/mcp.json": {
                "mcpServers": {
                    "here": {"command": "lint-server", "args": ["${workspaceFolder}/src"]},
                    "secrets": {"command": "y", "envFile": "${workspaceFolder}/.env"},
                }
            },
        },
        {
            "time": "stdio uvx mcp-server-time --local-timezone UTC",
            "files": "stdio npx -y server-filesystem <home>/notes",
            "here": "stdio lint-server <project>/src",
        },
        {"everywhere", "secrets"},
        {"FILES_TOKEN": "${env:FILES_TOKEN}"},
    ),
    (
        "vscode",
        {
            "~/.config/Code/User/mcp.json": (
                "// my servers\n"
                '{"servers": {"time": {"type": "stdio", "command": "uvx",'
                ' "args": ["mcp-server-time", "--local-timezone", "UTC"],},'
                ' /* remote */ "github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/",'
                ' "headers": {"Authorization": "Bearer ${input:github-token}"}}},'
                ' "inputs": [{"type": "promptString", "id": "github-token",'
                ' "description": "GitHub PAT", "password": true}],}'
            ),
            "./.vscode/mcp.json": {
                "servers": {"here": {"command": "srv", "args": ["${workspaceFolder}"], "dev": {}}}
            },
        },
        {
            "time": "stdio uvx mcp-server-time --local-timezone UTC",
            "github": "http https://api.githubcopilot.com/mcp/",
            "here": "stdio srv <project>",
        },
        set(),
        {"GITHUB_TOKEN": "${input:github-token}"},
    ),
    (
        "windsurf",
        {
            "~/.codeium/windsurf/mcp_config.json": {
                "mcpServers": {
                    "time": {**TIME, "disabledTools": ["convert_time"]},
                    "remote": {
                        "serverUrl": "https://remote.example.com/mcp",
                        "headers": {"Authorization": "Bearer ${env:AUTH_TOKEN}"},
                    },
                    "off": {"command": "z", "disabled": True},
                    "filed": {"command": "w", "env": {"K": "${file:/run/secret}"}},
                }
            }
        },
        {
            "time": "stdio uvx mcp-server-time --local-timezone UTC",
            "remote": "http https://remote.example.com/mcp",
        },
        {"off", "filed"},
        {"AUTH_TOKEN": "${env:AUTH_TOKEN}"},
    ),
    (
        "zed",
        {
            "~/.config/zed/settings.json": (
                "// Zed settings\n{\n"
                '  "theme": "One Dark", // the look\n'
                '  "context_servers": {\n'
                '    "time": {"source": "custom", "command": "uvx", "env": {},\n'
                '             "args": ["mcp-server-time", "--local-timezone", "UTC"],},\n'
                '    "github": {"source": "extension", "settings": {"token": "x"}},\n'
                '    "remote": {"url": "https://r.example.com/mcp", "headers": {"X": "1"},'
                ' "timeout": 30},\n'
                '    "node": {"command": {"path": "/usr/bin/node", "args": ["s.js"]}},\n'
                "  },\n}\n"
            ),
        },
        {
            "time": "stdio uvx mcp-server-time --local-timezone UTC",
            "remote": "http https://r.example.com/mcp",
            "node": "stdio /usr/bin/node s.js",
        },
        {"github"},
        {},
    ),
]


def _place(home: Path, project: Path, files: dict[str, Any]) -> None:
    for where, content in files.items():
        text = content if isinstance(content, str) else json.dumps(content)
        path = home / where[2:] if where.startswith("~/") else project / where[2:]
        _write(path, text.replace("<project>", str(project)))


@pytest.mark.parametrize(
    ("client", "files", "expected", "left", "needs"), CASES, ids=[c[0] for c in CASES]
)
def test_each_clients_documented_format(
    where: tuple[Path, Path],
    client: str,
    files: dict[str, Any],
    expected: dict[str, str],
    left: set[str],
    needs: dict[str, str],
) -> None:
    home, project = where
    _place(home, project, files)
    target = home / "gw" / "mcp.json"
    result = _import(home, client, "--mcp", str(target))
    assert result.exit_code == 0, result.output
    # the written config loads with tooldeck's loader, each server as the client had it
    required = {n: "set" for n, v in needs.items() if not v.endswith(":-}")}  # others: defaults
    environ = {"HOME": str(home), **required}
    config = McpConfig.load(target, environ=environ)
    described = {s.name: s.describe() for s in config.servers}
    placeholders = {"<home>": str(home), "<project>": str(project)}
    for name, want in expected.items():
        for mark, value in placeholders.items():
            want = want.replace(mark, value)
        assert described.pop(name) == want, (name, result.stderr)
    assert described == {}
    for name in left:
        assert f"Left in {CLIENTS[client].name}: {name} (" in result.stderr
    # the entry, in the client's own format, starts this gateway on that config
    entry = json.loads(result.stdout)
    key = {"vscode": "servers", "zed": "context_servers"}.get(client, "mcpServers")
    server = entry[key]["tooldeck"]
    assert server["command"] == sys.executable  # the test runs the CLI in-process
    assert server["args"] == ["-m", "tooldeck.cli", "serve", "--mcp", str(target)]
    assert server.get("env", {}) == needs
    if client == "vscode":
        assert server["type"] == "stdio"
        assert entry["inputs"] == [
            {
                "type": "promptString",
                "id": "github-token",
                "description": "GitHub PAT",
                "password": True,
            }
        ]


def test_claude_code_scopes_win_as_in_claude_code(where: tuple[Path, Path]) -> None:
    """local (~/.claude.json, this project) over project (.mcp.json) over user."""
    home, project = where
    _write(
        home / ".claude.json",
        {
            "mcpServers": {"time": {"command": "user-time"}, "only-user": {"command": "u"}},
            "projects": {
                str(project): {"mcpServers": {"time": {"command": "local-time"}}},
                "/elsewhere": {"mcpServers": {"other": {"command": "not-here"}}},
            },
        },
    )
    _write(project / ".mcp.json", {"mcpServers": {"time": {"command": "project-time"}}})
    result = _import(home, "claude-code", "--mcp", str(home / "out.json"))
    assert result.exit_code == 0, result.output
    servers = json.loads((home / "out.json").read_text())["mcpServers"]
    assert servers == {"time": {"command": "local-time"}, "only-user": {"command": "u"}}
    assert "time: the one of" in result.stderr and "(local scope) wins" in result.stderr


def test_a_claude_json_past_10_mb_of_history_is_still_read(where: tuple[Path, Path]) -> None:
    home, _ = where
    history = [{"display": "x" * 1000}] * 11_000  # Claude Code keeps each project's prompts
    _write(home / ".claude.json", {"mcpServers": {"time": TIME}, "history": history})
    assert (home / ".claude.json").stat().st_size > 10 * 1024 * 1024
    result = _import(home, "claude-code", "--mcp", str(home / "out.json"))
    assert result.exit_code == 0, result.output


def test_the_gateway_itself_is_not_imported(where: tuple[Path, Path]) -> None:
    home, _ = where
    gateway = {"command": "/home/me/.local/bin/tooldeck", "args": ["serve", "--mcp", "x.json"]}
    _write(home / ".cursor" / "mcp.json", {"mcpServers": {"tooldeck": gateway, "time": TIME}})
    result = _import(home, "cursor", "--mcp", str(home / "out.json"))
    assert result.exit_code == 0, result.output
    assert list(json.loads((home / "out.json").read_text())["mcpServers"]) == ["time"]
    assert "tooldeck (" in result.stderr and "the gateway itself" in result.stderr


def test_an_existing_config_is_never_overwritten_without_force(where: tuple[Path, Path]) -> None:
    home, _ = where
    _write(home / ".cursor" / "mcp.json", {"mcpServers": {"time": TIME}})
    default = home / ".config" / "tooldeck" / "mcp.json"  # where it goes without --mcp
    assert _import(home, "cursor").exit_code == 0
    assert "time" in json.loads(default.read_text())["mcpServers"]
    default.write_text('{"mcpServers": {"mine": {"command": "keep-me"}}}')
    again = _import(home, "cursor")
    assert again.exit_code == 2 and len(again.stderr.strip().splitlines()) == 1
    assert "exists; give --force" in again.stderr and again.stdout == ""
    assert "keep-me" in default.read_text()
    forced = _import(home, "cursor", "--force")
    assert forced.exit_code == 0 and "keep-me" not in default.read_text()


def test_the_macos_and_xdg_places(where: tuple[Path, Path]) -> None:
    home, _ = where
    _write(home / MAC / "Code" / "User" / "mcp.json", {"servers": {"time": TIME}})
    assert _import(home, "vscode", "--mcp", str(home / "a.json")).exit_code == 0
    assert list(json.loads((home / "a.json").read_text())["mcpServers"]) == ["time"]
    xdg = home / "xdg"
    _write(xdg / "zed" / "settings.json", {"context_servers": {"time": TIME}})
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(xdg)}
    result = CliRunner().invoke(app, ["serve", "--import", "zed"], env=env)
    assert result.exit_code == 0, result.output
    assert "time" in json.loads((xdg / "tooldeck" / "mcp.json").read_text())["mcpServers"]


def test_import_from_a_file_elsewhere(where: tuple[Path, Path]) -> None:
    home, _ = where
    odd = home / "Code - Insiders" / "settings.json"  # VS Code's older home: settings "mcp"
    _write(odd, '{"editor.fontSize": 13, "mcp": {"servers": {"time": ' + json.dumps(TIME) + "}}}")
    result = _import(home, "vscode", "--import-from", str(odd), "--mcp", str(home / "o.json"))
    assert result.exit_code == 0, result.output
    assert list(json.loads((home / "o.json").read_text())["mcpServers"]) == ["time"]


def _one_line(result: Any) -> str:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output and result.stdout == ""
    return lines[0]


@pytest.mark.parametrize("kind", ["deep", "not-utf8", "huge"])
def test_hostile_client_files_are_one_line_and_nothing_is_written(
    where: tuple[Path, Path], kind: str
) -> None:
    home, _ = where
    (home / ".cursor").mkdir()
    hostile_file(home / ".cursor", kind, "json", "mcp.json")
    line = _one_line(_import(home, "cursor", "--mcp", str(home / "out.json")))
    assert str(home / ".cursor" / "mcp.json") in line
    assert not (home / "out.json").exists()
    if kind == "not-utf8":
        assert "not UTF-8" in line and NOT_UTF8  # the bytes the reader names


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"mcpServers": {"time": {"command": "uvx",}', "not valid JSON"),  # cut short
        ("/* never closed", "never closed"),
        ('["a list"]', "not a JSON object"),
        ('{"mcpServers": ["a list"]}', "mcpServers is not an object"),
        ('{"mcpServers": {}}', "it has no MCP servers"),
        ('{"mcpServers": {"old": {"url": "https://x/sse", "type": "sse"}}}', "uses SSE"),
        ('{"mcpServers": {"bad": {"command": 3}}}', "command must be a string"),
    ],
)
def test_odd_client_files_are_one_line(where: tuple[Path, Path], text: str, says: str) -> None:
    home, _ = where
    _write(home / ".cursor" / "mcp.json", text)
    line = _one_line(_import(home, "cursor", "--mcp", str(home / "out.json")))
    assert says in line, line
    assert not (home / "out.json").exists()


def test_no_config_and_wrong_options_are_one_line(where: tuple[Path, Path]) -> None:
    home, _ = where
    nothing = _one_line(_import(home, "windsurf"))
    assert "no Windsurf config found" in nothing and ".codeium/windsurf/mcp_config.json" in nothing
    unknown = CliRunner().invoke(app, ["serve", "--import", "emacs"])
    assert unknown.exit_code == 2 and "emacs" in unknown.stderr
    stray = _one_line(CliRunner().invoke(app, ["serve", "--import-from", "x.json"]))
    assert "go with --import CLIENT" in stray
    (home / "folder.json").mkdir()
    _write(home / ".cursor" / "mcp.json", {"mcpServers": {"time": TIME}})
    folder = _one_line(_import(home, "cursor", "--mcp", str(home / "folder.json")))
    assert "is a folder" in folder


LITERAL = st.text(max_size=12).filter(lambda t: "${" not in t)
VARIABLE = st.from_regex(NAME, fullmatch=True).filter(lambda n: n != "HOME")


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.tuples(LITERAL, st.none() | VARIABLE), min_size=1, max_size=4),
    st.text(max_size=8),
)
def test_an_argument_means_through_the_gateway_what_it_meant_in_the_client(
    parts: list[tuple[str, str | None]], value: str
) -> None:
    """A Cursor argument of literal text (``$`` included) and ``${env:NAME}`` variables is,
    once imported and loaded by tooldeck (the variables set to ``value``), exactly what
    Cursor would have run; and the entry passes each variable to the gateway."""
    import tempfile

    arg = "".join(text + (f"${{env:{name}}}" if name else "") for text, name in parts)
    want = "".join(text + (value if name else "") for text, name in parts)
    names = {name for _, name in parts if name}
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        _write(
            home / ".cursor" / "mcp.json", {"mcpServers": {"s": {"command": "x", "args": [arg]}}}
        )
        result = _import(home, "cursor", "--mcp", str(home / "out.json"))
        assert result.exit_code == 0, result.output
        config = McpConfig.load(home / "out.json", environ=dict.fromkeys(names, value))
        assert config["s"].args == (want,)
        env = json.loads(result.stdout)["mcpServers"]["tooldeck"].get("env", {})
        assert env == {name: f"${{env:{name}}}" for name in names}


def test_the_cli_choices_are_the_importers_clients() -> None:
    assert set(typing.get_args(Clients)) == set(CLIENTS)


def test_round_trip_the_printed_entry_starts_the_gateway(where: tuple[Path, Path]) -> None:
    """Claude Desktop's servers (the real time server from PyPI, and a test server) are
    imported; the gateway is started exactly as the printed entry says, and an SDK client
    lists, searches and calls a tool of each through it."""
    home, _ = where
    time_server = {"command": PY, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}
    basic = {"command": PY, "args": [str(SERVERS / "basic.py"), "stdio"]}
    _write(
        home / ".config" / "Claude" / "claude_desktop_config.json",  # the Linux place
        {"mcpServers": {"time": time_server, "alpha": basic}},
    )
    result = _import(home, "claude-desktop")
    assert result.exit_code == 0, result.output
    server = json.loads(result.stdout)["mcpServers"]["tooldeck"]
    env = {**get_default_environment(), "HOME": str(home)}  # its state goes there
    approve = Answers(APPROVE, APPROVE)

    async def main() -> None:
        async with started_as_entry(server, env, "--lexical", elicit=approve) as client:
            now = await search_then_call(
                client,
                "current time in a timezone",
                "get_current_time",
                {"timezone": "Europe/Paris"},
            )
            assert "Europe/Paris" in now
            added = await client.call_tool(
                "call_tool", {"name": "alpha__add", "arguments": {"a": 2, "b": 3}}
            )
            assert not added.is_error and "5" in text_of(added)

    anyio.run(main)
    assert len(approve.asked) == 2  # WRITE by default: each asked, then run
    assert (home / ".tooldeck" / "gateway").is_dir()


def test_secrets_go_only_to_the_written_config_which_only_its_owner_can_read(
    where: tuple[Path, Path],
) -> None:
    """A client's literal secrets (an env value, a header, an OAuth client secret) are
    copied to the gateway's config, a file of mode 0600 (also when it replaces one with
    --force), and are never printed: not in what was imported, left out or noted, nor in
    the client's entry."""
    home, _ = where
    secrets = ["sk-env-secret-1", "Bearer hdr-secret-2", "oauth-secret-3", "sse-secret-4"]
    servers = {
        "local": {"command": "x", "env": {"API_KEY": secrets[0]}},
        "remote": {"type": "http", "url": "https://mcp.example", "headers": {"X-Key": secrets[1]}},
        "signed": {
            "type": "http",
            "url": "https://auth.example/mcp",
            "oauth": {"clientId": "me", "clientSecret": secrets[2]},
        },
        "old": {"type": "sse", "url": f"https://sse.example/?key={secrets[3]}"},
        "odd": {"command": "y", "env": {"K": secrets[0]}, "surprise": secrets[1]},
    }
    _write(home / ".cursor" / "mcp.json", {"mcpServers": servers})
    out = home / "gateway" / "mcp.json"
    for force in ((), ("--force",)):
        result = _import(home, "cursor", "--mcp", str(out), *force)
        assert result.exit_code == 0, result.output
        assert out.stat().st_mode & 0o777 == 0o600
        printed = result.stdout + result.stderr
        assert "Left in Cursor: old" in printed and "Note: odd: surprise" in printed
        assert not [s for s in secrets if s.split()[-1] in printed], printed
    written = json.loads(out.read_text())["mcpServers"]
    assert written["local"]["env"] == {"API_KEY": secrets[0]}
    assert written["remote"]["headers"] == {"X-Key": secrets[1]}
    assert written["signed"]["oauth"]["client_secret"] == secrets[2]
