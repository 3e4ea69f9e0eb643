"""``AnthropicModel``: the Anthropic Messages API (``POST /v1/messages``) on the official SDK.

Requests
    Tools are projected with :func:`tooldeck.schema.project_tools` (strict decided per tool,
    the per-request strict limits enforced; a :class:`~tooldeck.errors.SchemaError` is
    raised before any network call) and re-sent on every request. ``tool_choice`` maps to
    ``{"type": "auto" | "any" | "none"}`` or ``{"type": "tool", "name": ...}``;
    ``parallel_tool_calls=False`` adds ``disable_parallel_tool_use: true``. Instructions
    go to ``system``; a structured final answer to ``output_config.format``.

Transcript
    An assistant message goes back as one ``assistant`` message whose blocks keep their
    original order. ``thinking`` / ``redacted_thinking`` blocks go back verbatim (with
    their signatures) only to the provider, adapter and model that produced them;
    server-side blocks (``server_tool_use``, ``*_tool_result``) only to this provider and
    adapter; anything else is dropped, never translated. The outputs that follow an
    assistant message become one ``user`` message that starts with all their
    ``tool_result`` blocks (correlated by ``tool_use_id``); user text comes after them.

Responses
    Blocks become parts in content order: ``text`` -> :class:`TextPart`, ``tool_use`` ->
    :class:`ToolCall` (``arguments`` is the input object), everything else ->
    :class:`OpaqueItem` holding the block exactly as received (thinking blocks are bound to
    the model; server-side and unknown blocks to the provider). Server-side tool use is
    never dispatched locally. The stop reason is mapped onto :class:`StopReason`; a refusal
    keeps only its classified category (never the explanation or the refused text); calls
    from a truncated response are marked ``incomplete`` and never executed. A requested
    structured answer that does not parse or validate turns the stop reason into ``ERROR``
    (why is in ``provider_data["structured_error"]``), so the loop can send it back for a
    retry. ``output_config.format`` is always constrained, so an output schema Anthropic
    cannot express is a :class:`~tooldeck.errors.SchemaError` before any request.

Errors
    SDK exceptions (after the SDK's own retries) are raised as
    :class:`~tooldeck.errors.ProviderError` kinds, the SDK's exception as ``__cause__``
    (:mod:`tooldeck.providers.errors`); a missing key raises
    :class:`~tooldeck.errors.MissingCredentials` when the model is made.

Non-streaming responses are read as raw JSON (not through the SDK's typed models, which
coerce unknown block types into known ones), so opaque blocks are kept exactly as sent.
Streaming reads the raw server-sent events and assembles the same message, so
:meth:`AnthropicModel.stream` ends with the same :class:`AssistantMessage` that
:meth:`AnthropicModel.respond` returns.
"""

from __future__ import annotations

import copy
import inspect
import json
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Literal, TypeAlias

from .._extras import needs_extra
from ..errors import SchemaError
from ..model import ModelDelta, ModelRequest, ModelSettings
from ..result import ContentPart, ImagePart, TextPart, ToolResult
from ..schema import project_tools
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
from ._caching import ToolOrder, anthropic_breakpoints
from ._clients import LoopClient
from ._clouds import CLOUDS, anthropic_cloud_client, cloud_of
from ._common import StructuredOutput, classify_refusal, prepare_output_schema, replay_parts
from .errors import Target, missing_credentials, timeout_seconds, translated, translated_stream

with needs_extra("anthropic"):
    from anthropic import (
        APIStatusError,
        AsyncAnthropic,
        AsyncAnthropicBedrock,
        AsyncAnthropicVertex,
    )
    from anthropic.resources.messages import AsyncMessages

__all__ = ["DEFAULT_MAX_TOKENS", "AnthropicClient"]

# The SDK clients the adapter speaks through: Anthropic API, Bedrock, Vertex AI.
AnthropicClient: TypeAlias = AsyncAnthropic | AsyncAnthropicBedrock | AsyncAnthropicVertex

# Anthropic's hosted tool search (BM25 over names, descriptions and argument text),
# added when the request defers tools (providers.md 6.6).
TOOL_SEARCH_TOOL = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
# Bedrock has only the regex variant, and Bedrock and Vertex AI take the tool search tool
# behind a beta (GA on the Anthropic API): docs/providers.md, "Clouds".
REGEX_SEARCH_TOOL = {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}
CLOUD_SEARCH_BETA = "tool-search-tool-2025-10-19"
PROVIDER = "anthropic"
ADAPTER = "anthropic-messages"
DEFAULT_MAX_TOKENS = 4096

_log = logging.getLogger("tooldeck.providers.anthropic")

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": StopReason.END_TURN,
    "stop_sequence": StopReason.END_TURN,
    "tool_use": StopReason.TOOL_CALLS,
    "max_tokens": StopReason.MAX_TOKENS,
    "model_context_window_exceeded": StopReason.MAX_TOKENS,
    "pause_turn": StopReason.PAUSE_TURN,
    "refusal": StopReason.REFUSAL,
}

_MODEL_BOUND_BLOCKS = frozenset({"thinking", "redacted_thinking"})

# Body fields the installed SDK takes as keyword arguments of ``messages.create``; any
# other field (``temperature`` in recent SDKs, or a passthrough from settings.extra) is
# sent through ``extra_body`` so the wire body is exactly what we built.
_CREATE_KWARGS = {"model", "max_tokens", "messages"} | frozenset(
    inspect.signature(AsyncMessages.create).parameters
) - {
    "self",
    "stream",
    "extra_headers",
    "extra_query",
    "extra_body",
    "timeout",
}


# -- requests ----------------------------------------------------------------------------


def _searches(tools: Sequence[Any]) -> bool:
    """Whether ``tools`` hold Anthropic's tool search tool (either variant)."""
    return any(
        isinstance(t, Mapping) and str(t.get("type", "")).startswith("tool_search_tool")
        for t in tools
    )


def _tool_choice(settings: ModelSettings) -> dict[str, Any]:
    choice = settings.tool_choice
    if choice == "none":
        return {"type": "none"}
    if choice == "auto":
        mapped: dict[str, Any] = {"type": "auto"}
    elif choice == "required":
        mapped = {"type": "any"}
    else:
        mapped = {"type": "tool", "name": choice}
    if not settings.parallel_tool_calls:
        mapped["disable_parallel_tool_use"] = True
    return mapped


def _image_block(part: ImagePart) -> dict[str, Any]:
    if part.url is not None:
        return {"type": "image", "source": {"type": "url", "url": part.url}}
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": part.mime_type, "data": part.data},
    }


def _content_blocks(parts: Sequence[ContentPart]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, ImagePart):
            blocks.append(_image_block(part))
            continue
        text = part.text  # a JSON part's text was fixed when the tool returned
        if text:  # the API rejects empty text blocks
            blocks.append({"type": "text", "text": text})
    return blocks


def _tool_result(output: ToolOutput) -> dict[str, Any]:
    """One ``tool_result`` block: text content, or text and image blocks."""
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": output.call_id}
    result: ToolResult = output.result
    content: str | list[dict[str, Any]]
    if any(isinstance(p, ImagePart) for p in result.parts):
        content = _content_blocks(result.parts)
    else:
        content = result.text()
    if content:
        block["content"] = content
    if output.is_error:
        block["is_error"] = True
    return block


def _tool_input(call: ToolCall) -> dict[str, Any]:
    """A call's arguments as the object ``tool_use.input`` needs.

    Anthropic's own calls carry an object. Other providers' calls carry a JSON string: it
    is parsed, and only when it is not a JSON object is ``{}`` sent instead (logged: the
    output recorded for that call says what really happened).
    """
    args = call.arguments
    if isinstance(args, Mapping):
        return copy.deepcopy(dict(args))
    if not args.strip():
        return {}
    try:
        value = json.loads(args)
    except ValueError:
        value = None
    if isinstance(value, dict):
        return value
    _log.warning(
        "call %s (%s): arguments are not a JSON object; replayed to Anthropic as input {}",
        call.call_id,
        call.name,
    )
    return {}


class _Messages:
    """Builds the ``messages`` array, merging consecutive turns of the same role."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self._results: list[dict[str, Any]] = []
        self._user: list[dict[str, Any]] = []
        self._plain: str | None = None  # a lone text user message, sent as a string

    def user(self, message: UserMessage) -> None:
        if isinstance(message.content, str):
            if not self._results and not self._user and self._plain is None:
                self._plain = message.content
                return
            self._unplain()
            if message.content:
                self._user.append({"type": "text", "text": message.content})
            return
        self._unplain()
        self._user.extend(_content_blocks(message.content))

    def output(self, output: ToolOutput) -> None:
        self._unplain()
        self._results.append(_tool_result(output))

    def assistant(self, blocks: list[dict[str, Any]]) -> None:
        if not blocks:  # nothing left to send back (e.g. another model's thinking only)
            return
        self._flush_user()
        last = self.messages[-1] if self.messages else None
        if last is not None and last["role"] == "assistant":
            last["content"].extend(blocks)  # the API merges consecutive turns the same way
        else:
            self.messages.append({"role": "assistant", "content": blocks})

    def finish(self) -> list[dict[str, Any]]:
        self._flush_user()
        return self.messages

    def _unplain(self) -> None:
        if self._plain is not None:
            if self._plain:
                self._user.append({"type": "text", "text": self._plain})
            self._plain = None

    def _flush_user(self) -> None:
        content: str | list[dict[str, Any]]
        if self._plain is not None:
            content = self._plain
        else:
            content = self._results + self._user  # tool_result blocks always come first
            if not content:
                return
        self.messages.append({"role": "user", "content": content})
        self._results, self._user, self._plain = [], [], None


# -- responses ---------------------------------------------------------------------------


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, Mapping):
        return Usage(requests=1)

    def count(key: str) -> int:
        value = raw.get(key)
        return value if isinstance(value, int) else 0

    details = raw.get("output_tokens_details")
    thinking = details.get("thinking_tokens") if isinstance(details, Mapping) else None
    return Usage(
        input_tokens=count("input_tokens"),
        output_tokens=count("output_tokens"),
        reasoning_tokens=thinking if isinstance(thinking, int) else 0,
        cache_read_tokens=count("cache_read_input_tokens"),
        cache_write_tokens=count("cache_creation_input_tokens"),
        requests=1,
    )


class AnthropicModel:
    """A :class:`~tooldeck.model.Model` on Anthropic's Messages API.

    ``AnthropicModel("claude-sonnet-4-6")`` reads the key from ``ANTHROPIC_API_KEY``.
    ``max_tokens`` is required by the API (``settings.max_output_tokens`` overrides it per
    request); ``thinking`` is sent as is on every request (e.g. ``{"type": "adaptive"}``
    or ``{"type": "enabled", "budget_tokens": 2048}``); ``server_tools`` (e.g. web search
    or a tool-search tool) are appended after the projected tools. Pass ``client`` to
    reuse a configured :class:`anthropic.AsyncAnthropic`, ``AsyncAnthropicBedrock`` or
    ``AsyncAnthropicVertex`` (left open by :meth:`aclose`); ``cloud="bedrock"`` or
    ``"vertex"`` makes that client from the environment the SDK reads (region, project,
    credentials; docs/providers.md, "Clouds"), and ``model`` is then the cloud's model id.
    ``max_retries`` is the SDK's retry budget; ``timeout`` is seconds per attempt
    (``None``: the SDK's default, 600 s). Without any credential the SDK would find (a
    key, ``ANTHROPIC_API_KEY``, ``ANTHROPIC_AUTH_TOKEN``, a profile) it raises
    :class:`~tooldeck.errors.MissingCredentials` here, before any request.
    """

    provider = PROVIDER
    adapter = ADAPTER
    key_env: tuple[str, ...] = ("ANTHROPIC_API_KEY",)

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 2,
        timeout: float | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        thinking: Mapping[str, Any] | None = None,
        server_tools: Sequence[Mapping[str, Any]] = (),
        client: AnthropicClient | None = None,
        cloud: Literal["bedrock", "vertex"] | None = None,
    ) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.thinking = dict(thinking) if thinking is not None else None
        self.server_tools = [dict(t) for t in server_tools]
        self._tool_order = ToolOrder()
        options: dict[str, Any] = {"max_retries": max_retries}
        if api_key is not None:
            options["api_key"] = api_key
        if base_url is not None:
            options["base_url"] = base_url
        if timeout is not None:
            options["timeout"] = timeout
        self._custom_url = base_url is not None
        if cloud is not None and cloud not in ("bedrock", "vertex"):
            raise ValueError(f"cloud must be 'bedrock' or 'vertex', got {cloud!r}")
        self._cloud = cloud_of(client) if client is not None else CLOUDS.get(cloud or "")
        if self._cloud is not None:
            self.key_env = self._cloud.key_env  # what an auth error points at
        if client is not None:
            self._clients: LoopClient[AnthropicClient] = LoopClient(None, client)
        elif cloud is not None:
            self._clients = LoopClient(anthropic_cloud_client(cloud, model, options))
        else:
            self._clients = LoopClient(lambda: AsyncAnthropic(**options))
            made = self._clients.current
            assert isinstance(made, AsyncAnthropic)
            found = (made.api_key, made.auth_token, getattr(made, "credentials", None))
            if found == (None, None, None):
                raise missing_credentials(Target(PROVIDER, model, key_env=self.key_env))

    @property
    def name(self) -> str:
        return f"{ADAPTER}:{self.model}"

    def hosted_web_search(self, options: Any = None) -> dict[str, Any]:
        """Anthropic's web search server tool (``web_search_20250305``) as a tools entry.

        ``options`` (a :class:`tooldeck.web.HostedSearch`) may set ``max_uses`` and one of
        ``allowed_domains`` / ``blocked_domains``. Its ``server_tool_use`` and
        ``web_search_tool_result`` blocks, and the ``citations`` of the text blocks that
        cite them, are kept and replayed as they came.
        """
        entry: dict[str, Any] = {"type": "web_search_20250305", "name": "web_search"}
        max_uses = getattr(options, "max_uses", None)
        if max_uses:
            entry["max_uses"] = max_uses
        allowed = list(getattr(options, "allowed_domains", ()) or ())
        blocked = list(getattr(options, "blocked_domains", ()) or ())
        if allowed:
            entry["allowed_domains"] = allowed
        elif blocked:
            entry["blocked_domains"] = blocked
        return entry

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model!r})"

    @property
    def client(self) -> AnthropicClient:
        """The SDK client (the one of the loop last used)."""
        return self._clients.current

    async def aclose(self) -> None:
        """Close the HTTP client this model created (a client passed in is left open).

        The SDK's connections belong to the event loop that opened them: close the model
        on that loop when done (or use ``async with AnthropicModel(...) as model``). The
        model stays usable: the next request opens a new client.
        """
        await self._clients.aclose()

    def _error_target(self) -> Target:
        client = self._clients.current
        return Target(
            self._cloud.name if self._cloud is not None else PROVIDER,
            self.model,
            str(client.base_url),
            self.key_env,
            timeout_seconds(client.timeout),
            self._custom_url,
        )

    async def __aenter__(self) -> AnthropicModel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- the Model protocol ---------------------------------------------------------------
    @translated
    async def respond(self, request: ModelRequest) -> AssistantMessage:
        """One non-streaming request; the response is read as raw JSON."""
        body, structured = self.build_request(request)
        kwargs, extra = self._split(body)
        response = await self._clients.get().messages.with_raw_response.create(
            **kwargs, extra_body=extra or None, extra_headers=self._headers(body)
        )
        raw = await response.json()
        if not isinstance(raw, dict):
            raise APIStatusError(
                f"unexpected response body: {raw!r}"[:300],
                response=response.http_response,
                body=raw,
            )
        return self.parse_message(raw, structured)

    @translated_stream
    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | AssistantMessage]:
        """Stream over server-sent events: deltas, then the same message as :meth:`respond`."""
        body, structured = self.build_request(request)
        kwargs, extra = self._split(body)
        assembler = _StreamAssembler()
        client = self._clients.get()
        # The client's own decoder: SSE, or Bedrock's binary event stream.
        decoder = client._make_sse_decoder()
        async with client.messages.with_streaming_response.create(
            **kwargs, stream=True, extra_body=extra or None, extra_headers=self._headers(body)
        ) as response:
            http = response.http_response
            async for sse in decoder.aiter_bytes(http.aiter_bytes()):
                if sse.event == "ping" or not sse.data:
                    continue
                try:
                    event = sse.json()
                except ValueError:
                    _log.warning("skipping an undecodable stream event: %.200s", sse.data)
                    continue
                if sse.event == "error" or (
                    isinstance(event, dict) and event.get("type") == "error"
                ):
                    raise APIStatusError(f"stream error: {event}", response=http, body=event)
                if isinstance(event, dict):
                    for delta in assembler.feed(event):
                        yield delta
        yield self.parse_message(assembler.message(), structured, assembler.partial_inputs)

    # -- request building -------------------------------------------------------------------
    def build_request(
        self, request: ModelRequest
    ) -> tuple[dict[str, Any], StructuredOutput | None]:
        """The request body (without ``stream``), and the structured output if requested.

        Raises :class:`SchemaError` for unusable tool or output schemas; nothing is sent.
        """
        settings = request.settings
        projected, _ = project_tools(request.tools, PROVIDER, deferred=request.deferred)
        tools = copy.deepcopy(projected)  # projections are shared and cached: never hand out
        structured = None
        if settings.output_spec is not None:
            structured = prepare_output_schema(
                settings.output_spec.schema, settings.output_schema_name, "anthropic", PROVIDER
            )
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": settings.max_output_tokens or self.max_tokens,
            "messages": self.build_messages(request.transcript),
        }
        if request.instructions:
            body["system"] = request.instructions
        hosted = [copy.deepcopy(dict(t)) for t in request.hosted]
        all_tools = [*tools, *copy.deepcopy(self.server_tools), *hosted]
        deferred = {t["name"] for t in tools if t.get("defer_loading")}
        if deferred:
            if len(deferred) == len(tools):
                raise SchemaError(
                    "(request)",
                    [
                        "$: every tool is deferred; keep at least one "
                        "eager (the API refuses the request)"
                    ],
                    provider=PROVIDER,
                )
            if not _searches(all_tools):
                on_bedrock = self._cloud is not None and self._cloud.name == "bedrock"
                all_tools.append(dict(REGEX_SEARCH_TOOL if on_bedrock else TOOL_SEARCH_TOOL))
        if all_tools:
            body["tools"] = self._tool_order.apply(all_tools) if settings.cache else all_tools
            body["tool_choice"] = _tool_choice(settings)
        if self.thinking is not None:
            body["thinking"] = copy.deepcopy(self.thinking)
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        if structured is not None:
            body["output_config"] = {
                "format": {"type": "json_schema", "schema": copy.deepcopy(structured.wire_schema)}
            }
        for key, value in settings.extra.items():
            if key == "tools" and isinstance(value, Sequence) and not isinstance(value, str):
                body["tools"] = [*body.get("tools", []), *value]
                body.setdefault("tool_choice", _tool_choice(settings))
            elif key == "output_config" and isinstance(value, Mapping):
                body["output_config"] = {**value, **body.get("output_config", {})}
            else:
                body[key] = value
        names = [t.get("name") for t in body.get("tools", []) if isinstance(t, Mapping)]
        clashes = sorted({n for n in names if isinstance(n, str) and names.count(n) > 1})
        if clashes:
            raise SchemaError(
                "(request)",
                [
                    f"$: two tools named {n!r} in one request (function and server tools)"
                    for n in clashes
                ],
                provider=PROVIDER,
            )
        if settings.cache:
            anthropic_breakpoints(body)
        return body, structured

    def build_messages(self, transcript: Sequence[Item]) -> list[dict[str, Any]]:
        """The ``messages`` array for ``transcript``."""
        builder = _Messages()
        for item in transcript:
            if isinstance(item, UserMessage):
                builder.user(item)
            elif isinstance(item, ToolOutput):
                builder.output(item)
            elif isinstance(item, AssistantMessage):
                builder.assistant(self._assistant_blocks(item))
        return builder.finish()

    def _assistant_blocks(self, message: AssistantMessage) -> list[dict[str, Any]]:
        ours = (message.provider, message.adapter) == (PROVIDER, ADAPTER)
        blocks: list[dict[str, Any]] = []
        # Text that cites web search results goes back with its citations, as received;
        # the results it cites are server blocks, replayed to this adapter too.
        cited = {
            int(c["index"]): c["block"]
            for c in ((message.provider_data or {}).get("cited_text") or ())
            if ours and isinstance(c, Mapping)
        }
        kept = {id(p) for p in replay_parts(message, PROVIDER, ADAPTER, self.model)}
        for index, part in enumerate(message.parts):
            if id(part) not in kept:
                continue
            if isinstance(part, TextPart):
                original = cited.get(index)
                if isinstance(original, Mapping) and original.get("text") == part.text:
                    blocks.append(copy.deepcopy(dict(original)))
                elif part.text:  # the API rejects empty text blocks
                    blocks.append({"type": "text", "text": part.text})
            elif isinstance(part, ToolCall):
                original = (part.provider_data or {}).get("block") if ours else None
                if isinstance(original, Mapping) and original.get("id") == part.call_id:
                    blocks.append(copy.deepcopy(dict(original)))  # as received (caller...)
                else:
                    blocks.append(
                        {
                            "type": "tool_use",
                            "id": part.call_id,
                            "name": part.name,
                            "input": _tool_input(part),
                        }
                    )
            else:
                blocks.append(copy.deepcopy(part.data))  # verbatim, never translated
        return blocks

    def _headers(self, body: Mapping[str, Any]) -> dict[str, str] | None:
        """The cloud's beta header when the request carries a tool search tool.

        Added to the client's own ``anthropic-beta`` (if any); Bedrock's SDK client moves
        the header into the body (``anthropic_beta``), where InvokeModel reads it.
        """
        if self._cloud is None or not _searches(body.get("tools") or ()):
            return None
        client = self._clients.current
        mine = str(client.default_headers.get("anthropic-beta") or "")
        betas = [b for b in mine.split(",") if b.strip()]
        if CLOUD_SEARCH_BETA not in betas:
            betas.append(CLOUD_SEARCH_BETA)
        return {"anthropic-beta": ",".join(betas)}

    @staticmethod
    def _split(body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        kwargs = {k: v for k, v in body.items() if k in _CREATE_KWARGS}
        extra = {k: v for k, v in body.items() if k not in _CREATE_KWARGS}
        return kwargs, extra

    # -- response parsing -----------------------------------------------------------------
    def parse_message(
        self,
        raw: Mapping[str, Any],
        structured: StructuredOutput | None = None,
        partial_inputs: Mapping[str, str] | None = None,
    ) -> AssistantMessage:
        """An :class:`AssistantMessage` from a raw Messages API response body.

        ``partial_inputs`` maps a ``tool_use`` id to its streamed input when that input was
        not complete JSON (a truncated stream); such calls keep the raw text as arguments.
        """
        partial_inputs = partial_inputs or {}
        raw_stop = raw.get("stop_reason")
        stop = StopReason.ERROR  # unknown or missing: the raw value is in provider_data
        if isinstance(raw_stop, str):
            stop = _STOP_REASONS.get(raw_stop, StopReason.ERROR)
        # Calls from a response cut off at its token limit, or from a stream that ended
        # before its stop reason, may be half-written: they are marked and never executed.
        truncated = stop is StopReason.MAX_TOKENS or raw_stop is None
        refused = stop is StopReason.REFUSAL
        parts: list[AssistantPart] = []
        cited: list[dict[str, Any]] = []  # text blocks with citations, kept to replay
        for block in raw.get("content") or []:
            part = self._part(block, truncated, partial_inputs)
            if part is None or (refused and isinstance(part, TextPart)):
                continue  # a refusal keeps no free text
            if isinstance(part, TextPart) and isinstance(block, Mapping) and block.get("citations"):
                cited.append({"index": len(parts), "block": copy.deepcopy(dict(block))})
            parts.append(part)

        provider_data: dict[str, Any] = {"stop_reason": raw_stop}
        if cited:
            provider_data["cited_text"] = cited
        if raw.get("stop_sequence") is not None:
            provider_data["stop_sequence"] = raw["stop_sequence"]
        if raw.get("model") is not None and raw.get("model") != self.model:
            provider_data["response_model"] = raw["model"]
        refusal = None
        if refused:
            details = raw.get("stop_details")
            category = details.get("category") if isinstance(details, Mapping) else None
            category = category if isinstance(category, str) else None
            refusal = classify_refusal(category=category)
            provider_data["stop_details"] = {"type": "refusal", "category": category}

        value: Any = None
        if structured is not None:
            value, stop = structured.answer(parts, stop, provider_data)

        response_id = raw.get("id")
        return AssistantMessage(
            parts=parts,
            stop_reason=stop,
            refusal=refusal,
            usage=_usage(raw.get("usage")),
            provider=PROVIDER,
            adapter=ADAPTER,
            model=self.model,
            response_id=response_id if isinstance(response_id, str) else None,
            provider_data=provider_data,
            structured=value,
        )

    def _part(
        self, block: Any, truncated: bool, partial_inputs: Mapping[str, str]
    ) -> AssistantPart | None:
        if not isinstance(block, Mapping):
            _log.warning("skipping a content block that is not an object: %.200r", block)
            return None
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            return TextPart(text if isinstance(text, str) else "")
        if kind == "tool_use":
            call_id = str(block.get("id", ""))
            raw_input = block.get("input")
            arguments: str | dict[str, Any]
            if call_id in partial_inputs:
                arguments = partial_inputs[call_id]
            else:
                arguments = dict(raw_input) if isinstance(raw_input, Mapping) else {}
            return ToolCall(
                call_id,
                str(block.get("name", "")),
                arguments,
                incomplete=truncated,
                provider_data={"block": dict(block)},
            )
        kind = kind if isinstance(kind, str) else "unknown"
        return OpaqueItem(
            PROVIDER,
            ADAPTER,
            self.model,
            kind,
            dict(block),
            model_bound=kind in _MODEL_BOUND_BLOCKS,
        )


class _StreamAssembler:
    """Rebuilds the response body from stream events, yielding deltas on the way."""

    def __init__(self) -> None:
        self._message: dict[str, Any] = {"content": [], "usage": {}}
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, list[str]] = {}
        self._calls: dict[int, int] = {}  # block index -> the call's index among the calls
        self.partial_inputs: dict[str, str] = {}

    def feed(self, event: Mapping[str, Any]) -> list[ModelDelta]:
        kind = event.get("type")
        if kind == "message_start":
            start = event.get("message")
            if isinstance(start, Mapping):
                self._message = copy.deepcopy(dict(start))
                self._message.setdefault("content", [])
                if not isinstance(self._message.get("usage"), dict):
                    self._message["usage"] = {}
            return []
        if kind == "content_block_start":
            return self._start(event)
        if kind == "content_block_delta":
            return self._delta(event)
        if kind == "content_block_stop":
            self._stop(event)
            return []
        if kind == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, Mapping):
                for key, value in delta.items():
                    if value is not None or key not in self._message:
                        self._message[key] = value
            usage = event.get("usage")
            if isinstance(usage, Mapping):
                for key, value in usage.items():
                    if value is not None:
                        self._message["usage"][key] = value
        return []  # message_stop and unknown events carry nothing to keep

    def _start(self, event: Mapping[str, Any]) -> list[ModelDelta]:
        index, block = event.get("index"), event.get("content_block")
        if not isinstance(index, int) or not isinstance(block, Mapping):
            return []
        self._blocks[index] = copy.deepcopy(dict(block))
        if block.get("type") == "tool_use":
            name, call_id = block.get("name"), block.get("id")
            call = self._calls.setdefault(index, len(self._calls))
            return [ModelDelta("tool_call_start", call_id=call_id, name=name, index=call)]
        return []

    def _delta(self, event: Mapping[str, Any]) -> list[ModelDelta]:
        index, delta = event.get("index"), event.get("delta")
        if not isinstance(index, int) or not isinstance(delta, Mapping):
            return []
        block = self._blocks.setdefault(index, {"type": "text", "text": ""})
        kind = delta.get("type")
        if kind == "text_delta":
            text = str(delta.get("text", ""))
            block["text"] = str(block.get("text") or "") + text
            return [ModelDelta("text", text)] if text else []
        if kind == "input_json_delta":
            piece = str(delta.get("partial_json", ""))
            self._json.setdefault(index, []).append(piece)
            if block.get("type") == "tool_use" and piece and index in self._calls:
                return [
                    ModelDelta(
                        "tool_call",
                        piece,
                        call_id=block.get("id"),
                        name=block.get("name"),
                        index=self._calls[index],
                    )
                ]
            return []
        if kind == "thinking_delta":
            text = str(delta.get("thinking", ""))
            block["thinking"] = str(block.get("thinking") or "") + text
            return [ModelDelta("reasoning", text)] if text else []
        if kind == "signature_delta":
            block["signature"] = str(block.get("signature") or "") + str(delta.get("signature", ""))
            return []
        if kind == "citations_delta":
            citations = block.get("citations")
            if not isinstance(citations, list):
                citations = block["citations"] = []
            citations.append(delta.get("citation"))
            return []
        _log.debug("ignoring an unknown stream delta %r", kind)
        return []

    def _stop(self, event: Mapping[str, Any]) -> None:
        index = event.get("index")
        if not isinstance(index, int) or index not in self._json:
            return
        text = "".join(self._json.pop(index))
        block = self._blocks.get(index)
        if block is None or not text.strip():
            return
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if isinstance(value, dict):
            block["input"] = value
            return
        block["input"] = {}  # cut off mid-object (max_tokens): keep the text on the call
        if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
            self.partial_inputs[block["id"]] = text

    def message(self) -> dict[str, Any]:
        for index in list(self._json):  # blocks the stream never closed
            self._stop({"index": index})
        message = dict(self._message)
        message["content"] = [
            *message.get("content", []),
            *(self._blocks[i] for i in sorted(self._blocks)),
        ]
        return message
