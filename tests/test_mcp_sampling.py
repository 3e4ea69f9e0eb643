"""MCP sampling as a client: a server's ``sampling/createMessage`` served by a model, only
when the policy lets that server sample, within its token budget.

Real server: npm's ``@modelcontextprotocol/server-everything``, whose
``trigger-sampling-request`` tool (registered only for a client that declares sampling)
asks the client's model with a system prompt and ``maxTokens`` and reports the answer.
The model serving it is ``ScriptedModel`` (the offline model), which records requests.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from gateway_client import audit_lines, node_server, npm_server
from tooldeck import ApprovalAnswer, ApprovalRequest, Protection, Session, TurnContext
from tooldeck.mcp import McpSource, Sampling, SamplingRequest
from tooldeck.policy import Policy, SessionPolicy
from tooldeck.providers.scripted import ScriptedModel, call, reply
from tooldeck.transcript import Usage

EVERYTHING = ("@modelcontextprotocol/server-everything", "2026.8.31", "mcp-server-everything")
TRIGGER = "mcp__everything__trigger-sampling-request"
SAMPLE = "mcp__everything__sampling_createMessage"


def config() -> dict[str, Any]:
    entry = npm_server(*EVERYTHING)
    return {"mcpServers": {"everything": node_server(entry, "stdio")}}


def policy(tmp_path: Path, sampling: str | None) -> SessionPolicy:
    rules: list[dict[str, Any]] = [{"tools": TRIGGER, "action": "allow"}]
    if sampling is not None:
        rules.append({"tools": SAMPLE, "action": sampling, "reason": f"sampling: {sampling}"})
    loaded = Policy.from_dict({"profile": {"rules": rules}})
    return SessionPolicy(loaded, session_id="s1", directory=tmp_path)


async def turn(source: McpSource, protect: Protection, prompt: str = "capital of France?") -> str:
    model = ScriptedModel(
        [reply(call(TRIGGER, {"prompt": prompt, "maxTokens": 50})), reply("done")]
    )
    session = Session(model, [source], session_id="s1", turn=TurnContext("s1"), protect=protect)
    result = await session.run("sample")
    (output,) = result.tool_outputs
    return output.result.text()


def test_a_request_is_served_when_the_policy_allows_it(tmp_path: Path) -> None:
    sampler = ScriptedModel([reply("Paris, of course.")])

    async def main() -> None:
        async with McpSource(config(), sampling=Sampling(sampler, budget=1_000)) as source:
            text = await turn(source, Protection.policy(policy(tmp_path, "allow")))
            assert "LLM sampling result" in text and "Paris, of course." in text, text
            assert '"model": "scripted"' in text and '"stopReason": "endTurn"' in text
            (request,) = sampler.requests
            assert request.instructions == "You are a helpful test server."
            assert "capital of France?" in str(request.transcript[0])
            assert request.settings.max_output_tokens == 50 and request.tools == []
            lines = [line for line in audit_lines(tmp_path) if line["tool"] == SAMPLE]
            assert [line["decision"] for line in lines] == ["allow", "sampled"]
            assert "tokens from scripted" in lines[-1]["reason"]

    asyncio.run(main())


def test_refused_by_policy_with_a_clear_error_to_the_server(tmp_path: Path) -> None:
    sampler = ScriptedModel([reply("never")])

    async def main() -> None:
        async with McpSource(config(), sampling=sampler) as source:
            text = await turn(source, Protection.policy(policy(tmp_path, "deny")))
            assert "sampling refused: denied by policy: sampling: deny" in text, text
            assert sampler.requests == []

    asyncio.run(main())


def test_it_asks_by_default_and_nobody_there_is_a_refusal(tmp_path: Path) -> None:
    asked: list[ApprovalRequest] = []

    def approve(request: ApprovalRequest) -> ApprovalAnswer:
        asked.append(request)
        return ApprovalAnswer(len(asked) == 1, "enough")

    sampler = ScriptedModel([reply("first answer")])

    async def main() -> None:
        async with McpSource(config(), sampling=sampler) as source:
            protect = Protection.policy(policy(tmp_path, None), approver=approve)
            assert "first answer" in await turn(source, protect)
            second = await turn(source, protect)
            assert "sampling refused: not approved: enough" in second, second
            request = asked[0].params
            assert isinstance(request, SamplingRequest) and request.server == "everything"
            assert request.messages[0]["text"].endswith("capital of France?")
            assert asked[0].tool.name == SAMPLE and asked[0].tool.tier == "WRITE"

            text = await turn(source, Protection.none())  # no policy, no approver: asks nobody
            assert "sampling refused: nobody can approve it" in text, text
            outside = await source.call(
                "everything", "trigger-sampling-request", {"prompt": "hi", "maxTokens": 5}
            )
            assert "sampling refused: nobody can approve it" in outside.text()
            assert len(sampler.requests) == 1

    asyncio.run(main())


def test_the_budget_cuts_and_then_refuses(tmp_path: Path) -> None:
    spent = Usage(input_tokens=20, output_tokens=25, requests=1)  # more than asked: it counts
    sampler = ScriptedModel([reply("word " * 25, usage=spent)])

    async def main() -> None:
        sampling = Sampling(sampler, budget=100, budgets={"everything": 30})
        async with McpSource(config(), sampling=sampling) as source:
            allow = Protection.policy(policy(tmp_path, "allow"))
            assert "word word" in await turn(source, allow)
            assert sampler.requests[0].settings.max_output_tokens == 30  # cut to the budget
            assert sampling.spent == {"everything": 45}  # the usage the model reported
            text = await turn(source, allow)
            assert "sampling refused: the server's sampling budget of 30 tokens is spent" in text
            assert len(sampler.requests) == 1

    asyncio.run(main())


def test_without_a_model_the_capability_is_not_declared() -> None:
    async def main() -> None:
        async with McpSource(config()) as source:
            names = {t.mcp.tool for t in source.tools()}
            assert "trigger-sampling-request" not in names
            assert "trigger-elicitation-request" in names

    asyncio.run(main())


class BrokenModel(ScriptedModel):
    async def respond(self, request: Any) -> Any:
        raise RuntimeError("provider said: key sk-secret is invalid")


def test_a_failing_model_is_an_error_without_its_details(tmp_path: Path) -> None:
    async def main() -> None:
        async with McpSource(config(), sampling=BrokenModel([])) as source:
            text = await turn(source, Protection.policy(policy(tmp_path, "allow")))
            assert "sampling failed: RuntimeError" in text and "sk-secret" not in text, text

    asyncio.run(main())
