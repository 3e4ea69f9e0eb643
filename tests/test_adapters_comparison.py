"""docs/comparison.md, section 5: the adapter snippets run as written, each framework's
model string replaced by an offline model (pydantic-ai's ``TestModel``; for openai-agents
the scripted model of ``tests/test_adapters_openai_agents.py``), the console approval
answered ``y`` and then ``n``."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest
from pydantic_ai.models.test import TestModel

from test_adapters_openai_agents import ScriptedAgentsModel

PAGE = Path(__file__).resolve().parents[1] / "docs" / "comparison.md"


def _blocks() -> list[str]:
    section = PAGE.read_text(encoding="utf-8").split("## 5. ", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 2
    return blocks


def _lines(block: str) -> int:
    return sum(
        1 for line in block.splitlines() if line.strip() and not line.strip().startswith("#")
    )


def test_the_counted_lines_are_the_snippets_lines() -> None:
    assert [_lines(b) for b in _blocks()] == [10, 10]


@pytest.mark.parametrize(("answer", "printed"), [("y", "saved a"), ("n", "Denied by the user")])
def test_the_pydantic_ai_snippet_runs(
    answer: str, printed: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    block = _blocks()[0]
    assert '"openai:gpt-5.4"' in block
    monkeypatch.setattr(sys, "stdin", io.StringIO(f"{answer}\n\n"))
    code = compile(block.replace('"openai:gpt-5.4"', "MODEL"), "comparison.md", "exec")
    exec(code, {"MODEL": TestModel(), "__name__": "comparison"})
    assert printed in capsys.readouterr().out.strip().splitlines()[-1]


@pytest.mark.parametrize(("answer", "wrote"), [("y", "saved milk"), ("n", "Denied by the user")])
def test_the_openai_agents_snippet_runs(
    answer: str, wrote: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    block = _blocks()[1]
    assert 'model="gpt-5.4"' in block
    model = ScriptedAgentsModel(
        [("c1", "save_note", '{"title": "milk", "text": "buy milk"}')],
        lambda items: next(i["output"] for i in items if i.get("type") == "function_call_output"),
    )
    monkeypatch.setattr(sys, "stdin", io.StringIO(f"{answer}\n\n"))
    code = compile(block.replace('model="gpt-5.4"', "model=MODEL"), "comparison.md", "exec")
    exec(code, {"MODEL": model, "__name__": "comparison"})
    assert wrote in capsys.readouterr().out.strip().splitlines()[-1]
