"""``OpenAIResponsesModel``: the OpenAI Responses API (``POST /v1/responses``).

Built on the official ``openai`` SDK (``AsyncOpenAI``), which owns authentication,
retries (with ``retry-after`` headers) and the error classes; this module owns the
mapping between tooldeck's neutral transcript and the Responses wire format.

Stateless by default: every request carries ``store: false``, asks for
``reasoning.encrypted_content`` and re-sends the whole history as input items, plus the
tools array. With ``stateful=True`` (which stores responses) a request chains on the
previous response with ``previous_response_id`` and sends only the new items, whenever
the transcript proves the server holds the rest (:mod:`._responses_chain`); it replays
in full, once, when the server no longer has that response. Replay follows the
provider's rules:

- reasoning items go back verbatim, in their original place, only to the same provider,
  adapter and model (:func:`~tooldeck.providers._common.replay_parts`); with them go the
  original item ids of the message and function-call items. For any other model the
  reasoning is dropped and the calls and text are sent without ids;
- hosted items (tool search, web search, MCP, anything unknown) go back verbatim to this
  adapter whatever the model; they never reach the local dispatcher;
- tool outputs answer their call by ``call_id`` only.

Responses are read as the JSON the API sent (not the SDK's typed models, which coerce
unknown item types), so opaque items are kept exactly as received.

A refusal sets ``stop_reason=REFUSAL`` with a classified reason; the refusal's text is
discarded. A requested structured answer that does not parse or validate turns the
message's stop reason into ``ERROR`` (the reason is in ``provider_data["structured_error"]``)
rather than raising, so the loop can send it back for a retry (:mod:`tooldeck.structured`).
"""

from __future__ import annotations

import copy
import json
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, cast

from .._extras import needs_extra
from ..model import ModelDelta, ModelRequest
from ..result import ContentPart, ImagePart, JsonPart, TextPart, ToolResult
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
from ._caching import ToolOrder, prompt_cache_key
from ._clients import LoopClient
from ._clouds import AZURE, CloudSpec, azure_client, cloud_of
from ._common import (
    StructuredOutput,
    classify_refusal,
    prepare_output_schema,
    replay_parts,
    same_origin,
)
from ._responses_chain import STORED_CONTEXT, Context, find_chain, rejected_previous
from .errors import Target, missing_credentials, timeout_seconds, translated, translated_stream

with needs_extra("openai"):
    from openai import NOT_GIVEN, APIError, APIStatusError, AsyncOpenAI, AsyncStream

PROVIDER = "openai"
ADAPTER = "openai-responses"

_TERMINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")
_MODEL_BOUND_KINDS = frozenset({"reasoning"})
_USER_STATE_KEYS = frozenset({"previous_response_id", "conversation"})

_log = logging.getLogger("tooldeck.providers.openai_responses")


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class OpenAIResponsesModel:
    """A model behind the OpenAI Responses API.

    ``OpenAIResponsesModel("gpt-5.4")`` reads ``OPENAI_API_KEY`` (missing, it raises
    :class:`~tooldeck.errors.MissingCredentials` at once); pass ``client=`` to use a
    prebuilt ``AsyncOpenAI`` (then ``api_key``, ``base_url``, ``max_retries`` and
    ``timeout`` are ignored, and :meth:`aclose` leaves it open). ``max_retries`` is the
    SDK's own retry budget (connection errors, 408, 409, 429, 5xx, honouring
    ``retry-after``); ``timeout`` is seconds per attempt, ``None`` keeping the SDK's
    default (600 s). Errors after those retries are raised as
    :class:`~tooldeck.errors.ProviderError` kinds (:mod:`tooldeck.providers.errors`).
    ``async with OpenAIResponsesModel(...) as model:`` or ``await model.aclose()``
    closes its connections; the model stays usable (it reconnects).

    ``store=False`` (default) keeps every request stateless. ``stateful=True`` chains
    requests with ``previous_response_id`` and sends only the new items (it implies
    ``store=True``; ``store=False`` with it is refused); see docs/providers.md,
    "Stateful Responses". ``reasoning_effort`` and
    ``reasoning_summary`` fill the request's ``reasoning`` object when given.
    ``hosted_tools`` are extra tools-array entries sent as given (``{"type":
    "web_search"}``...); their items come back as opaque parts. When the request defers
    tools, the hosted ``{"type": "tool_search"}`` tool is added so they can be loaded.

    Azure OpenAI: ``client=AsyncAzureOpenAI(...)``, or ``cloud="azure"`` to make one from
    ``AZURE_OPENAI_ENDPOINT`` (or ``base_url``), ``AZURE_OPENAI_API_KEY`` (or ``api_key``)
    and ``OPENAI_API_VERSION``; ``model`` is then the deployment name
    (``/openai/responses?api-version=...``).
    """

    provider = PROVIDER
    adapter = ADAPTER
    key_env = ("OPENAI_API_KEY",)

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 2,
        timeout: float | None = None,
        store: bool | None = None,
        stateful: bool = False,
        reasoning_effort: str | None = None,
        reasoning_summary: str | None = None,
        hosted_tools: Sequence[Mapping[str, Any]] = (),
        client: AsyncOpenAI | None = None,
        cloud: Literal["azure"] | None = None,
    ) -> None:
        if stateful and store is False:
            raise ValueError(
                "stateful=True chains stored responses: drop store=False (stateful implies "
                "store=True)"
            )
        self.model = model
        self.stateful = stateful
        self.store = stateful if store is None else store
        self.reasoning_effort = reasoning_effort
        self.reasoning_summary = reasoning_summary
        self.hosted_tools = [dict(t) for t in hosted_tools]
        self._tool_order = ToolOrder()
        self._client_options: dict[str, Any] = {
            "api_key": api_key,  # None: the SDK reads OPENAI_API_KEY
            "base_url": base_url,
            "max_retries": max_retries,
            "timeout": NOT_GIVEN if timeout is None else timeout,
        }
        self._custom_url = base_url is not None or bool(os.environ.get("OPENAI_BASE_URL"))
        self._cloud: CloudSpec | None = cloud_of(client) if client is not None else None
        make: Callable[[], AsyncOpenAI] = lambda: AsyncOpenAI(**self._client_options)  # noqa: E731
        if client is None and cloud == "azure":
            self._cloud = AZURE
            make = azure_client(model, self._client_options)
        elif client is None and not (api_key or os.environ.get("OPENAI_API_KEY")):
            raise missing_credentials(Target(PROVIDER, model, key_env=self.key_env))
        self._clients = LoopClient(make, client)

    @property
    def name(self) -> str:
        return f"{ADAPTER}:{self.model}"

    @property
    def client(self) -> AsyncOpenAI:
        """The SDK client (the one of the loop last used)."""
        return self._clients.current

    def hosted_web_search(self, options: Any = None) -> dict[str, Any]:
        """The Responses API's own web search, as a tools-array entry.

        ``options`` (a :class:`tooldeck.web.HostedSearch`) may restrict it to
        ``allowed_domains`` (``filters``) and set ``search_context_size``; OpenAI has no
        blocked-domain filter. Its ``web_search_call`` items and the ``url_citation``
        annotations of the answer are kept and replayed as they came.
        """
        entry: dict[str, Any] = {"type": "web_search"}
        allowed = list(getattr(options, "allowed_domains", ()) or ())
        if allowed:
            entry["filters"] = {"allowed_domains": allowed}
        size = getattr(options, "search_context_size", None)
        if size:
            entry["search_context_size"] = size
        return entry

    def _client(self) -> AsyncOpenAI:
        """The client for the running event loop (see :mod:`tooldeck.providers._clients`)."""
        return self._clients.get()

    async def aclose(self) -> None:
        """Close the connections of the client this model made (``client=`` stays open)."""
        await self._clients.aclose()

    async def __aenter__(self) -> OpenAIResponsesModel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _error_target(self) -> Target:
        client = self._clients.current
        cloud = self._cloud
        return Target(
            cloud.name if cloud is not None else PROVIDER,
            self.model,
            str(client.base_url),
            cloud.key_env if cloud is not None else self.key_env,
            timeout_seconds(client.timeout),
            self._custom_url,
        )

    # -- requests -------------------------------------------------------------------

    def build_request(
        self, request: ModelRequest
    ) -> tuple[dict[str, Any], StructuredOutput | None]:
        """The request body (without ``stream``) and the structured-output spec, if any.

        In stateful mode this is the chained body when the transcript allows one.
        Raises :class:`~tooldeck.errors.SchemaError` (a tool or the output schema cannot
        be used) or ``ValueError`` (``tool_choice`` names a tool not in the request)
        before anything is sent.
        """
        prepared = self._prepare(request)
        return prepared.body, prepared.structured

    def _prepare(self, request: ModelRequest) -> _Prepared:
        context = Context([self._entry_items(entry) for entry in request.transcript])
        body, structured = self._full_body(request, context.items)
        stored = body.get("store") is True
        if not (self.stateful and stored) or _USER_STATE_KEYS & body.keys():
            return _Prepared(body, structured, context, stored)
        chain, why = find_chain(request.transcript, context, PROVIDER, ADAPTER, self.model)
        if chain is None:
            if why is not None:
                _log.info("%s: sending the whole transcript: %s", self.name, why)
            return _Prepared(body, structured, context, stored)
        chained = {**body, "input": chain.items, "previous_response_id": chain.previous_response_id}
        return _Prepared(chained, structured, context, stored, replay=body)

    def _full_body(
        self, request: ModelRequest, items: list[dict[str, Any]]
    ) -> tuple[dict[str, Any], StructuredOutput | None]:
        settings = request.settings
        body: dict[str, Any] = {
            "model": self.model,
            "input": items,
            "store": self.store,
            "include": ["reasoning.encrypted_content"],
        }
        if request.instructions is not None:
            body["instructions"] = request.instructions
        tools, _ = project_tools(request.tools, ADAPTER, deferred=request.deferred)
        names = {t.name for t in request.tools}
        if names & set(request.deferred):
            tools.append({"type": "tool_search"})
        tools.extend(self.hosted_tools)
        tools.extend(copy.deepcopy(dict(t)) for t in request.hosted)
        key = prompt_cache_key(settings.cache, self.model, request.instructions)
        if key is not None:
            body["prompt_cache_key"] = key
            tools = self._tool_order.apply(tools)
        if tools:
            body["tools"] = tools
            body["tool_choice"] = _tool_choice(settings.tool_choice, names)
            body["parallel_tool_calls"] = settings.parallel_tool_calls
        if settings.max_output_tokens is not None:
            body["max_output_tokens"] = settings.max_output_tokens
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        reasoning: dict[str, str] = {}
        if self.reasoning_effort is not None:
            reasoning["effort"] = self.reasoning_effort
        if self.reasoning_summary is not None:
            reasoning["summary"] = self.reasoning_summary
        if reasoning:
            body["reasoning"] = reasoning
        structured: StructuredOutput | None = None
        if settings.output_spec is not None:
            structured = prepare_output_schema(
                settings.output_spec.schema, settings.output_schema_name, "openai", ADAPTER
            )
            body["text"] = {
                "format": {
                    "type": "json_schema",
                    "name": structured.name,
                    "schema": structured.wire_schema,
                    "strict": structured.strict,
                }
            }
        body.update(settings.extra)
        return body, structured

    def input_items(self, transcript: Sequence[Item]) -> list[dict[str, Any]]:
        """The transcript as Responses input items, in order."""
        return [item for entry in transcript for item in self._entry_items(entry)]

    def _entry_items(self, entry: Item) -> list[dict[str, Any]]:
        if isinstance(entry, UserMessage):
            return [{"role": "user", "content": _user_content(entry.content)}]
        if isinstance(entry, AssistantMessage):
            return self._assistant_items(entry)
        if isinstance(entry, ToolOutput):
            return [
                {
                    "type": "function_call_output",
                    "call_id": entry.call_id,
                    "output": _tool_output(entry.result),
                }
            ]
        return []

    def _assistant_items(self, message: AssistantMessage) -> list[dict[str, Any]]:
        own = same_origin(message, PROVIDER, ADAPTER, self.model)
        ours = (message.provider, message.adapter) == (PROVIDER, ADAPTER)
        kept = replay_parts(message, PROVIDER, ADAPTER, self.model)
        meta: dict[int, Mapping[str, Any]] = {}
        if ours and message.provider_data:
            for m in message.provider_data.get("messages") or ():
                meta[int(m["start"])] = m
        parts = message.parts
        wanted = [False] * len(parts)
        k = 0
        for i, part in enumerate(parts):
            if k < len(kept) and kept[k] is part:
                wanted[i] = True
                k += 1
        items: list[dict[str, Any]] = []
        i = 0
        while i < len(parts):
            part = parts[i]
            if not wanted[i]:
                i += 1
            elif isinstance(part, TextPart):
                m = meta.get(i)
                count = int(m["count"]) if m else 0
                run = parts[i : i + count]
                if m and count and all(isinstance(p, TextPart) for p in run):
                    texts = [cast(TextPart, p).text for p in run]
                    items.append(_message_item(texts, m, with_id=own))
                    i += count
                    continue
                j = i + 1
                while j < len(parts) and isinstance(parts[j], TextPart) and j not in meta:
                    j += 1
                text = "".join(cast(TextPart, p).text for p in parts[i:j])
                if text:
                    items.append({"role": "assistant", "content": text})
                i = j
            elif isinstance(part, ToolCall):
                items.append(_function_call_item(part, with_id=own))
                i += 1
            else:
                items.append(cast(dict[str, Any], part.data))
                i += 1
        return items

    # -- responses ------------------------------------------------------------------

    def parse_response(
        self, data: Mapping[str, Any], structured: StructuredOutput | None = None
    ) -> AssistantMessage:
        """Map a Responses ``response`` object (as JSON) to an :class:`AssistantMessage`."""
        status = data.get("status") or "completed"
        incomplete = status == "incomplete"
        parts: list[AssistantPart] = []
        messages: list[dict[str, Any]] = []
        refusals: list[str] = []
        has_calls = False
        for raw in data.get("output") or ():
            if not isinstance(raw, Mapping):
                continue
            kind = raw.get("type")
            if kind == "message":
                start = len(parts)
                annotations: list[Any] = []
                for content in raw.get("content") or ():
                    if not isinstance(content, Mapping):
                        continue
                    if content.get("type") == "output_text":
                        parts.append(TextPart(str(content.get("text") or "")))
                        annotations.append(content.get("annotations") or [])
                    elif content.get("type") == "refusal":
                        refusals.append(str(content.get("refusal") or ""))
                if len(parts) > start:
                    info: dict[str, Any] = {"start": start, "count": len(parts) - start}
                    for key in ("id", "status", "phase"):
                        if raw.get(key) is not None:
                            info[key] = raw[key]
                    if any(annotations):
                        info["annotations"] = annotations
                    messages.append(info)
            elif kind == "function_call":
                has_calls = True
                parts.append(_tool_call(raw, incomplete))
            else:
                kind_name = str(kind) if kind else "unknown"
                parts.append(
                    OpaqueItem(
                        PROVIDER,
                        ADAPTER,
                        self.model,
                        kind_name,
                        dict(raw),
                        model_bound=kind_name in _MODEL_BOUND_KINDS,
                    )
                )
        provider_data: dict[str, Any] = {}
        if messages:
            provider_data["messages"] = messages
        if data.get("model") is not None:
            provider_data["response_model"] = data["model"]
        if status != "completed":
            provider_data["status"] = status
        refusal: str | None = None
        if refusals:
            stop = StopReason.REFUSAL
            refusal = classify_refusal(texts=refusals)
        elif status == "completed":
            stop = StopReason.TOOL_CALLS if has_calls else StopReason.END_TURN
        elif incomplete:
            details = data.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, Mapping) else None
            if reason is not None:
                provider_data["incomplete_reason"] = reason
            stop = (
                StopReason.CONTENT_FILTER if reason == "content_filter" else StopReason.MAX_TOKENS
            )
        else:  # failed, cancelled, or a state a final response should not be in
            stop = StopReason.ERROR
            if data.get("error") is not None:
                provider_data["error"] = data["error"]
        value: Any = None
        if structured is not None:
            value, stop = structured.answer(parts, stop, provider_data)
        return AssistantMessage(
            parts=parts,
            stop_reason=stop,
            refusal=refusal,
            usage=_usage(data.get("usage")),
            provider=PROVIDER,
            adapter=ADAPTER,
            model=self.model,
            response_id=data.get("id"),
            provider_data=provider_data or None,
            structured=value,
        )

    # -- the Model protocol ---------------------------------------------------------

    @translated
    async def respond(self, request: ModelRequest) -> AssistantMessage:
        prepared = self._prepare(request)
        raw = await self._send(prepared)
        try:
            data = json.loads(raw.http_response.text)
        except ValueError:
            data = None
        if not isinstance(data, Mapping):
            raise APIError(
                "the Responses API answered with a body that is not a JSON object",
                raw.http_request,
                body=raw.http_response.text,
            )
        return self._finish(self.parse_response(data, prepared.structured), prepared)

    @translated_stream
    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | AssistantMessage]:
        """Stream deltas over SSE, then yield the same message :meth:`respond` returns."""
        prepared = self._prepare(request)
        raw = await self._send(prepared, stream=True)
        # Events parsed as plain JSON: the typed event union coerces unknown types.
        events = raw.parse(to=AsyncStream[object])
        # item id -> (call_id, name, the call's index among the message's calls)
        calls: dict[str, tuple[str | None, str | None, int]] = {}
        done: dict[int, Mapping[str, Any]] = {}
        final: Mapping[str, Any] | None = None
        try:
            async for event in events:
                if not isinstance(event, Mapping):
                    continue
                kind = event.get("type")
                if kind == "response.output_text.delta":
                    yield ModelDelta("text", str(event.get("delta") or ""))
                elif kind == "response.reasoning_summary_text.delta":
                    yield ModelDelta("reasoning", str(event.get("delta") or ""))
                elif kind == "response.output_item.added":
                    item = event.get("item")
                    if isinstance(item, Mapping) and item.get("type") == "function_call":
                        call_id, name, number = item.get("call_id"), item.get("name"), len(calls)
                        calls[str(item.get("id"))] = (call_id, name, number)
                        yield ModelDelta(
                            "tool_call_start", call_id=call_id, name=name, index=number
                        )
                elif kind == "response.function_call_arguments.delta":
                    known = calls.get(str(event.get("item_id")))
                    if known is not None:  # a fragment of no announced call is not shown
                        yield ModelDelta(
                            "tool_call",
                            str(event.get("delta") or ""),
                            call_id=known[0],
                            name=known[1],
                            index=known[2],
                        )
                elif kind == "response.output_item.done":
                    item = event.get("item")
                    index = event.get("output_index")
                    if isinstance(item, Mapping) and isinstance(index, int):
                        done[index] = item
                elif kind in _TERMINAL_EVENTS:
                    response = event.get("response")
                    final = response if isinstance(response, Mapping) else {}
                    break
                elif kind == "error":
                    message = str(event.get("message") or "the response stream reported an error")
                    raise APIError(message, raw.http_request, body=dict(event))
        finally:
            await events.close()
        if final is None:
            raise APIError(
                "the response stream ended before a terminal response event",
                raw.http_request,
                body=None,
            )
        yield self._finish(
            self.parse_response(_merge_output(final, done), prepared.structured), prepared
        )

    # -- stateful chaining ----------------------------------------------------------

    async def _create(self, body: Mapping[str, Any], stream: bool) -> Any:
        """The one SDK call: ``POST /v1/responses`` with ``body``, raw response back."""
        create = self._client().responses.with_raw_response.create
        if stream:
            return await create(**_sdk_kwargs(body), stream=True)
        return await create(**_sdk_kwargs(body))

    async def _send(self, prepared: _Prepared, stream: bool = False) -> Any:
        """Send the (chained) body; when the server refuses its previous response, replay.

        The replay is the whole transcript without ``previous_response_id``, sent once;
        any other error, or an error of the replay itself, goes to the caller as the
        SDK raised it.
        """
        try:
            return await self._create(prepared.body, stream)
        except Exception as exc:
            # the SDK's error, or one that wraps it (raise ... from the SDK's error)
            status = _status_error(exc)
            why = rejected_previous(status.status_code, status.body) if status else None
            if prepared.replay is None or why is None:
                raise
        _log.warning(
            "%s: the server refused previous response %s (%s); sending the whole "
            "transcript (%d items) instead",
            self.name,
            prepared.body.get("previous_response_id"),
            why,
            len(prepared.context.items),
        )
        return await self._create(prepared.replay, stream)

    def _finish(self, message: AssistantMessage, prepared: _Prepared) -> AssistantMessage:
        """``message`` with the digest of its stored context, so a later request can chain."""
        if not prepared.stored or not message.response_id:
            return message
        data = message.provider_data or {}
        digest = prepared.context.digest_with(self._assistant_items(message))
        return replace(message, provider_data={**data, STORED_CONTEXT: digest})


@dataclass(slots=True)
class _Prepared:
    """A request ready to send: the body, and the full replay when the body is chained."""

    body: dict[str, Any]
    structured: StructuredOutput | None
    context: Context  # the whole transcript as replay items (what the digests cover)
    stored: bool  # the request asks the server to store the response
    replay: dict[str, Any] | None = None  # the full body, when ``body`` is chained


# -- helpers -------------------------------------------------------------------------


def _sdk_kwargs(body: Mapping[str, Any]) -> dict[str, Any]:
    """Split a body into the SDK's keyword arguments; unknown keys go in ``extra_body``."""
    known = {
        "model",
        "input",
        "previous_response_id",
        "store",
        "include",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "max_output_tokens",
        "temperature",
        "reasoning",
        "text",
    }
    kwargs: dict[str, Any] = {k: v for k, v in body.items() if k in known}
    extra = {k: v for k, v in body.items() if k not in known}
    if extra:
        kwargs["extra_body"] = extra
    return kwargs


def _status_error(exc: BaseException) -> APIStatusError | None:
    """The SDK's HTTP status error: ``exc`` itself or the error it was raised from."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, APIStatusError):
            return current
        seen.add(id(current))
        current = current.__cause__
    return None


def _tool_choice(choice: str, names: set[str]) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    if choice not in names:
        raise ValueError(f"tool_choice names {choice!r}, which is not among this request's tools")
    return {"type": "function", "name": choice}


def _image(part: ImagePart) -> dict[str, Any]:
    url = part.url if part.url is not None else f"data:{part.mime_type};base64,{part.data}"
    return {"type": "input_image", "image_url": url, "detail": "auto"}


def _content_parts(parts: Sequence[ContentPart]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, (TextPart, JsonPart)):
            out.append({"type": "input_text", "text": part.text})
        else:
            out.append(_image(part))
    return out


def _user_content(content: str | Sequence[ContentPart]) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    return _content_parts(content)


def _tool_output(result: ToolResult) -> str | list[dict[str, Any]]:
    if not isinstance(result.content, str) and any(
        isinstance(p, ImagePart) for p in result.content
    ):
        return _content_parts(result.content)
    return result.text()


def _message_item(texts: list[str], meta: Mapping[str, Any], *, with_id: bool) -> dict[str, Any]:
    item: dict[str, Any]
    if with_id and meta.get("id"):
        annotations = meta.get("annotations") or [[] for _ in texts]
        item = {
            "type": "message",
            "id": meta["id"],
            "role": "assistant",
            "status": meta.get("status") or "completed",
            "content": [
                {"type": "output_text", "text": t, "annotations": a}
                for t, a in zip(texts, annotations, strict=False)
            ],
        }
    else:
        item = {"role": "assistant", "content": "".join(texts)}
    if meta.get("phase") is not None:
        item["phase"] = meta["phase"]
    return item


def _function_call_item(call: ToolCall, *, with_id: bool) -> dict[str, Any]:
    arguments = call.arguments if isinstance(call.arguments, str) else _dumps(call.arguments)
    item: dict[str, Any] = {
        "type": "function_call",
        "call_id": call.call_id,
        "name": call.name,
        "arguments": arguments,
    }
    if call.namespace:
        item["namespace"] = call.namespace
    if with_id and call.item_id:
        item["id"] = call.item_id
        item["status"] = "incomplete" if call.incomplete else "completed"
        if call.provider_data and call.provider_data.get("caller") is not None:
            item["caller"] = call.provider_data["caller"]
    return item


def _tool_call(raw: Mapping[str, Any], response_incomplete: bool) -> ToolCall:
    arguments = raw.get("arguments")
    if not isinstance(arguments, str):
        arguments = "" if arguments is None else _dumps(arguments)
    caller = raw.get("caller")
    return ToolCall(
        call_id=str(raw.get("call_id") or ""),
        name=str(raw.get("name") or ""),
        arguments=arguments,
        item_id=raw.get("id"),
        namespace=raw.get("namespace"),
        incomplete=response_incomplete or raw.get("status") == "incomplete",
        provider_data={"caller": caller} if caller is not None else None,
    )


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, Mapping):
        return Usage(requests=1)
    inputs = raw.get("input_tokens_details") or {}
    outputs = raw.get("output_tokens_details") or {}
    return Usage(
        input_tokens=int(raw.get("input_tokens") or 0),
        output_tokens=int(raw.get("output_tokens") or 0),
        reasoning_tokens=int(outputs.get("reasoning_tokens") or 0),
        cache_read_tokens=int(inputs.get("cached_tokens") or 0),
        cache_write_tokens=int(inputs.get("cache_write_tokens") or 0),
        requests=1,
    )


def _merge_output(
    final: Mapping[str, Any], done: Mapping[int, Mapping[str, Any]]
) -> Mapping[str, Any]:
    """The terminal response with each output item taken from ``output_item.done``.

    The final response normally repeats every item; the ``done`` copies win (they are
    complete), and an item only the final response has is kept from there.
    """
    if not done:
        return final
    output = list(final.get("output") or ())
    merged = {i: item for i, item in enumerate(output)}
    merged.update(done)
    return {**final, "output": [merged[i] for i in sorted(merged)]}
