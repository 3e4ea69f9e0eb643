"""The policy's ``uri`` test (tooldeck/policy/_uris.py): a resource URI against glob
patterns, spelt any way the same place can be spelt, and uncertain where a server could
read it as another place. Hypothesis for the parser; a real policy file for the rule."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tooldeck import Tool
from tooldeck.mcp.resource_tools import READ_SCHEMA
from tooldeck.policy import Policy, PolicyError, SessionPolicy
from tooldeck.policy._uris import normal_uri, uri_matches

SEGMENT = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zs")),
    min_size=1,
    max_size=12,
).filter(lambda s: s not in (".", "..") and not any(c in s for c in "/\\%?#"))


@given(st.lists(SEGMENT, min_size=1, max_size=5), st.booleans(), st.booleans())
def test_every_spelling_of_a_denied_uri_matches(
    segments: list[str], upper: bool, escaped: bool
) -> None:
    path = "/".join(quote(s, safe="") if escaped else s for s in segments)
    scheme, host = ("DEMO", "RESOURCE") if upper else ("demo", "resource")
    value = f"{scheme}://{host}/secret/{path}"
    assert uri_matches(value, ["demo://resource/secret/*"]) is True
    assert uri_matches(value, ["demo://resource/public/*"]) is False


@given(st.lists(SEGMENT, max_size=3), st.sampled_from(["..", ".", "", "%2e%2e", "%252e"]))
def test_a_uri_that_could_name_another_place_is_uncertain(segments: list[str], odd: str) -> None:
    value = "file:///srv/" + "/".join([*segments, odd, "etc", "passwd"])
    assert normal_uri(value) is None
    assert uri_matches(value, ["file:///etc/*"]) is None  # a deny rule matches it


@given(st.text(max_size=60))
def test_any_text_is_judged_without_error(value: str) -> None:
    assert uri_matches(value, ["demo://*", "file:///etc/*"]) in (True, False, None)


def test_a_policy_file_with_a_uri_rule(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(
        '[[profile.rules]]\ntools = "mcp__*__resources_read"\naction = "deny"\n'
        'args = { uri = { uri = ["file:///etc/*", "demo://resource/static/*"] } }\n'
    )
    policy = SessionPolicy(Policy.from_file(path))
    read = Tool.from_schema(
        READ_SCHEMA,
        lambda p, c: None,
        name="mcp__docs__resources_read",
        description="read",
        tier="STANDARD",
    )
    for uri, action in [
        ("file:///etc/passwd", "deny"),
        ("FILE:///etc/%70asswd", "deny"),
        ("file:///srv/../etc/passwd", "deny"),  # uncertain: a deny takes it
        ("demo://resource/static/document/x.md", "deny"),
        ("demo://resource/dynamic/text/1", "allow"),  # STANDARD, no rule: allowed
    ]:
        assert policy.decide(read, {"uri": uri}).action == action, uri
    path.write_text(
        '[[profile.rules]]\ntools = "*"\naction = "deny"\nargs = { uri = { uri = 3 } }\n'
    )
    with pytest.raises(PolicyError, match="'uri' must be a URI pattern or a list of them"):
        Policy.from_file(path)
