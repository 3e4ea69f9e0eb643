"""``GeminiModel``: Gemini's ``generateContent`` / ``streamGenerateContent`` on Google's
official ``google-genai`` SDK.

Requests
    Tools go in one ``functionDeclarations`` entry, each tool's schema projected to the
    JSON Schema subset Gemini takes (``parametersJsonSchema``; what is dropped is told in
    the description and the reason logged: :mod:`tooldeck.providers._gemini_schema`).
    ``tool_choice`` maps to ``toolConfig.functionCallingConfig`` (``AUTO``, ``ANY``,
    ``NONE``, or ``ANY`` with ``allowedFunctionNames``); Gemini has no switch for parallel
    calls, so ``parallel_tool_calls`` is not sent. Instructions go to
    ``systemInstruction``; the output limit, temperature, ``thinkingConfig`` and a
    structured answer (``responseMimeType: application/json`` and ``responseJsonSchema``,
    projected the same way) to ``generationConfig``. Streaming changes only the path
    (``:streamGenerateContent?alt=sse``), never the body.

Transcript
    An assistant message goes back as one ``model`` content whose parts keep their
    order. Parts this model produced go back exactly as received, ``thoughtSignature``
    included (Gemini requires the signatures of its calls back within a turn); thought
    parts and signatures go only to the same provider, adapter and model, and another
    Gemini model gets the calls and text without signatures. Other providers' calls are
    sent as ``functionCall`` parts (their id, name and arguments); their reasoning is
    dropped, never translated. The outputs that follow become one ``user`` content that
    starts with a ``functionResponse`` per call (``{"output": ...}``, or ``{"error": ...}``
    for an error result; the call's id when it had one, and always its name).

The body is built by :mod:`tooldeck.providers.gemini_request`. Responses are read as raw
JSON through the SDK's API client (its transport, auth, base URL, retries and errors),
not through its typed models, so unknown parts and signatures are kept exactly as sent:
:mod:`tooldeck.providers.gemini_response`.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from .._extras import needs_extra
from ..errors import MissingCredentials, ModelConfigError
from ..model import ModelDelta, ModelRequest
from ..tools import Tool
from ..transcript import AssistantMessage, Item
from ._caching import ToolOrder
from ._common import StructuredOutput
from ._gemini_schema import GeminiProjection, project_gemini_tools
from .errors import Target, missing_credentials, translated, translated_stream
from .gemini_request import build_body, build_contents
from .gemini_response import ADAPTER, PROVIDER, StreamAssembler, parse_response

with needs_extra("gemini"):
    from google import genai
    from google.genai import errors as genai_errors
    from google.genai import types as genai_types

__all__ = ["KEY_ENV"]  # GeminiModel is exported by tooldeck.providers

_log = logging.getLogger("tooldeck.providers.gemini")

KEY_ENV = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
DEFAULT_TIMEOUT = 600.0  # seconds per attempt, as the other SDKs; google-genai's is none


class GeminiModel:
    """A :class:`~tooldeck.model.Model` on Gemini's ``generateContent`` API.

    ``GeminiModel("gemini-2.5-flash")`` reads the key from ``GEMINI_API_KEY`` or
    ``GOOGLE_API_KEY`` (as the SDK does; without either it raises
    :class:`~tooldeck.errors.MissingCredentials`, before any request). ``thinking`` is
    sent as ``generationConfig.thinkingConfig`` (e.g. ``{"includeThoughts": True,
    "thinkingBudget": 1024}``); ``safety_settings`` as ``safetySettings``. Pass
    ``client`` to reuse a configured :class:`google.genai.Client` (left open by
    :meth:`aclose`). ``vertex=True`` (or ``GOOGLE_GENAI_USE_VERTEXAI=true``) is Gemini on
    Vertex AI: ``project`` / ``GOOGLE_CLOUD_PROJECT``, ``location`` /
    ``GOOGLE_CLOUD_LOCATION`` (default ``global``), Google's application default
    credentials. ``max_retries`` is the SDK's retry budget (408, 429, 5xx,
    connection errors); ``timeout`` is seconds per attempt.
    """

    provider = PROVIDER
    adapter = ADAPTER
    key_env: tuple[str, ...] = KEY_ENV

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 2,
        timeout: float | None = None,
        max_tokens: int | None = None,
        thinking: Mapping[str, Any] | None = None,
        safety_settings: Sequence[Mapping[str, Any]] = (),
        client: genai.Client | None = None,
        vertex: bool | None = None,
        project: str | None = None,
        location: str | None = None,
    ) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.thinking = dict(thinking) if thinking is not None else None
        self.safety_settings = [dict(s) for s in safety_settings]
        self._tool_order = ToolOrder()  # with cache: tools stay where first sent
        self._custom_url = base_url is not None
        self._timeout = timeout if timeout is not None else DEFAULT_TIMEOUT
        self._owned = client is None
        if client is None:
            options = genai_types.HttpOptions(
                base_url=base_url,
                timeout=max(1, round(self._timeout * 1000)),  # milliseconds
                retry_options=genai_types.HttpRetryOptions(attempts=max_retries + 1),
            )
            if vertex is None:  # the SDK's own switch
                vertex = os.environ.get("GOOGLE_GENAI_USE_VERTEXAI", "").lower() in ("1", "true")
            if vertex:
                client = _vertex_client(model, project, location, options)
            else:
                key = (
                    api_key or os.environ.get("GOOGLE_API_KEY") or os.environ.get("GEMINI_API_KEY")
                )
                if not key:
                    raise missing_credentials(Target(PROVIDER, model, key_env=KEY_ENV))
                client = genai.Client(api_key=key, http_options=options)
        self.client: genai.Client = client
        if client.vertexai:  # what an authentication error points at
            self.key_env = VERTEX_KEY_ENV

    @property
    def name(self) -> str:
        return f"{ADAPTER}:{self.model}"

    @staticmethod
    def declarations(tools: Sequence[Tool]) -> list[GeminiProjection]:
        """How ``tools`` are declared to Gemini: each entry, and the ``reason`` (with the
        ``dropped`` and ``changes`` lists) when it is not the tool's exact schema.
        Raises :class:`SchemaError` for a name Gemini refuses or a duplicate name."""
        return project_gemini_tools(list(tools))

    def __repr__(self) -> str:
        return f"GeminiModel({self.model!r})"

    async def aclose(self) -> None:
        """Close the HTTP connections of the client this model made (one passed in is
        left open). The model stays usable: the SDK opens new ones on the next request."""
        if self._owned:
            await self.client.aio.aclose()

    async def __aenter__(self) -> GeminiModel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _error_target(self) -> Target:
        api = self.client._api_client
        return Target(
            PROVIDER,
            self.model,
            api._http_options.base_url,
            self.key_env,
            self._timeout,
            self._custom_url,
        )

    def _path(self, method: str) -> str:
        model = self.model
        if self.client.vertexai and "/" not in model:
            model = f"publishers/google/models/{model}"
        elif not self.client.vertexai and not model.startswith(("models/", "tunedModels/")):
            model = f"models/{model}"
        return f"{model}:{method}"

    # -- the Model protocol ---------------------------------------------------------------
    @translated
    async def respond(self, request: ModelRequest) -> AssistantMessage:
        """One ``generateContent`` request; the response is read as raw JSON."""
        body, structured = self.build_request(request)
        api = self.client.aio._api_client
        try:
            response = await api.async_request("post", self._path("generateContent"), body)
        except Exception as exc:
            _no_credentials(exc, self.model)
            raise
        try:
            raw = json.loads(response.body) if response.body else {}
        except ValueError:
            raw = None
        if not isinstance(raw, dict):  # a broken proxy or server: the provider failed
            said = f"the answer is not a JSON object: {response.body!r}"[:300]
            raise genai_errors.ServerError(502, {"error": {"message": said}}, None)
        return parse_response(raw, self.model, structured)

    @translated_stream
    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | AssistantMessage]:
        """``streamGenerateContent`` over SSE: deltas, then the message :meth:`respond`
        would return for the same answer."""
        body, structured = self.build_request(request)
        api = self.client.aio._api_client
        assembler = StreamAssembler()
        path = self._path("streamGenerateContent?alt=sse")
        try:
            response = await api._async_request(
                http_request=api._build_request("post", path, body), stream=True
            )
        except Exception as exc:
            _no_credentials(exc, self.model)
            raise
        # The SDK's stream reader, held here so that leaving early (a break, a cancel)
        # closes it, and with it the HTTP response (its ``finally``).
        lines = response._aiter_response_stream()
        try:
            async for line in lines:
                try:
                    data = json.loads(line) if line else None
                except ValueError:
                    _log.warning("skipping an undecodable stream chunk: %.200s", line)
                    continue
                if isinstance(data, dict) and isinstance(data.get("error"), Mapping):
                    code = data["error"].get("code")
                    await genai_errors.APIError.raise_error_async(
                        code if isinstance(code, int) else 500, data, None
                    )
                if isinstance(data, dict):
                    for delta in assembler.feed(data):
                        yield delta
        finally:
            close = getattr(lines, "aclose", None)
            if close is not None:
                await close()
        yield parse_response(assembler.response(), self.model, structured)

    # -- request building -------------------------------------------------------------------
    def build_request(
        self, request: ModelRequest
    ) -> tuple[dict[str, Any], StructuredOutput | None]:
        """The request body (the same for both paths), and the structured output if asked.

        Raises :class:`SchemaError` for unusable tool or output schemas; nothing is sent.
        """
        return build_body(
            request,
            self.model,
            max_tokens=self.max_tokens,
            thinking=self.thinking,
            safety_settings=self.safety_settings,
            order=self._tool_order,
        )

    def build_contents(self, transcript: Sequence[Item]) -> list[dict[str, Any]]:
        """The ``contents`` array for ``transcript``."""
        return build_contents(transcript, self.model)


VERTEX_KEY_ENV = ("GOOGLE_APPLICATION_CREDENTIALS",)


def _vertex_client(
    model: str, project: str | None, location: str | None, options: genai_types.HttpOptions
) -> genai.Client:
    """A Vertex AI client from the SDK's variables; no project is one line."""
    project = project or os.environ.get("GOOGLE_CLOUD_PROJECT")
    location = location or os.environ.get("GOOGLE_CLOUD_LOCATION") or "global"
    if not project:
        raise ModelConfigError(
            f"Gemini on Vertex AI model {model!r}: no project; set GOOGLE_CLOUD_PROJECT "
            "(or pass project=)",
            provider=PROVIDER,
            model=model,
        )
    return genai.Client(vertexai=True, project=project, location=location, http_options=options)


def _no_credentials(exc: BaseException, model: str) -> None:
    """Raise google-auth's "no credentials found" as one line (nothing was sent)."""
    google = sys.modules.get("google.auth.exceptions")
    if google is not None and isinstance(exc, google.DefaultCredentialsError):
        raise MissingCredentials(
            f"Gemini on Vertex AI model {model!r}: no Google credentials found; set "
            "GOOGLE_APPLICATION_CREDENTIALS (or run gcloud auth application-default login)",
            env=VERTEX_KEY_ENV,
            provider=PROVIDER,
            model=model,
        ) from exc
