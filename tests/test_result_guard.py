"""Every session gets the size guard, directly or by delegation (issue 17, item 6).

A real 2 MB tool result, the real loop, dispatcher and offload store on a real
directory; what reached the model is read off the requests the ScriptedModel received.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import tooldeck
from tooldeck import Session, Toolset, TurnContext, tool
from tooldeck.agents.delegation import delegate_task_tool
from tooldeck.agents.toolkits import AgentDefinition, ToolkitManifest
from tooldeck.model import ModelRequest
from tooldeck.offload import RECALL_TOOL_NAME, OffloadStore
from tooldeck.offload.defaults import child_hooks, session_guard, store_of
from tooldeck.testing import ScriptedModel, call, reply
from tooldeck.tokens import estimate_tokens
from tooldeck.transcript import AssistantMessage, ToolCall, ToolOutput

GUARD = 25_000
BIG = "".join(f"line {i:07d}: the quick brown fox jumps over the lazy dog\n" for i in range(35_000))
REF = re.compile(r"ref_[0-9a-f]{16}")


@tool(read_only=True)
def dump_log() -> str:
    """Return the whole log (about 2 MB)."""
    return BIG


def test_the_fixture_is_a_2_mb_result_far_over_the_guard() -> None:
    assert 2_000_000 <= len(BIG.encode()) < 2_200_000
    assert estimate_tokens(BIG) > 20 * GUARD


def outputs_seen(request: ModelRequest) -> list[ToolOutput]:
    return [i for i in request.transcript if isinstance(i, ToolOutput)]


def recalling_script(request: ModelRequest) -> AssistantMessage:
    """Dump the log; recall the first page of the stored result if one is offered; stop."""
    seen = outputs_seen(request)
    if not seen:
        return reply(call("dump_log"))
    ref = REF.search(seen[-1].text)
    offered = RECALL_TOOL_NAME in [t.name for t in request.tools]
    if len(seen) == 1 and ref and offered:
        return reply(call(RECALL_TOOL_NAME, {"ref_id": ref.group(0), "limit": 2_000}))
    return reply("done")


def guarded(text: str) -> None:
    assert estimate_tokens(text) <= GUARD
    assert "This tool result was cut to fit the limit of 25,000 tokens" in text or REF.search(
        text
    ), text[:300]


# -- a plain session ---------------------------------------------------------------------------
def test_a_plain_session_without_a_home_gets_the_guard_only() -> None:
    model = ScriptedModel(recalling_script)
    result = asyncio.run(Session(model, [dump_log]).run("show me the log"))
    first = outputs_seen(model.requests[1])[0]
    assert estimate_tokens(first.text) <= GUARD < estimate_tokens(BIG)
    assert "Offloading of large results is off, so the cut part is not available." in first.text
    assert first.text.split("\n", 1)[1].startswith(BIG[:1000])  # the head is kept
    assert first.result.details["guarded"]["original_tokens"] == estimate_tokens(BIG)
    assert RECALL_TOOL_NAME not in [t.name for t in model.requests[1].tools]
    assert result.output == "done"


def test_a_plain_session_with_a_home_offloads_and_offers_recall(tmp_path: Path) -> None:
    model = ScriptedModel(recalling_script)
    turn = TurnContext(session_id="plain", home=tmp_path)
    session = Session(model, Toolset([dump_log]), session_id="plain", turn=turn)
    asyncio.run(session.run("show me the log"))
    assert [t.name for t in model.requests[0].tools] == ["dump_log"]  # nothing stored yet
    summary = outputs_seen(model.requests[1])[0]
    assert estimate_tokens(summary.text) <= 15_000 // 5  # a summary, not the log
    ref = summary.result.details["offloaded"]["ref_id"]
    assert [t.name for t in model.requests[1].tools] == ["dump_log", RECALL_TOOL_NAME]
    page = outputs_seen(model.requests[2])[1]
    assert not page.is_error and BIG[:1500] in page.text
    store = OffloadStore(tmp_path, "plain")
    assert store.load(ref).text() == BIG  # stored in full, under the home


def test_a_tools_factory_with_the_default_store_sees_recall_from_the_next_step(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(recalling_script)
    turn = TurnContext(session_id="factory", home=tmp_path)
    tools = tooldeck.source(lambda ctx: Toolset([dump_log]))
    session = Session(model, tools, session_id="factory", turn=turn)
    asyncio.run(session.run("go"))
    assert [t.name for t in model.requests[1].tools] == ["dump_log", RECALL_TOOL_NAME]
    assert not outputs_seen(model.requests[2])[1].is_error


def test_the_guard_can_be_turned_off_explicitly() -> None:
    model = ScriptedModel(recalling_script)
    asyncio.run(Session(model, [dump_log], guard=False).run("go"))
    assert outputs_seen(model.requests[1])[0].text == BIG  # whole: the user asked for it


def test_a_hook_of_ones_own_runs_and_the_guard_still_follows_it() -> None:
    def shout(call_: ToolCall, tool_: Any, result: Any, ctx: Any) -> Any:
        return type(result)(content=result.text().upper())

    model = ScriptedModel(recalling_script)
    asyncio.run(Session(model, [dump_log], result_hooks=[shout]).run("go"))
    text = outputs_seen(model.requests[1])[0].text
    assert "LINE 0000000: THE QUICK BROWN FOX" in text  # the own hook ran first...
    assert estimate_tokens(text) <= GUARD  # ...and the default guard after it


def test_a_given_store_is_used_and_not_doubled(tmp_path: Path) -> None:
    store = OffloadStore(tmp_path, "s", threshold_tokens=5_000, guard_tokens=10_000)
    guard = session_guard([store.hook], enabled=True, session_id="s", home=tmp_path)
    assert guard.hooks == (store.hook,) and guard.store is store
    off = session_guard([], enabled=False, session_id="s", home=tmp_path)
    assert off.hooks == () and off.store is None
    wrapped = session_guard([lambda *a: store.hook(*a)], enabled=True, session_id="s", home=None)
    assert len(wrapped.hooks) == 2 and store_of(wrapped.hooks[1]) is wrapped.store
    assert wrapped.store is not None and wrapped.store.threshold_tokens == 0  # guard only


# -- sub-agents --------------------------------------------------------------------------------
READER = AgentDefinition.parse(
    "---\nname: reader\ndescription: Reads logs.\ntools: [dump_log]\n---\nRead."
)


def delegating(child: ScriptedModel) -> tuple[Any, ScriptedModel]:
    delegate = delegate_task_tool(
        {"reader": READER}, ToolkitManifest.load(), model_for=lambda a: child
    )
    parent = ScriptedModel(
        [reply(call("delegate_task", {"agent": "reader", "task": "read the log"})), reply("ok")]
    )
    return delegate, parent


def test_a_2_mb_result_in_a_child_is_guarded_stored_and_recallable(tmp_path: Path) -> None:
    """The parent set up offload as docs/large-results.md shows; the child gets the same."""
    child = ScriptedModel(recalling_script)
    delegate, parent = delegating(child)
    store = OffloadStore(tmp_path, "parent", threshold_tokens=12_000, guard_tokens=20_000)
    turn = TurnContext("parent", tmp_path, status_sources={"offload": store.status_source})
    session = Session(
        parent,
        [dump_log, delegate, store],
        session_id="parent",
        turn=turn,
        result_hooks=[store.hook],
    )
    result = asyncio.run(session.run("go"))
    child_id = result.tool_outputs[0].result.details["session_id"]
    seen = outputs_seen(child.requests[1])[0]
    assert estimate_tokens(seen.text) <= 20_000  # the parent's own guard, not just 25k
    offloaded = seen.result.details["offloaded"]
    assert "over the 12,000-token limit" in seen.text  # the parent's threshold
    assert RECALL_TOOL_NAME in [t.name for t in child.requests[1].tools]
    page = outputs_seen(child.requests[2])[1]
    assert not page.is_error and BIG[:1500] in page.text
    mine = OffloadStore(tmp_path, child_id)
    assert mine.load(offloaded["ref_id"]).text() == BIG
    assert not store.has_refs()  # stored under the child's own session, not the parent's


def test_a_child_of_a_parent_without_hooks_is_guarded_too() -> None:
    child = ScriptedModel(recalling_script)
    delegate, parent = delegating(child)
    asyncio.run(Session(parent, [dump_log, delegate]).run("go"))
    seen = outputs_seen(child.requests[1])[0]
    assert estimate_tokens(seen.text) <= GUARD < estimate_tokens(BIG)
    assert "the cut part is not available" in seen.text


def test_a_child_of_a_parent_that_opted_out_still_has_the_guard(tmp_path: Path) -> None:
    child = ScriptedModel(recalling_script)
    delegate, parent = delegating(child)
    turn = TurnContext("p", tmp_path)
    asyncio.run(Session(parent, [dump_log, delegate], turn=turn, guard=False).run("go"))
    seen = outputs_seen(child.requests[1])[0]
    assert estimate_tokens(seen.text) <= GUARD and "offloaded" in seen.result.details


def test_child_hooks_keep_other_hooks_and_make_each_store_the_childs(tmp_path: Path) -> None:
    def other(*args: Any) -> Any:
        return args[2]

    store = OffloadStore(tmp_path, "p", threshold_tokens=1_000, guard_tokens=2_000, ttl_seconds=60)
    first, second = child_hooks([other, store.hook], "p.child.1")
    assert first is other
    made = store_of(second)
    assert made is not None and made is not store
    assert (made.session_id, made.home) == ("p.child.1", store.home)
    assert (made.threshold_tokens, made.guard_tokens, made.ttl_seconds) == (1_000, 2_000, 60)
    assert made.directory != store.directory
