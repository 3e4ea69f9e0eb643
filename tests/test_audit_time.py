"""The time of an audit or evidence line (policy/audit.py now_text): the text of
``datetime.now(UTC).isoformat(timespec="milliseconds")``, read from the same clock,
made once per millisecond."""

from __future__ import annotations

from datetime import UTC, datetime

from tooldeck.policy.audit import now_text


def test_now_text_is_the_datetime_text_of_now() -> None:
    for _ in range(20_000):
        before = datetime.now(UTC).isoformat(timespec="milliseconds")
        text = now_text()
        after = datetime.now(UTC).isoformat(timespec="milliseconds")
        assert before <= text <= after
        assert len(text) == len(before) and text.endswith("+00:00")
        assert datetime.fromisoformat(text).tzinfo is not None
