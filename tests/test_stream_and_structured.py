"""A streamed turn and a typed answer together: the retry happens inside the stream."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

import tooldeck
from tooldeck.events import ModelStepFinished, TextDelta
from tooldeck.testing import ScriptedModel, reply


class Answer(BaseModel):
    value: int


def test_a_streamed_turn_retries_an_invalid_answer_and_returns_the_instance() -> None:
    script = [reply("not json"), reply('{"value": 7}')]
    model = ScriptedModel(script, stream_chunk=3)

    async def main() -> tuple[list[object], tooldeck.RunResult]:
        turn = tooldeck.stream(model, [], "give me a number", output_type=Answer)
        events = [e async for e in turn]
        assert turn.result is not None
        return events, turn.result

    events, result = asyncio.run(main())
    assert result.structured == Answer(value=7) and result.steps == 2
    assert sum(isinstance(e, ModelStepFinished) for e in events) == 2
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == 'not json{"value": 7}'
    run_model = ScriptedModel([reply("not json"), reply('{"value": 7}')])
    ran = asyncio.run(tooldeck.run(run_model, [], "give me a number", output_type=Answer))
    assert [i.text for i in ran.items] == [i.text for i in result.items]  # type: ignore[union-attr]
