"""Path ``prefix`` rules judge the path the file tools will touch (issue: prefix bypass).

A home with real directories and symbolic links; the built-in tools run for real, so
"denied" is checked against what is on disk afterwards, not against the predicate alone.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tooldeck import Protection, Session, ToolContext, TurnContext, validate_arguments
from tooldeck.builtin import load_builtin_registry
from tooldeck.policy import GrantStore, Policy, PolicyContext, SessionPolicy
from tooldeck.policy.rules import ArgPredicate, path_under
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.tools import Tool

REGISTRY = load_builtin_registry()


def make_home(root: Path) -> Path:
    """home/{secrets,docs}, docs/link -> ../secrets, docs/out -> outside, a dangling link."""
    home = root / "home"
    (home / "secrets").mkdir(parents=True, exist_ok=True)
    (home / "docs").mkdir(exist_ok=True)
    (home / "secrets" / "key.txt").write_text("s3cret\n")
    (root / "outside").mkdir(exist_ok=True)
    for link, target in (
        (home / "docs" / "link", Path("../secrets")),
        (home / "docs" / "out", root / "outside"),
        (home / "dangling", root / "outside" / "nothing"),
        (home / "to-key", Path("secrets/key.txt")),
    ):
        if not link.is_symlink():
            link.symlink_to(target)
    return home.resolve()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return make_home(tmp_path)


def write_policy(*extra: dict[str, Any]) -> Policy:
    return Policy.from_dict(
        {
            "profile": {
                "rules": [
                    {"tools": "write_file", "action": "allow"},
                    {
                        "tools": ["write_file", "read_document", "grep_files", "list_files"],
                        "action": "deny",
                        "args": {"path": {"prefix": "secrets/"}},
                        "reason": "secrets are off limits",
                    },
                    *extra,
                ]
            }
        }
    )


def run_writes(home: Path, policy: SessionPolicy, paths: list[str]) -> dict[str, str]:
    """The model writes each path; returns each call's output text by path."""
    calls = [call("write_file", {"path": p, "content": "PWNED"}) for p in paths]
    turn = TurnContext(session_id=policy.session_id, home=home)
    session = Session(
        ScriptedModel([reply(*calls), reply("done")]),
        REGISTRY.toolset(turn),
        session_id=policy.session_id,
        turn=turn,
        protect=Protection.policy(policy),
    )
    result = asyncio.run(session.run("go"))
    by_id = {o.call_id: o.text for o in result.tool_outputs}
    return {p: by_id[c.call_id] for p, c in zip(paths, calls, strict=True)}


def secrets_now(home: Path) -> list[str]:
    return sorted(str(p.relative_to(home)) for p in (home / "secrets").rglob("*"))


SPELLINGS = ["~/secrets/b", " secrets/c", "secrets/d ", "./secrets//e", "docs/../secrets/f"]


def test_spellings_of_a_denied_prefix_are_denied_without_a_home(home: Path) -> None:
    # the repro: the rule compared raw text, the tool strips and expands "~"
    outputs = run_writes(home, SessionPolicy(write_policy(), session_id="t"), SPELLINGS)
    assert secrets_now(home) == ["secrets/key.txt"]
    for path, text in outputs.items():
        assert text.startswith("Denied by policy: secrets are off limits"), (path, text)


def test_links_and_absolute_paths_into_a_denied_prefix_are_denied_with_the_home(
    home: Path,
) -> None:
    paths = [*SPELLINGS, str(home / "secrets" / "g"), "docs/link/h", "to-key", "docs/ok.txt"]
    policy = SessionPolicy(write_policy(), session_id="t", home=home)
    outputs = run_writes(home, policy, paths)
    assert secrets_now(home) == ["secrets/key.txt"]
    assert (home / "secrets" / "key.txt").read_text() == "s3cret\n"
    for path in paths[:-1]:
        assert outputs[path].startswith("Denied by policy"), (path, outputs[path])
    assert (home / "docs" / "ok.txt").read_text() == "PWNED"  # the rule is not a blanket deny


CASES: list[tuple[Any, str, bool | None]] = [
    ("secrets/a", "secrets/", True),
    ("~/secrets/a", "secrets/", True),
    ("  secrets/a\t", "secrets/", True),
    ("./secrets//a/", "secrets/", True),
    ("docs/../secrets/a", "secrets/", True),
    ("docs/link/a", "secrets/", True),  # a link inside the home into the prefix
    ("docs/link", "secrets/", True),
    ("to-key", "secrets/", True),
    ("secrets", "secrets/", True),
    ("secrets/", "secrets", True),
    ("secrets/*.txt", "secrets/", True),
    ("docs/a", "secrets/", False),
    ("docs", "secrets/", False),
    ("docs/*.md", "secrets/", False),
    ("secretsx/a", "secrets/", False),
    (".", "secrets/", None),  # contains the prefix: a listing or search reaches inside
    ("", "secrets/", None),
    ("~", "secrets/", None),
    ("*/key.txt", "secrets/", None),  # searched from the home
    ("../x", "secrets/", None),  # leaves the home
    ("/etc/passwd", "secrets/", None),
    ("docs/out/x", "secrets/", None),  # a link out of the home
    ("dangling", "secrets/", None),
    ("a\x00b", "secrets/", None),
    (5, "secrets/", None),
    ("secrets/a", "docs/link", True),  # the prefix itself through a link
    ("docs/a", ".", True),
    ("docs/a", "~/docs", True),
    ("SECRETS/a", "secrets/", None),  # a case-insensitive file system would find secrets
]


@pytest.mark.parametrize(("value", "prefix", "expected"), CASES)
def test_the_prefix_judges_the_path_the_tool_touches(
    home: Path, value: Any, prefix: str, expected: bool | None
) -> None:
    predicate = ArgPredicate("path", prefix=prefix)
    assert predicate.test({"path": value}, home) is expected
    if isinstance(value, str):
        assert path_under(value, prefix, home) is expected


def test_two_directories_that_differ_only_by_case_are_told_apart_when_both_exist(
    home: Path,
) -> None:
    (home / "SECRETS").mkdir()
    if (home / "SECRETS").samefile(home / "secrets"):
        pytest.skip("case-insensitive file system")
    assert path_under("SECRETS/a", "secrets", home) is False


TEXT_CASES: list[tuple[str, str, bool | None]] = [
    ("~/secrets/a", "secrets/", True),
    (" secrets/a", "secrets/", True),
    ("docs/../secrets/a", "secrets/", True),
    ("docs", "docs/", True),
    ("secrets/../docs/a", "secrets/", False),
    ("docs/a", "secrets/", False),
    ("/abs/secrets/a", "secrets/", None),  # absolute: only the home could tell
    ("../x", "secrets/", None),
    (".", "secrets/", None),
    ("Secrets/a", "secrets/", None),
    ("docs/a", "/abs", None),
]


@pytest.mark.parametrize(("value", "prefix", "expected"), TEXT_CASES)
def test_without_a_home_the_prefix_judges_the_text_the_tool_would_read(
    value: str, prefix: str, expected: bool | None
) -> None:
    assert path_under(value, prefix, None) is expected


def test_the_home_reaches_grants_and_sub_agents(home: Path) -> None:
    store = GrantStore()
    store.add("write_file", {"path": {"prefix": "docs"}})
    assert store.match("write_file", {"path": "docs/a"}, home) is not None
    assert store.match("write_file", {"path": "docs/link/a"}, home) is None  # lands in secrets
    policy = SessionPolicy(session_id="t", home=home, grants=store)
    assert policy.ctx.home == home and policy.child("helper").ctx.home == home
    write = REGISTRY.toolset(TurnContext(session_id="t", home=home))["write_file"]
    assert policy.decide(write, {"path": "docs/a", "content": ""}).action == "allow"
    assert policy.decide(write, {"path": "docs/link/a", "content": ""}).action == "ask"
    assert PolicyContext(home=home / "docs" / "..").home == home


# -- generated paths against the real tool -------------------------------------------------------
PARTS = ["secrets", "docs", "link", "out", "..", ".", "", "a", "SECRETS", "to-key", "*", "~"]
paths = st.tuples(
    st.sampled_from(["", " ", "~/", "/", "{home}/", "./"]),
    st.lists(st.sampled_from(PARTS), min_size=1, max_size=5),
    st.sampled_from(["", "/", " ", "\t"]),
)


def _write(home: Path, path: str) -> bool:
    turn = TurnContext(session_id="g", home=home)
    tool: Tool = REGISTRY.toolset(turn)["write_file"]
    params = validate_arguments(tool, json.dumps({"path": path, "content": "x"})).params
    ctx = ToolContext(call_id="c", tool_name="write_file", session_id="g", turn=turn)
    return not asyncio.run(tool.invoke(params, ctx)).is_error


def _snapshot(directory: Path) -> dict[Path, tuple[int, int, bytes]]:
    # inode, mtime and content: a write in the same timestamp tick still shows
    return {
        p: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes() if p.is_file() else b"")
        for p in directory.rglob("*")
    }


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(paths)
def test_no_write_the_prefix_does_not_cover_lands_in_it(
    tmp_path: Path, generated: tuple[str, list[str], str]
) -> None:
    home = make_home(Path(tempfile.mkdtemp(dir=tmp_path)))
    lead, parts, tail = generated
    value = lead.replace("{home}", str(home)) + "/".join(parts) + tail
    verdict = path_under(value, "secrets", home)
    before = _snapshot(home / "secrets")
    wrote = _write(home, value)
    after = _snapshot(home / "secrets")
    if verdict is False:
        assert after == before, value  # nothing created or changed under secrets/
    if verdict is True and wrote:
        assert after != before, value  # it did land there
    event(f"verdict {verdict}, {'written' if wrote else 'refused'}")
