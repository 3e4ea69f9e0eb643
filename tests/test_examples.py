"""Every program in examples/ runs as a user would run it, offline, and says what it did.

Each runs as ``python examples/<name>.py`` in a subprocess with no model configured
(``TOOLDECK_MODEL`` and ``OTEL_EXPORTER_OTLP_ENDPOINT`` unset, so ScriptedModel and the
example's own receiver are used); it must exit 0 and print the lines listed here, which
name what the example is about (a number it computed, a span it sent, a denial it got).
A new example without expected lines fails until it has some.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
PG_DSN = os.environ.get("TOOLDECK_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")

EXPECTED: dict[str, list[str]] = {
    "first_agent.py": [r"^tool said: sunny, 21 °C$", r"^answer: It is sunny in Paris"],
    "mcp_and_functions.py": [
        r"^add: 5$",
        r'^mcp__time__get_current_time: \{"timezone":"Europe/Paris","datetime":"20\d\d-',
    ],
    "approve_writes.py": [
        r"^asked: save_note .*buy milk",
        r"^read_note: \(no such note\)$",  # read-only: not asked about
        r"^save_note: saved 'todo'$",
        r"^save_note: Denied by the user: never store passwords in notes$",
        r"^notes kept: \{'todo': 'buy milk'\}$",
    ],
    "policy_and_approve.py": [
        r'^asked: save_note \{"path": "drafts/a.md"',  # the policy allows it; the ask rule asks
        r"^save_note: saved drafts/a.md$",
        r"^save_note: Denied by the user\.$",
        r"^delete_note: Denied by policy: notes are never deleted by the agent$",
        r"^audit: .*\('save_note', 'approve', 'approval'\)",  # audited through the policy
    ],
    "deferred_loading.py": [
        r"^300 tools; shown now: 1 \(",
        r"^search found: github__list_issues$",
        r"^last call: github__list_issues -> github__list_issues ran with",
    ],
    "sub_agent.py": [r"^sub-agent answered: apple 0.5 €, pear 0.75 €$"],
    "workflow_sqlite.py": [
        r"^state: succeeded$",
        r"^verdict: recommended \(3 reasons, a Verdict\)$",
    ],
    "workflow_postgres.py": [
        r"^state: succeeded \| stored in PostgreSQL as succeeded$",
        r"^estimate: 8000-12000 \(Estimate\)$",
    ],
    "large_results.py": [
        r"^stored: \.tooldeck/tool-offload/logs/ref_[0-9a-f]{16}\.json$",
        r"^recall calls: [2-9]$",
        r"^answer: Found it after \d page\(s\): ERROR disk full$",
    ],
    "streaming.py": [
        r"^\[calling word_count\]$",
        r"^\[turn finished: end_turn; ([2-9]|\d\d+) text pieces\]$",  # streamed in pieces
    ],
    "tracing_otlp.py": [
        r"^answer: 1 \+ 2 = 3$",
        r"^spans received: .*chat scripted.*execute_tool add, invoke_agent$",
    ],
    "structured_output.py": [
        r"^Invoice: ACME owes 200.5 EUR, paid=False$",
        r"^model steps: 3$",  # the invalid answer was sent back once
    ],
}

ABSENT: dict[str, list[str]] = {  # lines that must not appear
    "approve_writes.py": [r"^asked: read_note"],  # a read-only tool is never asked about
    "policy_and_approve.py": [r"^asked: delete_note"],  # denied by the policy: nobody asked
}


def _examples() -> list[str]:
    return sorted(p.name for p in EXAMPLES.glob("*.py"))


def test_every_example_has_expected_lines_and_a_readme_entry() -> None:
    readme = (EXAMPLES / "README.md").read_text()
    assert sorted(EXPECTED) == _examples()
    assert [n for n in _examples() if f"`{n}`" not in readme] == []


def _pg_answers() -> bool:
    try:
        psycopg.connect(PG_DSN, connect_timeout=3).close()
    except psycopg.OperationalError:
        return False
    return True


@pytest.mark.parametrize("name", _examples())
def test_example_runs_offline(name: str) -> None:
    if name == "workflow_postgres.py" and not os.environ.get("CI") and not _pg_answers():
        pytest.skip(f"no PostgreSQL server answers at {PG_DSN}")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TOOLDECK_MODEL", "OTEL_EXPORTER_OTLP_ENDPOINT", "TOOLDECK_PG_DSN")
    }
    env["TOOLDECK_PG_DSN"] = PG_DSN
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    for pattern in EXPECTED.get(name, [r"(?!)"]):  # none listed: fails
        assert any(re.search(pattern, line) for line in lines), (pattern, done.stdout[-2000:])
    for pattern in ABSENT.get(name, []):
        assert not any(re.search(pattern, line) for line in lines), (pattern, done.stdout)
