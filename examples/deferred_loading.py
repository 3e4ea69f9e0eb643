"""Deferred loading over a big catalog: 300 real tool definitions, found by tool_search.

The planner shows the model a few core tools and `tool_search`; a tool the search
returns is callable from the next step. Offline, the model searches, then calls what
it found.
"""

import json
from pathlib import Path

import tooldeck
from tooldeck import Tool, Toolset
from tooldeck.plan import ToolPlanner
from tooldeck.providers import model_from_env
from tooldeck.testing import ScriptedModel, call, reply

CATALOG = Path(tooldeck.__file__).parent / "data" / "demo_catalog.json"


def catalog_tool(spec: dict) -> Tool:
    def execute(params, ctx) -> str:  # a stand-in body: the catalog has no servers
        return f"{spec['name']} ran with {json.dumps(params)}"

    return Tool.from_schema(
        name=spec["name"],
        description=spec["description"],
        json_schema=spec["input_schema"],
        execute=execute,
        read_only=True,
    )


tools = Toolset(catalog_tool(t) for t in json.loads(CATALOG.read_text())["tools"])


def script(request):  # what the offline model does: search, then call the first hit
    outputs = [i for i in request.transcript if isinstance(i, tooldeck.ToolOutput)]
    if not outputs:
        return reply(call("tool_search", {"query": "list the open issues of a github repo"}))
    if len(outputs) == 1:  # its text lists "- name: description" lines, best first
        found = outputs[0].text.splitlines()[1].removeprefix("- ").split(":")[0]
        print("search found:", found)
        return reply(call(found, {"owner": "me", "repo": "demo", "state": "OPEN"}))
    return reply("Here are the open issues.")


model = model_from_env(ScriptedModel(script))
planner = ToolPlanner(tools, model=model, semantic=False)
session = tooldeck.Session(model, planner)
plan = planner(None)
now, whole = plan.tokens()
print(f"{len(tools)} tools; shown now: {len(plan.shown)} ({now:,} of {whole:,} tokens)")
result = session.run_sync("List the open issues of me/demo.")
print("last call:", result.tool_outputs[-1].name, "->", result.tool_outputs[-1].text[:70])
print("answer:", result.output)
