"""A first agent: one typed function as a tool, one turn.

Offline it runs on ScriptedModel (a script, not a model). With a key, pick a real model:
TOOLDECK_MODEL=openai:gpt-5.4 OPENAI_API_KEY=... python examples/first_agent.py
"""

import tooldeck
from tooldeck.providers import model_from_env
from tooldeck.testing import ScriptedModel, call, reply


@tooldeck.tool(read_only=True)
def get_weather(city: str) -> str:
    """Today's weather in a city."""
    return {"Paris": "sunny, 21 °C", "Oslo": "rain, 9 °C"}.get(city, "unknown")


offline = ScriptedModel(
    [reply(call("get_weather", {"city": "Paris"})), reply("It is sunny in Paris, 21 °C.")]
)
model = model_from_env(offline)

result = tooldeck.run_sync(model, [get_weather], "What is the weather in Paris?")
print("tool said:", result.tool_outputs[0].text)
print("answer:", result.output)
