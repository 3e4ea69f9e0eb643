"""``run``, ``run_sync``, ``stream`` and ``Session`` take typed keywords (issue 32, item 3).

A misspelt keyword (``aprove="WRITE"``) is a mypy error naming it, checked by running the
real mypy (``mypy.api.run``, the project's strict settings) on a user's file; at run time
it is a ``TypeError`` naming it, raised before any model is asked. The three one-turn
functions take the same keywords, with the same defaults, as the Session fields they set.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
from mypy import api as mypy_api
from pydantic import BaseModel

import tooldeck
from tooldeck import ModelSettings, Session, tool
from tooldeck.events import TurnStarted
from tooldeck.testing import ScriptedModel, call, reply

ROOT = Path(__file__).resolve().parents[1]
ENTRY_POINTS = {"run": tooldeck.run, "run_sync": tooldeck.run_sync, "stream": tooldeck.stream}


@tool(read_only=True)
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


def _mypy(tmp_path: Path, source: str) -> list[str]:
    """mypy's error lines for ``source``, checked as a user's file with the project's
    settings (strict) and cache."""
    user = tmp_path / "user_code.py"
    user.write_text(textwrap.dedent(source), encoding="utf-8")
    out, err, status = mypy_api.run(
        [
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            "--no-error-summary",
            "--show-absolute-path",
            str(user),
        ]
    )
    assert status in (0, 1), f"mypy did not run ({status}):\n{out}\n{err}"
    return [line for line in out.splitlines() if line.startswith(f"{user}:") and ": error:" in line]


@pytest.mark.xdist_group("mypy")  # with the docs blocks: tests/test_docs_blocks.py
def test_mypy_names_a_misspelt_keyword(tmp_path: Path) -> None:
    errors = _mypy(
        tmp_path,
        """
        import tooldeck
        from tooldeck.testing import ScriptedModel, reply

        async def main() -> None:
            model = ScriptedModel([reply("hi")])
            await tooldeck.run(model, [], "hi", aprove="WRITE")
            async for _ in tooldeck.stream(model, [], "hi", max_step=3):
                pass
            tooldeck.Session(model, [], instructons="be brief")

        model = ScriptedModel([reply("hi")])
        tooldeck.run_sync(model, [], "hi", output_typ=dict)
        tooldeck.run_sync(model, [], "hi", max_steps="3")
        """,
    )
    text = "\n".join(errors)
    for line, bad, where in [
        (7, "aprove", "run"),
        (8, "max_step", "stream"),
        (10, "instructons", "Session"),
        (13, "output_typ", "run_sync"),
    ]:
        found = [e for e in errors if f":{line}:" in e]
        assert found, f"no error on line {line} ({bad}):\n{text}"
        assert re.search(rf'Unexpected keyword argument "{bad}" for "{where}"', found[0]), text
    wrong_type = [e for e in errors if ":14:" in e]
    assert wrong_type and '"max_steps"' in wrong_type[0] and '"int"' in wrong_type[0], text
    assert len(errors) == 5, text


@pytest.mark.xdist_group("mypy")  # with the docs blocks: tests/test_docs_blocks.py
def test_mypy_accepts_the_documented_keywords(tmp_path: Path) -> None:
    errors = _mypy(
        tmp_path,
        """
        from dataclasses import dataclass
        import tooldeck
        from tooldeck import AbortSignal, ApprovalRequest, EventBus, ModelSettings
        from tooldeck.testing import ScriptedModel, reply

        @dataclass
        class Answer:
            text: str

        def ask(request: ApprovalRequest) -> bool:
            return request.tool.name != "wipe"

        model = ScriptedModel([reply("hi")])
        tooldeck.run_sync(
            model, [], "hi",
            instructions="be brief", settings=ModelSettings(), output_type=Answer,
            output_retries=1, max_steps=3, timeout=None, result_hooks=(), guard=False,
            protect=tooldeck.Protection.ask(("WRITE", "shout"), approver=ask),
            signal=AbortSignal(), turn=None, events=EventBus(), session_id="s1",
            transcript=[], pending_store=None, notices=None,
            continue_on_max_tokens=None, owns_model=False,
        )
        protect = tooldeck.Protection.ask(ask) & tooldeck.Protection.none()
        tooldeck.run_sync(model, [], "hi", output_type={"type": "object"}, protect=protect)
        """,
    )
    assert errors == []


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_a_misspelt_keyword_is_a_type_error_naming_it(name: str) -> None:
    model = ScriptedModel([reply("never asked")])
    with pytest.raises(TypeError, match="unexpected keyword argument 'aprove'"):
        ENTRY_POINTS[name](model, [shout], "hi", aprove="WRITE")
    assert model.requests == []  # raised before any request


def test_session_refuses_a_misspelt_keyword_and_positional_options() -> None:
    model = ScriptedModel([reply("never asked")])
    with pytest.raises(TypeError, match="unexpected keyword argument 'aprove'"):
        Session(model, [shout], aprove="WRITE")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="positional"):
        Session(model, [shout], "session-id")  # type: ignore[misc]


def _keywords(fn: Any) -> dict[str, inspect.Parameter]:
    parameters = inspect.signature(fn).parameters
    assert not any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    return {n: p for n, p in parameters.items() if p.kind is p.KEYWORD_ONLY}


def test_the_three_take_the_same_keywords_as_the_session_fields() -> None:
    run_keywords = _keywords(tooldeck.run)
    for fn in (tooldeck.run_sync, tooldeck.stream):
        other = _keywords(fn)
        assert list(other) == list(run_keywords)
        for name, parameter in other.items():
            assert parameter.default == run_keywords[name].default, name
            assert parameter.annotation == run_keywords[name].annotation, name
    fields = {f.name: f for f in dataclasses.fields(Session) if f.init}
    # what a fresh session of one turn cannot use: the usage so far, a step already waiting
    assert set(fields) - set(run_keywords) == {"model", "tools", "usage", "pending"}
    assert set(run_keywords) - set(fields) == {"signal", "output_type", "output_retries"}
    for name, parameter in run_keywords.items():
        field = fields.get(name)
        if field is None or field.default is dataclasses.MISSING:
            continue
        assert parameter.default == field.default, name
        assert field.kw_only, f"Session field {name} can be given by position"


def test_the_keywords_reach_the_session() -> None:
    seen: list[Any] = []
    events = tooldeck.EventBus()
    events.subscribe(seen.append)
    earlier: list[Any] = []
    model = ScriptedModel(
        [reply(call("shout", {"text": "hi"})), reply(call("shout", {"text": "again"}))]
    )
    result = tooldeck.run_sync(
        model,
        [shout],
        "shout twice",
        max_steps=1,
        session_id="given-id",
        events=events,
        transcript=earlier,
        instructions="be loud",
    )
    assert result.reason == "max_steps (1) reached"
    assert [e.session_id for e in seen if isinstance(e, TurnStarted)] == ["given-id"]
    assert earlier[0].content == "shout twice" and earlier == result.items
    assert model.requests[0].instructions == "be loud"


class Weather(BaseModel):
    city: str


def test_output_retries_alone_keeps_the_output_type_of_the_settings() -> None:
    model = ScriptedModel([reply("not json"), reply('{"city": "Paris"}')])
    result = asyncio.run(
        tooldeck.run(
            model,
            [],
            "weather?",
            settings=ModelSettings(output_type=Weather, output_retries=0),
            output_retries=1,
        )
    )
    assert result.structured == Weather(city="Paris")
    assert model.requests[-1].settings.output_retries == 1
