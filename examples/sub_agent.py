"""A sub-agent through delegate_task: the child gets only its own tools, within the parent's.

The researcher agent may use `lookup_price` only; it runs its own turn (its own transcript
and session id) and the parent gets its answer as the tool's output.
"""

import tooldeck
from tooldeck.agents.delegation import delegate_task_tool
from tooldeck.agents.toolkits import AgentDefinition, ToolkitManifest
from tooldeck.providers import model_from_env
from tooldeck.testing import ScriptedModel, call, reply

PRICES = {"apple": 0.5, "pear": 0.75}


@tooldeck.tool(read_only=True)
def lookup_price(fruit: str) -> float:
    """The price of one fruit, in euros."""
    return PRICES[fruit]


researcher = AgentDefinition.parse(
    "---\nname: researcher\ndescription: Looks up prices.\ntools: [lookup_price]\n---\n"
    "Look the prices up and answer with the numbers."
)
child = ScriptedModel(
    [
        reply(call("lookup_price", {"fruit": "apple"}), call("lookup_price", {"fruit": "pear"})),
        reply("apple 0.5 €, pear 0.75 €"),
    ]
)
delegate = delegate_task_tool(
    {"researcher": researcher},
    ToolkitManifest.load(),
    model_for=lambda agent: model_from_env(child),
)
parent = ScriptedModel(
    [
        reply(call("delegate_task", {"agent": "researcher", "task": "Price of apple and pear?"})),
        reply("The researcher says: apple 0.5 €, pear 0.75 €."),
    ]
)
result = tooldeck.run_sync(
    model_from_env(parent), [lookup_price, delegate], "What do an apple and a pear cost?"
)
print("sub-agent answered:", result.tool_outputs[0].text)
print("answer:", result.output)
