"""A streamed turn: the answer's text as it is written, tool calls as they start and end.

The same turn as run() (same dispatcher, same transcript), its model steps streamed.
"""

import asyncio

import tooldeck
from tooldeck.events import CallFinished, CallStarted, TextDelta, TurnFinished
from tooldeck.providers import model_from_env
from tooldeck.testing import ScriptedModel, call, reply


@tooldeck.tool(read_only=True)
def word_count(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


offline = ScriptedModel(
    [
        reply("Let me count. ", call("word_count", {"text": "the quick brown fox"})),
        reply("The text has four words."),
    ],
    stream_chunk=6,  # offline, the text arrives in pieces of 6 characters
)


async def main() -> None:
    model = model_from_env(offline)
    pieces = 0
    async for event in tooldeck.stream(model, [word_count], "How many words: the quick brown fox"):
        if isinstance(event, TextDelta):
            pieces += 1
            print(event.text, end="", flush=True)
        elif isinstance(event, CallStarted):
            print(f"\n[calling {event.call.name}]")
        elif isinstance(event, CallFinished):
            print(f"[{event.call.name} done in {event.seconds:.3f} s]")
        elif isinstance(event, TurnFinished):
            print(f"\n[turn finished: {event.stop_reason.value}; {pieces} text pieces]")


asyncio.run(main())
