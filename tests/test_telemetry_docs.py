"""The examples of docs/observability.md run, each as a script in its own process (they
set process-wide OpenTelemetry providers), against a real OTLP/HTTP receiver."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from otlp_receiver import OtlpReceiver
from tooldeck.telemetry.timeline import Timeline

DOC = Path(__file__).resolve().parents[1] / "docs" / "observability.md"


def blocks() -> list[str]:
    found = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(found) == 3, "the doc's three examples"
    return found


def run(code: str, cwd: Path, endpoint: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        "OTEL_METRIC_EXPORT_INTERVAL": "200",
        "COLUMNS": "120",
    }
    env.pop("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", None)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_otlp_example_exports_the_turn_to_a_receiver(tmp_path: Path) -> None:
    with OtlpReceiver() as receiver:
        done = run(blocks()[0], tmp_path, receiver.endpoint)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "3"
        spans = receiver.wait_for(lambda s: len(s) >= 4, "the example's spans")
        receiver.wait_for(lambda s: bool(receiver.metric_names), "metrics", timeout=30)
    names = sorted(s["name"] for s in spans)
    assert names == ["chat scripted", "chat scripted", "execute_tool add", "invoke_agent"]
    assert {s["resource"]["service.name"] for s in spans} == {"my-agent"}
    assert "What is 1 + 2?" not in json.dumps(spans)  # no content by default
    assert {"gen_ai.client.token.usage", "tooldeck.tool.calls"} <= receiver.metric_names


def test_the_content_example_prints_the_prompt(tmp_path: Path) -> None:
    done = run(blocks()[1], tmp_path, "http://127.0.0.1:9")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        {"role": "user", "parts": [{"type": "text", "content": "Say hello"}]}
    ]


def test_the_timeline_example_draws_and_saves_the_turn(tmp_path: Path) -> None:
    done = run(blocks()[2], tmp_path, "http://127.0.0.1:9")
    assert done.returncode == 0, done.stderr
    assert "fetch" in done.stdout and "step 1: model" in done.stdout
    saved = Timeline.load(tmp_path / "turn.timeline.json")
    fetches = [b for b in saved.bars if b.label == "fetch"]
    assert len(fetches) == 2 and fetches[0].start < fetches[1].end  # side by side
