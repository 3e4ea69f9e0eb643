"""Hostile and broken config files: every loader gives its own documented error, no traceback.

Each loader (toolkit manifests, agent definitions, skills, MCP configs, definitions files,
policy files, search catalogs) is fed a deeply nested document, a file that is not UTF-8,
an oversized file and, where it reads YAML, alias and merge-key bombs and a self-reference.
The CLI commands that read those files must exit non-zero with a short message.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from tooldeck import _config_files
from tooldeck._config_files import (
    MAX_BYTES,
    MAX_DEPTH,
    ConfigFileError,
    parse_json,
    parse_jsonc,
    parse_toml,
    parse_yaml,
)
from tooldeck.agents.skills import SkillCatalog
from tooldeck.agents.toolkits import AgentDefinition, ToolkitError, ToolkitManifest, load_agents
from tooldeck.cli import app
from tooldeck.mcp import McpConfig, McpConfigError
from tooldeck.policy.chain import Policy, PolicyError
from tooldeck.registry import RegistryError, ToolRegistry
from tooldeck.search import load_definitions

DEEP = 100_000  # levels: far past Python's recursion limit
ARRAYS = "[" * DEEP + "]" * DEEP
NOT_UTF8 = b'name = "caf\xe9"\n'  # Latin-1, not UTF-8

LAUGHS = "\n".join(
    ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
)  # 9**10 values once the aliases are expanded, from 800 bytes
MERGES = "\n".join(
    ["m0: &m0 {k0: 0, k1: 1, k2: 2, k3: 3}"]
    + [f"m{i}: &m{i} {{<<: [*m{i - 1}, *m{i - 1}], x{i}: {i}}}" for i in range(1, 40)]
)  # the merge lists double at each level before the mapping is built
SELF = "a: &a [1, *a]"
# The document holds 9**10 values once expanded; the loaders refuse it whole. (With
# ``*a9`` here, str(description) ran out of memory on the old code; ``*a5``, 9**6
# values, keeps a run of these tests on the old code safe: it just loads.)
LAUGHING_AGENT = LAUGHS + "\nname: bomb\ndescription: *a5"


def front_matter(yaml_text: str) -> str:
    return f"---\n{yaml_text}\n---\nbody\n"


# -- the shared reader ---------------------------------------------------------------


def test_the_reader_refuses_deep_nesting_in_every_format() -> None:
    for parse, text in (
        (parse_json, ARRAYS),
        (parse_jsonc, "// deep\n" + ARRAYS),
        (parse_toml, f"a = {ARRAYS}"),
        (parse_toml, "a = " + "{b = " * 5_000 + "1" + "}" * 5_000),
        (parse_yaml, f"a: {ARRAYS}"),
        (parse_yaml, "a:\n" + "".join("  " * i + "- \n" for i in range(1, 2_000))),
    ):
        with pytest.raises(ConfigFileError, match="nested more than 100 levels"):
            parse(text)


@pytest.mark.parametrize("parse", [parse_json, parse_yaml])
def test_nesting_within_the_recursion_limit_is_still_capped(parse: Callable[[str], Any]) -> None:
    ok = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert parse(ok) is not None
    deep = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)
    with pytest.raises(ConfigFileError, match="nested more than"):
        parse(deep)


@pytest.mark.parametrize(
    "prefix",
    [
        "a: " + "[" * (MAX_DEPTH + 1),  # flow collections
        "a: " + "{b: " * (MAX_DEPTH + 1),
        "a:\n" + "".join("  " * i + "- \n" for i in range(1, MAX_DEPTH + 3)),  # block ones
    ],
)
def test_yaml_too_deep_is_refused_while_it_is_read_not_after(prefix: str) -> None:
    """The nesting is counted as the scanner reads, so a hostile file costs as much as
    its first 101 levels: what follows them (here text that is no YAML at all, in a
    real attack megabytes more brackets, which PyYAML reads in quadratic time) is never
    reached."""
    with pytest.raises(ConfigFileError, match="nested more than 100 levels"):
        parse_yaml(prefix + "\n\t@ `not yaml at all")


@pytest.mark.parametrize("bomb", [LAUGHS, MERGES])
def test_yaml_alias_bombs_are_refused_before_they_are_built(bomb: str) -> None:
    with pytest.raises(ConfigFileError, match="expands to more than 100,000 values"):
        parse_yaml(bomb)


def test_yaml_that_refers_to_itself_is_refused() -> None:
    with pytest.raises(ConfigFileError, match="refers to itself"):
        parse_yaml(SELF)


def test_aliases_within_the_limit_still_work() -> None:
    text = "base: &b {model: m, tools: [a, b]}\nfirst: *b\nsecond: {<<: *b, model: n}"
    assert parse_yaml(text) == {
        "base": {"model": "m", "tools": ["a", "b"]},
        "first": {"model": "m", "tools": ["a", "b"]},
        "second": {"model": "n", "tools": ["a", "b"]},
    }


def test_the_reader_names_the_bad_byte_and_refuses_large_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"a = 1\n" + NOT_UTF8)
    with pytest.raises(ConfigFileError) as exc:
        _config_files.load_toml(bad)
    assert exc.value.problem == (
        "not UTF-8 text (byte 0xe9 at line 2, column 12); save the file as UTF-8"
    )
    big = tmp_path / "big.json"
    with big.open("wb") as f:
        f.write(b"[")
        f.truncate(MAX_BYTES + 1)
    with pytest.raises(ConfigFileError, match="larger than 10 MB"):
        _config_files.load_json(big)


@pytest.mark.parametrize(
    ("parse", "text", "problem"),
    [
        (parse_json, '{"n": ' + "1" * 5_000 + "}", "a number in it has more than 4,300 digits"),
        (parse_toml, "n = " + "1" * 5_000, "a number in it has more than 4,300 digits"),
        (parse_yaml, "n: " + "1" * 5_000, "a number in it has more than 4,300 digits"),
        (parse_yaml, "when: 2020-02-30", "a value in it cannot be read (day is out of range"),
    ],
)
def test_a_value_the_parser_cannot_build_is_a_config_file_error(
    parse: Callable[[str], Any], text: str, problem: str
) -> None:
    with pytest.raises(ConfigFileError) as exc:
        parse(text)
    assert exc.value.problem.startswith(problem)


@given(st.text(max_size=200))
def test_every_parser_fails_only_with_config_file_error(text: str) -> None:
    for parse in (parse_json, parse_jsonc, parse_toml, parse_yaml):
        try:
            parse(text)
        except ConfigFileError as exc:
            assert "\n" not in exc.problem or parse is parse_toml
        except Exception:  # pragma: no cover - the point of the test
            pytest.fail(f"{parse.__name__}({text!r}) raised:\n{traceback.format_exc()}")


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.sampled_from('a/*,"\\\n} x]'), max_size=12)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
FILLER = st.sampled_from(
    ["", " ", "\n", "// a note, with } and ]\n", "/* c */", "/* two\nlines */"]
)


def _jsonc(data: st.DataObject, value: Any) -> str:
    """``value`` written as JSONC: comments and blank space between tokens, and maybe a
    trailing comma in each non-empty array and object."""
    gap = data.draw(FILLER)
    if isinstance(value, list | dict):
        items = (
            [_jsonc(data, v) for v in value]
            if isinstance(value, list)
            else [f"{json.dumps(k)}{data.draw(FILLER)}:{_jsonc(data, v)}" for k, v in value.items()]
        )
        trailing = "," if items and data.draw(st.booleans()) else ""
        body = ",".join(f"{data.draw(FILLER)}{item}" for item in items) + trailing
        open_, close = "[]" if isinstance(value, list) else "{}"
        return f"{gap}{open_}{body}{data.draw(FILLER)}{close}{gap}"
    return f"{gap}{json.dumps(value)}{gap}"


@given(JSON_VALUES, st.data())
def test_jsonc_is_json_with_comments_and_trailing_commas(value: Any, data: st.DataObject) -> None:
    assert parse_jsonc(_jsonc(data, value)) == value


def test_jsonc_problems_are_one_line_with_the_line() -> None:
    with pytest.raises(ConfigFileError, match="a /\\* comment opened on line 3 is never closed"):
        parse_jsonc('{\n "a": 1, // fine\n /* never closed\n}')
    with pytest.raises(ConfigFileError, match="line 4 column 1"):
        parse_jsonc('{\n /* a\n b */ "a": 1\n]')  # the comment's lines still count


# -- every loader --------------------------------------------------------------------

# (format, the hostile file's bytes, what the problem says)
HOSTILE = {
    "deep": ("nested more than 100 levels", None),
    "not-utf8": ("not UTF-8 text", NOT_UTF8),
    "huge": ("larger than 10 MB", None),
}


def hostile_file(tmp_path: Path, kind: str, fmt: str, name: str) -> Path:
    path = tmp_path / name
    if kind == "huge":
        with path.open("wb") as f:
            f.write(b"{" if fmt == "json" else b"#")
            f.truncate(MAX_BYTES + 1)
    elif kind == "not-utf8":
        body = {
            "json": b'{"name": "caf\xe9"}',
            "toml": NOT_UTF8,
            "md": b"---\nname: caf\xe9\n---\n",
        }[fmt]
        path.write_bytes(body)
    else:
        text = {
            "json": ARRAYS,
            "toml": f"a = {ARRAYS}",
            "md": front_matter(f"name: {ARRAYS}"),
        }[fmt]
        path.write_text(text)
    return path


KINDS = ["deep", "not-utf8", "huge"]


@pytest.mark.parametrize("kind", KINDS)
def test_toolkit_manifest(tmp_path: Path, kind: str) -> None:
    path = hostile_file(tmp_path, kind, "toml", "toolkits.toml")
    with pytest.raises(ToolkitError) as exc:
        ToolkitManifest.load(path)
    assert str(exc.value).startswith(f"{path}: ") and HOSTILE[kind][0] in str(exc.value)


@pytest.mark.parametrize("kind", [*KINDS, "laughs", "merges", "self"])
def test_agent_definition(tmp_path: Path, kind: str) -> None:
    bombs = {"laughs": LAUGHING_AGENT, "merges": MERGES, "self": SELF}
    if kind in bombs:
        path = tmp_path / "agent.md"
        path.write_text(front_matter(bombs[kind]))
        expected = "refers to itself" if kind == "self" else "expands to more than"
    else:
        path = hostile_file(tmp_path, kind, "md", "agent.md")
        expected = HOSTILE[kind][0]
    with pytest.raises(ToolkitError) as exc:
        AgentDefinition.load(path)
    assert str(exc.value).startswith(f"{path}: ") and expected in str(exc.value)
    agents, problems = load_agents(tmp_path)  # the directory loader lists it as a problem
    assert agents == {} and len(problems) == 1
    assert problems[0].startswith(f"{path}: ") and expected in problems[0]


@pytest.mark.parametrize("kind", [*KINDS, "laughs", "merges", "self"])
def test_skill(tmp_path: Path, kind: str) -> None:
    folder = tmp_path / "skills" / "s"
    folder.mkdir(parents=True)
    bombs = {"laughs": LAUGHING_AGENT, "merges": MERGES, "self": SELF}
    if kind in bombs:
        (folder / "SKILL.md").write_text(front_matter(bombs[kind]))
        expected = "refers to itself" if kind == "self" else "expands to more than"
    else:
        hostile_file(folder, kind, "md", "SKILL.md")
        expected = HOSTILE[kind][0]
    catalog, problems = SkillCatalog.load(tmp_path / "skills")
    assert catalog.skills == {} and len(problems) == 1
    assert problems[0].startswith(f"{folder / 'SKILL.md'}: ") and expected in problems[0]


def test_a_skill_whose_file_turns_bad_after_loading_is_an_error_result(tmp_path: Path) -> None:
    import asyncio

    from tooldeck import ToolContext

    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\nname: s\ndescription: d\n---\nbody\n")
    catalog, problems = SkillCatalog.load(tmp_path)
    assert problems == []
    (folder / "SKILL.md").write_bytes(b"---\nname: s\ndescription: d\n---\n\xff\n")
    tool = catalog.use_skill_tool()
    result = asyncio.run(tool.invoke(tool.params(name="s"), ToolContext()))  # type: ignore[misc]
    assert result.is_error and "not UTF-8 text" in result.text()


@pytest.mark.parametrize("kind", KINDS)
def test_mcp_config(tmp_path: Path, kind: str) -> None:
    path = hostile_file(tmp_path, kind, "json", "mcp.json")
    with pytest.raises(McpConfigError) as exc:
        McpConfig.load(path)
    assert exc.value.source == str(path) and HOSTILE[kind][0] in exc.value.problems[0]


@pytest.mark.parametrize("kind", KINDS)
def test_definitions_file(tmp_path: Path, kind: str) -> None:
    path = hostile_file(tmp_path, kind, "json", "definitions.json")
    with pytest.raises(RegistryError) as exc:
        ToolRegistry.load(path, [])
    assert exc.value.source == str(path) and HOSTILE[kind][0] in exc.value.problems[0]


@pytest.mark.parametrize("fmt", ["toml", "json"])
@pytest.mark.parametrize("kind", KINDS)
def test_policy_file(tmp_path: Path, kind: str, fmt: str) -> None:
    path = hostile_file(tmp_path, kind, fmt, f"policy.{fmt}")
    with pytest.raises(PolicyError) as exc:
        Policy.from_file(path)
    assert exc.value.source == str(path) and HOSTILE[kind][0] in exc.value.problems[0]


@pytest.mark.parametrize("kind", KINDS)
def test_search_catalog(tmp_path: Path, kind: str) -> None:
    path = hostile_file(tmp_path, kind, "json", "catalog.json")
    with pytest.raises(ValueError, match=HOSTILE[kind][0]):
        load_definitions(path)


# -- the CLI -------------------------------------------------------------------------

RUN = CliRunner()


def _commands(tmp_path: Path, kind: str) -> dict[str, list[str]]:
    toml = hostile_file(tmp_path, kind, "toml", "policy.toml")
    manifest = hostile_file(tmp_path, kind, "toml", "toolkits.toml")
    js = hostile_file(tmp_path, kind, "json", "file.json")
    agents = tmp_path / "agents"
    agents.mkdir()
    hostile_file(agents, kind, "md", "agent.md")
    return {
        "policy check": ["policy", "check", str(toml)],
        "policy explain": ["policy", "explain", "read_document", "-p", str(toml)],
        "toolkits list": ["toolkits", "list", "-m", str(manifest)],
        "agents check": ["agents", "check", str(agents)],
        "mcp list": ["mcp", "list", str(js)],
        "tools check": ["tools", "check", str(js)],
        "tools list": ["tools", "list", "-d", str(js)],
        "search": ["search", "anything", "--catalog", str(js)],
    }


@pytest.mark.parametrize("kind", KINDS)
def test_cli_commands_fail_with_a_short_message_and_no_traceback(tmp_path: Path, kind: str) -> None:
    for name, args in _commands(tmp_path, kind).items():
        result = RUN.invoke(app, args, env={"COLUMNS": "200"})
        assert result.exit_code != 0, name
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            name,
            result.exception,
        )
        assert "Traceback" not in result.output, name
        assert HOSTILE[kind][0] in result.output, (name, result.output)
        lines = [line for line in result.output.splitlines() if line.strip()]
        problem_lines = [line for line in lines if HOSTILE[kind][0] in line]
        assert len(problem_lines) == 1, (name, result.output)


def test_the_real_cli_process_prints_no_traceback(tmp_path: Path) -> None:
    import subprocess

    path = hostile_file(tmp_path, "deep", "toml", "policy.toml")
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from tooldeck.cli import main; main()",
            "policy",
            "check",
            str(path),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr + done.stdout
    assert f"{path}: 1 problem(s)" in done.stdout
    assert "nested more than 100 levels deep" in done.stdout


def test_good_files_still_load(tmp_path: Path) -> None:
    (tmp_path / "policy.toml").write_text(
        '[[profile.rules]]\ntools = "run_bash"\naction = "deny"\n'
    )
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {}}))
    assert len(Policy.from_file(tmp_path / "policy.toml").profile.rules) == 1
    assert McpConfig.load(tmp_path / "mcp.json").servers == ()
