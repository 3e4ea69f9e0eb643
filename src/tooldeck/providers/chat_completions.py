"""``ChatCompletionsModel``: OpenAI Chat Completions and the services that speak it.

One adapter (``"openai-chat"``) on the official ``openai`` SDK, with four flavours that
differ only where their wire formats differ:

- ``openai``: https://api.openai.com/v1, key ``OPENAI_API_KEY``, ``max_completion_tokens``;
- ``openrouter``: https://openrouter.ai/api/v1, key ``OPENROUTER_API_KEY``, ``max_tokens``;
- ``glm``: https://api.z.ai/api/paas/v4, key ``ZAI_API_KEY`` (or ``ZHIPUAI_API_KEY``),
  ``max_tokens``;
- ``compatible``: ``base_url`` required, key optional and never read from the
  environment, ``max_tokens``.

An explicit ``api_key`` / ``base_url`` wins over the environment and the defaults.

``max_tokens`` is used for OpenRouter (its documented field, mapped for every upstream)
and for "compatible" servers (vLLM, Ollama, llama.cpp all accept it; not all accept
``max_completion_tokens``). Per-flavour differences:

- GLM accepts only ``tool_choice: "auto"``: any other choice is sent as ``"auto"``, logged,
  and noted in the message's ``provider_data["tool_choice"]``. Tools and the output
  schema are sent without ``strict`` (GLM's strict support is unconfirmed), so a tool is
  always sent with its own, non-strict schema. ``parallel_tool_calls`` and
  ``stream_options`` are not sent to GLM (not documented there; GLM reports usage in
  its last stream chunk anyway).
- Reasoning is kept as a model-bound :class:`~tooldeck.transcript.OpaqueItem` and sent
  back verbatim, only to the same provider, adapter and model: OpenRouter
  ``reasoning_details`` (the whole array, in its original order; ``reasoning`` when a
  model sends only the plain string) and GLM ``reasoning_content``. It is never
  translated for another model. The "openai" and "compatible" flavours keep what they
  receive for the record but do not send it back unless ``replay_reasoning=True``
  (OpenAI's Chat messages have no reasoning field; some compatible servers reject one).
- A GLM tool call of another type than ``function`` (``mcp``: run by the provider) is
  kept as an opaque item and never reaches the local dispatcher; it is not sent back.

Chat Completions has no deferred loading: ``ModelRequest.deferred`` is ignored and every
tool is sent in full. Tool messages carry text only, so images in a tool result are
described in text. Errors from the service (after the SDK's retries, which honour
``retry-after-ms`` / ``retry-after``) are raised as :class:`~tooldeck.errors.ProviderError`
kinds with the SDK's exception as ``__cause__`` (:mod:`tooldeck.providers.errors`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, get_args

from .._extras import needs_extra
from ..errors import SchemaError
from ..model import ModelDelta, ModelRequest
from ..result import ContentPart, ImagePart, JsonPart, TextPart, ToolResult
from ..schema import project, project_tools
from ..transcript import (
    AssistantMessage,
    AssistantPart,
    Item,
    OpaqueItem,
    StopReason,
    ToolCall,
    ToolOutput,
    Usage,
    UserMessage,
)
from ._caching import ToolOrder, prompt_cache_key
from ._clients import LoopClient
from ._clouds import AZURE, CloudSpec, azure_client, cloud_of
from ._common import StructuredOutput, classify_refusal, prepare_output_schema, replay_parts
from .errors import Target, missing_credentials, timeout_seconds, translated, translated_stream

with needs_extra("openai"):
    from openai import AsyncOpenAI, omit

__all__ = ["Flavour"]

_log = logging.getLogger("tooldeck.providers.chat_completions")

ADAPTER = "openai-chat"

Flavour: TypeAlias = Literal["openai", "openrouter", "glm", "compatible"]


@dataclass(frozen=True, slots=True)
class _Spec:
    base_url: str | None
    key_env: tuple[str, ...]
    max_tokens_field: str
    replay_reasoning: bool


_FLAVOURS: dict[str, _Spec] = {
    # OpenAI's Chat messages have no reasoning field: nothing to carry back there
    "openai": _Spec(
        "https://api.openai.com/v1", ("OPENAI_API_KEY",), "max_completion_tokens", False
    ),
    "openrouter": _Spec(
        "https://openrouter.ai/api/v1", ("OPENROUTER_API_KEY",), "max_tokens", True
    ),
    "glm": _Spec(
        "https://api.z.ai/api/paas/v4", ("ZAI_API_KEY", "ZHIPUAI_API_KEY"), "max_tokens", True
    ),
    "compatible": _Spec(None, (), "max_tokens", False),
}

# finish_reason -> stop reason. OpenRouter normalises to stop/tool_calls/length/
# content_filter/error (raw value in native_finish_reason); GLM adds sensitive and
# network_error. Anything else is an ERROR with the raw value kept in provider_data.
_FINISH: dict[str, StopReason] = {
    "stop": StopReason.END_TURN,
    "tool_calls": StopReason.TOOL_CALLS,
    "length": StopReason.MAX_TOKENS,
    "content_filter": StopReason.CONTENT_FILTER,
    "sensitive": StopReason.CONTENT_FILTER,
    "error": StopReason.ERROR,
    "network_error": StopReason.ERROR,
}

# Reasoning fields on an assistant message, in order of preference; each is stored as an
# OpaqueItem whose kind is the field name, so it goes back under the same field.
_REASONING_FIELDS = ("reasoning_details", "reasoning_content", "reasoning")

# Top-level response fields worth keeping in provider_data.
_KEPT_FIELDS = ("provider", "request_id", "system_fingerprint", "service_tier")

_SCHEMA_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

_OPAQUE_CALL = "tool_call."  # kind prefix of provider-run tool calls (GLM "mcp")


class ChatCompletionsModel:
    """A model behind a Chat Completions endpoint (OpenAI, OpenRouter, GLM, compatible).

    ``ChatCompletionsModel("gpt-4.1")``, ``ChatCompletionsModel("anthropic/claude-sonnet-4.5",
    "openrouter", extra_body={"reasoning": {"effort": "high"}})``,
    ``ChatCompletionsModel("glm-4.6", "glm", extra_body={"thinking": {"type": "enabled"}})``,
    ``ChatCompletionsModel("qwen3", "compatible", base_url="http://localhost:8000/v1")``.

    ``extra_body`` is merged into every request body (``ModelSettings.extra`` is merged
    after it, per request); both override what the adapter would send. ``referer`` and
    ``title`` become OpenRouter's ``HTTP-Referer`` and ``X-OpenRouter-Title`` headers.
    ``client`` replaces the SDK client the adapter would build (``api_key``,
    ``base_url``, ``max_retries`` and ``timeout`` are then ignored, and :meth:`aclose`
    leaves it open). ``max_retries`` is the SDK's retry budget; ``timeout`` is seconds per
    attempt (``None``: the SDK's default, 600 s). A missing key raises
    :class:`~tooldeck.errors.MissingCredentials` here, before any request.

    Azure OpenAI: ``client=AsyncAzureOpenAI(...)``, or ``cloud="azure"`` to make one from
    ``AZURE_OPENAI_ENDPOINT`` (or ``base_url``), ``AZURE_OPENAI_API_KEY`` (or ``api_key``)
    and ``OPENAI_API_VERSION``; ``model`` is then the deployment name, sent on the
    deployments path (``/openai/deployments/{model}/chat/completions``).
    """

    def __init__(
        self,
        model: str,
        flavour: Flavour = "openai",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 2,
        timeout: float | None = None,
        client: AsyncOpenAI | None = None,
        extra_body: Mapping[str, Any] | None = None,
        referer: str | None = None,
        title: str | None = None,
        replay_reasoning: bool | None = None,
        cloud: Literal["azure"] | None = None,
    ) -> None:
        if flavour not in _FLAVOURS:
            raise ValueError(
                f"unknown flavour {flavour!r}; expected one of {', '.join(get_args(Flavour))}"
            )
        spec = _FLAVOURS[flavour]
        self._model = model
        self._flavour: Flavour = flavour
        self._spec = spec
        self._extra_body = dict(extra_body or {})
        self._tool_order = ToolOrder()
        self._replay_reasoning = (
            spec.replay_reasoning if replay_reasoning is None else replay_reasoning
        )
        headers: dict[str, Any] = {}
        if referer:
            headers["HTTP-Referer"] = referer
        if title:
            headers["X-OpenRouter-Title"] = title
        self._custom_url = base_url is not None
        self._cloud: CloudSpec | None = AZURE if cloud == "azure" else None
        if client is not None:
            self._cloud = cloud_of(client)
        make = None
        if client is None and cloud == "azure":
            if flavour != "openai":
                raise ValueError("cloud='azure' serves OpenAI models: use flavour='openai'")
            azure: dict[str, Any] = {"api_key": api_key, "base_url": base_url}
            make = azure_client(model, {**azure, "max_retries": max_retries, "timeout": timeout})
        elif client is None:
            key = api_key
            for name in spec.key_env:
                key = key or os.environ.get(name) or None
            if flavour == "compatible" and not key:
                key = "unused"  # the SDK insists on a key; the header is omitted below
                headers["Authorization"] = omit
            elif not key:
                raise missing_credentials(Target(flavour, model, key_env=spec.key_env))
            url = base_url
            if url is None and flavour == "openai":
                url = os.environ.get("OPENAI_BASE_URL") or None
                self._custom_url = url is not None
            url = url or spec.base_url
            if url is None:
                raise ValueError("the compatible flavour needs base_url= (e.g. a vLLM server)")
            options: dict[str, Any] = {"api_key": key, "base_url": url, "max_retries": max_retries}
            if timeout is not None:
                options["timeout"] = timeout

            def make() -> AsyncOpenAI:
                made = AsyncOpenAI(**options)
                if flavour != "openai":
                    # The SDK reads OPENAI_ORG_ID / OPENAI_PROJECT_ID from the environment;
                    # they are OpenAI's and must not be sent to another service.
                    made.organization = None
                    made.project = None
                return made

        self._clients = LoopClient(make, client)
        self._headers = headers

    @property
    def name(self) -> str:
        return f"{self._flavour}:{self._model}"

    @property
    def model(self) -> str:
        return self._model

    @property
    def provider(self) -> str:
        return self._flavour

    @property
    def adapter(self) -> str:
        return ADAPTER

    @property
    def client(self) -> AsyncOpenAI:
        """The SDK client (the one of the loop last used)."""
        return self._clients.current

    @property
    def key_env(self) -> tuple[str, ...]:
        return self._spec.key_env

    async def aclose(self) -> None:
        """Close the connections of the client this model made (``client=`` stays open).

        The model stays usable: the next request opens a new client.
        """
        await self._clients.aclose()

    def _error_target(self) -> Target:
        client = self._clients.current
        cloud = self._cloud
        return Target(
            cloud.name if cloud is not None else self._flavour,
            self._model,
            str(client.base_url),
            cloud.key_env if cloud is not None else self._spec.key_env,
            timeout_seconds(client.timeout),
            self._custom_url,
        )

    async def __aenter__(self) -> ChatCompletionsModel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- requests -------------------------------------------------------------------

    def build_request(
        self, request: ModelRequest, *, stream: bool = False
    ) -> tuple[dict[str, Any], StructuredOutput | None, dict[str, Any]]:
        """The request body, the structured-output checker and notes for provider_data.

        Everything that can be wrong with the tools or the output schema raises here,
        before any network call.
        """
        settings = request.settings
        glm = self._flavour == "glm"
        notes: dict[str, Any] = {}
        body: dict[str, Any] = {"model": self._model, "messages": self.build_messages(request)}
        if request.tools:
            body["tools"] = self._tools(request)
            if settings.cache:
                body["tools"] = self._tool_order.apply(body["tools"])
            body["tool_choice"] = self._tool_choice(
                settings.tool_choice, {t.name for t in request.tools}, notes
            )
            if not glm:
                body["parallel_tool_calls"] = settings.parallel_tool_calls
        structured: StructuredOutput | None = None
        if settings.output_spec is not None:
            structured, body["response_format"] = self._response_format(
                settings.output_spec.schema, settings.output_schema_name
            )
        if settings.max_output_tokens is not None:
            body[self._spec.max_tokens_field] = settings.max_output_tokens
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        if stream:
            body["stream"] = True
            if not glm:
                body["stream_options"] = {"include_usage": True}
        if self._flavour == "openai":  # OpenAI's own field (also Azure's)
            instructions = request.instructions
            key = prompt_cache_key(settings.cache, self._model, instructions)
            if key is not None:
                body["prompt_cache_key"] = key
        body.update(self._extra_body)
        body.update(settings.extra)
        return body, structured, notes

    def _tools(self, request: ModelRequest) -> list[dict[str, Any]]:
        if self._flavour != "glm":
            entries, _ = project_tools(request.tools, ADAPTER)
            return entries
        seen: set[str] = set()
        tools: list[dict[str, Any]] = []
        for t in request.tools:
            if t.name in seen:
                raise SchemaError(
                    t.name, ["$: two tools with this name in one request"], provider="glm"
                )
            seen.add(t.name)
            function = project(t, ADAPTER, strict=False).entry["function"]
            tools.append(
                {
                    "type": "function",
                    "function": {k: v for k, v in function.items() if k != "strict"},
                }
            )
        return tools

    def _tool_choice(self, choice: str, names: set[str], notes: dict[str, Any]) -> Any:
        wire: Any
        if choice in ("auto", "none", "required"):
            wire = choice
        elif choice in names:
            wire = {"type": "function", "function": {"name": choice}}
        else:
            raise ValueError(f"tool_choice {choice!r} names no tool of this request")
        if self._flavour == "glm" and wire != "auto":
            _log.warning("GLM accepts only tool_choice 'auto'; %r sent as 'auto'", choice)
            notes["tool_choice"] = {"requested": choice, "sent": "auto"}
            wire = "auto"
        return wire

    def _response_format(
        self, schema: Mapping[str, Any], name: str
    ) -> tuple[StructuredOutput, dict[str, Any]]:
        if not _SCHEMA_NAME.match(name):
            raise SchemaError(
                name,
                ["$: an output schema name must match ^[a-zA-Z0-9_-]{1,64}$"],
                provider=ADAPTER,
            )
        structured = prepare_output_schema(schema, name, "openai", ADAPTER)
        spec: dict[str, Any] = {"name": name}
        if self._flavour == "glm":
            spec["schema"] = dict(structured.schema)
        else:
            spec["schema"] = dict(structured.wire_schema)
            spec["strict"] = structured.strict
        return structured, {"type": "json_schema", "json_schema": spec}

    def build_messages(self, request: ModelRequest) -> list[dict[str, Any]]:
        """The transcript as Chat messages; tool outputs are matched to calls by id."""
        messages: list[dict[str, Any]] = []
        if request.instructions:
            messages.append({"role": "system", "content": request.instructions})
        for item in request.transcript:
            message = self._message(item)
            if message is not None:
                messages.append(message)
        _check_answers(messages)
        return messages

    def _message(self, item: Item) -> dict[str, Any] | None:
        if isinstance(item, UserMessage):
            return {"role": "user", "content": _user_content(item.content)}
        if isinstance(item, ToolOutput):
            return {
                "role": "tool",
                "tool_call_id": item.call_id,
                "content": _tool_text(item.result),
            }
        return self._assistant(item)

    def _assistant(self, message: AssistantMessage) -> dict[str, Any] | None:
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        reasoning: dict[str, Any] = {}
        for part in replay_parts(message, self._flavour, ADAPTER, self._model):
            if isinstance(part, TextPart):
                texts.append(part.text)
            elif isinstance(part, ToolCall):
                arguments = part.arguments
                if not isinstance(arguments, str):  # an object from another provider
                    arguments = json.dumps(arguments, ensure_ascii=False)
                calls.append(
                    {
                        "id": part.call_id,
                        "type": "function",
                        "function": {"name": part.name, "arguments": arguments},
                    }
                )
            elif self._replay_reasoning and part.kind in _REASONING_FIELDS:
                if part.kind == "reasoning_details":
                    reasoning.setdefault(part.kind, []).extend(part.data)
                else:
                    reasoning[part.kind] = reasoning.get(part.kind, "") + str(part.data)
            # provider-run tool calls (GLM "mcp") are never sent back as calls: a call in
            # tool_calls would need a tool message answering it.
        text = "".join(texts)
        if not text and not calls and not reasoning:
            return None  # e.g. a refusal: its text was discarded, nothing to send back
        # No text beside calls: null for OpenAI (its documented follow-up), "" for
        # OpenRouter and GLM (theirs), as some of their upstreams reject a null content.
        empty = None if calls and self._flavour in ("openai", "compatible") else ""
        out: dict[str, Any] = {"role": "assistant", "content": text or empty}
        if calls:
            out["tool_calls"] = calls
        out.update(reasoning)
        return out

    # -- responses ------------------------------------------------------------------

    @translated
    async def respond(self, request: ModelRequest) -> AssistantMessage:
        body, structured, notes = self.build_request(request)
        model, messages = body.pop("model"), body.pop("messages")
        completion = await self._clients.get().chat.completions.create(
            model=model,
            messages=messages,
            extra_body=body,
            extra_headers=self._headers or None,
        )
        return self.parse_response(completion.to_dict(warnings=False), structured, notes)

    @translated_stream
    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | AssistantMessage]:
        """Yield text, reasoning and tool-call fragments, then the same message as respond()."""
        body, structured, notes = self.build_request(request, stream=True)
        model, messages = body.pop("model"), body.pop("messages")
        body.pop("stream", None)
        chunks = await self._clients.get().chat.completions.create(
            model=model,
            messages=messages,
            stream=True,
            extra_body=body,
            extra_headers=self._headers or None,
        )
        state = _StreamState()
        async with chunks:
            async for chunk in chunks:
                for delta in state.add(chunk.to_dict(warnings=False)):
                    yield delta
        yield self.parse_response(state.completion(), structured, notes)

    def parse_response(
        self,
        data: Mapping[str, Any],
        structured: StructuredOutput | None = None,
        notes: Mapping[str, Any] | None = None,
    ) -> AssistantMessage:
        """A Chat Completions response body as an :class:`AssistantMessage`."""
        extra: dict[str, Any] = dict(notes or {})
        for key in _KEPT_FIELDS:
            if data.get(key) is not None:
                extra[key] = data[key]
        if data.get("model") and data["model"] != self._model:
            extra["model"] = data["model"]
        usage, cost = _usage(data.get("usage"))
        if cost is not None:
            extra["cost"] = cost
        choices = data.get("choices") or []
        if not choices:
            extra["error"] = data.get("error") or "the response has no choices"
            return self._message_of([], StopReason.ERROR, None, usage, data, extra)
        choice: Mapping[str, Any] = choices[0]
        message: Mapping[str, Any] = choice.get("message") or {}
        raw_finish = choice.get("finish_reason")
        extra["finish_reason"] = raw_finish
        for key in ("native_finish_reason", "error"):
            if choice.get(key) is not None:
                extra[key] = choice[key]

        parts: list[AssistantPart] = []
        for field in _REASONING_FIELDS:
            value = message.get(field)
            if value:
                parts.append(OpaqueItem(self._flavour, ADAPTER, self._model, field, value))
                break
        text = _text_of(message.get("content"))
        refusal_text = message.get("refusal")
        if text and not refusal_text:
            parts.append(TextPart(text))
        for index, raw in enumerate(message.get("tool_calls") or []):
            parts.append(self._call(raw, index))

        calls = [p for p in parts if isinstance(p, ToolCall)]
        refusal: str | None = None
        if refusal_text:
            stop = StopReason.REFUSAL
            refusal = classify_refusal(texts=[str(refusal_text), text])
        elif raw_finish is None:
            stop = StopReason.ERROR
            extra.setdefault("error", "the response ended without a finish_reason")
        else:
            stop = _FINISH.get(str(raw_finish), StopReason.ERROR)
            if stop is StopReason.END_TURN and calls:
                stop = StopReason.TOOL_CALLS
        if stop is StopReason.MAX_TOKENS:
            # a truncated call's arguments may be cut short: it must never run
            parts = [
                dataclasses.replace(p, incomplete=True) if isinstance(p, ToolCall) else p
                for p in parts
            ]
        answer: Any = None
        if structured is not None and stop is StopReason.END_TURN and text:
            try:
                answer = structured.parse(text)
            except ValueError as exc:  # ends the turn cleanly, like the other adapters
                stop = StopReason.ERROR
                extra["structured_error"] = str(exc)
        return self._message_of(parts, stop, refusal, usage, data, extra, answer)

    def _message_of(
        self,
        parts: Sequence[AssistantPart],
        stop: StopReason,
        refusal: str | None,
        usage: Usage,
        data: Mapping[str, Any],
        extra: dict[str, Any],
        structured: Any = None,
    ) -> AssistantMessage:
        return AssistantMessage(
            parts=list(parts),
            stop_reason=stop,
            refusal=refusal,
            usage=usage,
            provider=self._flavour,
            adapter=ADAPTER,
            model=self._model,
            response_id=data.get("id"),
            provider_data=extra or None,
            structured=structured,
        )

    def _call(self, raw: Any, index: int) -> AssistantPart:
        kind = (raw.get("type") or "function") if isinstance(raw, Mapping) else "unknown"
        if kind != "function" or not isinstance(raw.get("function"), Mapping):
            # a provider-run call (GLM "mcp") or one we cannot read: kept, never dispatched
            return OpaqueItem(
                self._flavour, ADAPTER, self._model, f"{_OPAQUE_CALL}{kind}", raw, model_bound=False
            )
        function = raw["function"]
        arguments = function.get("arguments")
        if arguments is None:
            arguments = ""
        call_id = raw.get("id") or f"call_{index}_{uuid.uuid4().hex[:12]}"
        return ToolCall(call_id, str(function.get("name") or ""), arguments)


# -- helpers ----------------------------------------------------------------------------


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # some compatible servers answer with parts
        return "".join(
            str(p.get("text") or "")
            for p in content
            if isinstance(p, Mapping) and p.get("type") == "text"
        )
    return ""


def _usage(raw: Any) -> tuple[Usage, Any]:
    if not isinstance(raw, Mapping):
        return Usage(requests=1), None
    prompt = raw.get("prompt_tokens_details") or {}
    completion = raw.get("completion_tokens_details") or {}
    usage = Usage(
        input_tokens=int(raw.get("prompt_tokens") or 0),
        output_tokens=int(raw.get("completion_tokens") or 0),
        reasoning_tokens=int(completion.get("reasoning_tokens") or 0),
        cache_read_tokens=int(prompt.get("cached_tokens") or 0),
        cache_write_tokens=int(prompt.get("cache_write_tokens") or 0),
        requests=1,
    )
    return usage, raw.get("cost")


def _image_url(part: ImagePart) -> str:
    return part.url if part.url is not None else f"data:{part.mime_type};base64,{part.data}"


def _user_content(content: str | Sequence[ContentPart]) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, (TextPart, JsonPart)):
            parts.append({"type": "text", "text": part.text})
        else:
            parts.append({"type": "image_url", "image_url": {"url": _image_url(part)}})
    return parts


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _describe_image(part: ImagePart) -> str:
    if part.url is not None:
        where = f"at {part.url}"
    else:
        where = f"inline, {len(part.data or '') * 3 // 4} bytes"
    return f"[image ({part.mime_type}, {where}) not shown: tool messages carry text only]"


def _tool_text(result: ToolResult) -> str:
    """A tool result as the text of a tool message (Chat tool messages take text only)."""
    if isinstance(result.content, str):
        return result.content
    if not any(isinstance(p, ImagePart) for p in result.content):
        return result.text()
    pieces: list[str] = []
    for part in result.content:
        if isinstance(part, (TextPart, JsonPart)):
            pieces.append(part.text)
        else:
            pieces.append(_describe_image(part))
    return "\n".join(pieces)


def _check_answers(messages: Sequence[Mapping[str, Any]]) -> None:
    """Every call id needs one tool message right after its assistant message.

    The loop guarantees it; a transcript assembled by hand may not, and the service
    would answer with a 400, so say exactly what is wrong before sending anything.
    """
    problems: list[str] = []
    pending: list[str] = []

    def close() -> None:
        if pending:
            problems.append(f"no tool message answers call id(s) {', '.join(pending)}")
            pending.clear()

    for message in messages:
        role = message["role"]
        if role == "tool":
            call_id = message["tool_call_id"]
            if call_id in pending:
                pending.remove(call_id)
            else:
                problems.append(f"tool message for {call_id!r} answers no pending call")
            continue
        close()
        if role == "assistant":
            pending.extend(c["id"] for c in message.get("tool_calls") or ())
    close()
    if problems:
        raise ValueError("transcript cannot be sent to Chat Completions: " + "; ".join(problems))


class _StreamState:
    """Chunks of a streamed response, accumulated into the body a non-streamed one has."""

    def __init__(self) -> None:
        self.top: dict[str, Any] = {}
        self.choice: dict[str, Any] = {"index": 0, "finish_reason": None}
        self.content: list[str] = []
        self.refusal: list[str] = []
        self.strings: dict[str, list[str]] = {}  # reasoning_content / reasoning
        self.details: list[dict[str, Any]] = []
        self.detail_at: dict[tuple[Any, Any], dict[str, Any]] = {}
        self.calls: dict[int, dict[str, Any]] = {}
        self.announced: dict[int, int] = {}  # wire index -> index among the function calls
        self.usage: Any = None

    def add(self, chunk: Mapping[str, Any]) -> list[ModelDelta]:
        for key in ("id", "model", "created"):
            if key not in self.top and chunk.get(key) is not None:
                self.top[key] = chunk[key]
        for key in _KEPT_FIELDS:
            if chunk.get(key) is not None:
                self.top[key] = chunk[key]
        if chunk.get("usage") is not None:
            self.usage = chunk["usage"]
        deltas: list[ModelDelta] = []
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            for key in ("finish_reason", "native_finish_reason", "error"):
                if choice.get(key) is not None:
                    self.choice[key] = choice[key]
            deltas.extend(self._delta(choice.get("delta") or {}))
        return deltas

    def _delta(self, delta: Mapping[str, Any]) -> list[ModelDelta]:
        out: list[ModelDelta] = []
        said_reasoning = False
        for key in ("reasoning_content", "reasoning"):
            value = delta.get(key)
            if isinstance(value, str) and value:
                self.strings.setdefault(key, []).append(value)
                out.append(ModelDelta("reasoning", value))
                said_reasoning = True
        for detail in delta.get("reasoning_details") or ():
            fragment = self._detail(detail)
            if fragment and not said_reasoning:
                out.append(ModelDelta("reasoning", fragment))
        if isinstance(delta.get("content"), str) and delta["content"]:
            self.content.append(delta["content"])
            out.append(ModelDelta("text", delta["content"]))
        if isinstance(delta.get("refusal"), str):
            self.refusal.append(delta["refusal"])
        for raw in delta.get("tool_calls") or ():
            out.extend(self._call(raw))
        return out

    def _detail(self, detail: Any) -> str:
        """Merge a reasoning_details fragment into its block (same type and index)."""
        if not isinstance(detail, Mapping):
            self.details.append(detail)
            return ""
        key = (detail.get("type"), detail.get("index"))
        block = self.detail_at.get(key) if detail.get("index") is not None else None
        if block is None:
            block = dict(detail)
            self.details.append(block)
            if detail.get("index") is not None:
                self.detail_at[key] = block
        else:
            for name, value in detail.items():
                old = block.get(name)
                if name in ("text", "summary", "data") and isinstance(old, str):
                    block[name] = old + (value or "")
                elif value is not None or name not in block:
                    block[name] = value
        fragment = detail.get("text") or detail.get("summary")
        return fragment if isinstance(fragment, str) else ""

    def _call(self, raw: Mapping[str, Any]) -> list[ModelDelta]:
        index = raw.get("index")
        if not isinstance(index, int):  # servers that send whole calls without an index
            index = next(
                (i for i, c in self.calls.items() if raw.get("id") and c.get("id") == raw["id"]),
                len(self.calls),
            )
        slot = self.calls.setdefault(index, {})
        for key, value in raw.items():
            if key in ("index", "function") or value is None:
                continue
            if key not in slot or key not in ("id", "type"):
                slot[key] = value
        function = raw.get("function")
        if not isinstance(function, Mapping):
            return []
        held = slot.setdefault("function", {"name": None, "arguments": ""})
        if function.get("name") and not held["name"]:
            held["name"] = function["name"]
        fragment = function.get("arguments")
        if isinstance(fragment, str):
            if isinstance(held["arguments"], str):
                held["arguments"] += fragment
        elif fragment is not None:
            held["arguments"] = fragment
            fragment = _dumps(fragment)
        if slot.get("type", "function") != "function":
            return []
        out: list[ModelDelta] = []
        call_id, name = slot.get("id"), held["name"]
        if index not in self.announced:
            self.announced[index] = len(self.announced)
            out.append(
                ModelDelta(
                    "tool_call_start", call_id=call_id, name=name, index=self.announced[index]
                )
            )
        if fragment:
            out.append(
                ModelDelta(
                    "tool_call", fragment, call_id=call_id, name=name, index=self.announced[index]
                )
            )
        return out

    def completion(self) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(self.content) if self.content else None,
        }
        if self.refusal:
            message["refusal"] = "".join(self.refusal)
        for key, pieces in self.strings.items():
            message[key] = "".join(pieces)
        if self.details:
            message["reasoning_details"] = self.details
        if self.calls:
            message["tool_calls"] = [
                {"type": "function", **self.calls[i]} for i in sorted(self.calls)
            ]
        choice = {**self.choice, "message": message}
        return {**self.top, "choices": [choice], "usage": self.usage}
