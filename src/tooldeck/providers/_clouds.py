"""The enterprise clouds: Claude on Amazon Bedrock and Google Vertex AI, OpenAI on Azure.

The wire format is the provider's own (Anthropic Messages on Bedrock's ``/invoke`` and
Vertex's ``:rawPredict``; OpenAI Responses and Chat Completions on Azure's
``/openai/...`` paths), so the adapters stay the same; what differs is the SDK client
(``AsyncAnthropicBedrock``, ``AsyncAnthropicVertex``, ``AsyncAzureOpenAI``), which owns the
cloud's addresses, request signing and credentials. This module builds those clients from
the environment the SDKs document, tells which cloud a given client is for, and names
what an error message should point at (the cloud's credential variables).

Credentials are read by the SDKs: Bedrock by boto3's chain (``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``, ``AWS_PROFILE``, roles; or
``AWS_BEARER_TOKEN_BEDROCK``), signed with SigV4; Vertex by google-auth's application
default credentials (``GOOGLE_APPLICATION_CREDENTIALS``, ``gcloud auth
application-default login``), sent as a Bearer token; Azure from ``AZURE_OPENAI_API_KEY``
(the ``api-key`` header) or ``AZURE_OPENAI_AD_TOKEN``. A credential the SDK cannot find
when it signs the first request becomes :class:`~tooldeck.errors.MissingCredentials`
(:func:`credential_error`), one line naming the variables.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from .._extras import needs_extra, require_extra
from ..errors import MissingCredentials, ModelConfigError

__all__ = [
    "AZURE",
    "BEDROCK",
    "CLOUDS",
    "VERTEX",
    "Cloud",
    "CloudSpec",
    "anthropic_cloud_client",
    "azure_client",
    "cloud_of",
    "credential_error",
]

Cloud: TypeAlias = Literal["bedrock", "vertex", "azure"]


@dataclass(frozen=True, slots=True)
class CloudSpec:
    """What tooldeck says about one cloud: its name, label, credential variables, extra."""

    name: Cloud
    label: str
    key_env: tuple[str, ...]
    settings_env: tuple[str, ...]  # the other variables the SDK reads (region, endpoint...)
    extra: str | None  # the tooldeck extra that installs what its SDK client needs (checked
    # when the model is made: a missing one is MissingExtra, one line naming it)


BEDROCK = CloudSpec(
    "bedrock",
    "Claude on Amazon Bedrock",
    ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK"),
    ("AWS_REGION", "ANTHROPIC_BEDROCK_BASE_URL"),
    "bedrock",
)
VERTEX = CloudSpec(
    "vertex",
    "Claude on Google Vertex AI",
    ("GOOGLE_APPLICATION_CREDENTIALS",),
    ("CLOUD_ML_REGION", "ANTHROPIC_VERTEX_PROJECT_ID", "ANTHROPIC_VERTEX_BASE_URL"),
    "vertex",
)
AZURE = CloudSpec(
    "azure",
    "Azure OpenAI",
    ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN"),
    ("AZURE_OPENAI_ENDPOINT", "OPENAI_API_VERSION"),
    None,
)
CLOUDS: dict[str, CloudSpec] = {c.name: c for c in (BEDROCK, VERTEX, AZURE)}

# The SDKs' base classes of each cloud's clients, by name (never imported here).
_BASES = {"BaseBedrockClient": BEDROCK, "BaseVertexClient": VERTEX, "BaseAzureClient": AZURE}


def cloud_of(client: object) -> CloudSpec | None:
    """The cloud a prebuilt SDK client is for (``None``: the provider's own API)."""
    for cls in type(client).__mro__:
        spec = _BASES.get(cls.__name__)
        if spec is not None and cls.__module__.startswith(("anthropic.", "openai.")):
            return spec
    return None


def _require(spec: CloudSpec) -> None:
    if spec.extra is not None:
        require_extra(spec.extra)


def _built(spec: CloudSpec, model: str, make: Callable[[], Any]) -> Callable[[], Any]:
    """``make``, after one call proving it works (a missing region is one line now).

    The client made for the proof is the first one handed out.
    """
    try:
        first = [make()]
    except ValueError as exc:  # the SDKs' own "no region" / "no endpoint" messages
        said = str(exc).split(". ")[0].rstrip(".")
        raise ModelConfigError(
            f"{spec.label} model {model!r}: {said}; set {spec.settings_env[0]} "
            "(or pass a configured SDK client as client=)",
            provider=spec.name,
            model=model,
        ) from exc

    def factory() -> Any:
        return first.pop() if first else make()

    return factory


def anthropic_cloud_client(
    cloud: Literal["bedrock", "vertex"], model: str, options: dict[str, Any]
) -> Callable[[], Any]:
    """A factory of ``AsyncAnthropicBedrock`` / ``AsyncAnthropicVertex`` clients.

    ``options`` are the SDK client's keyword arguments (``max_retries``, ``timeout``,
    ``base_url``; ``api_key`` is Bedrock's bearer token). Region, project and
    credentials come from the environment, read by the SDK.
    """
    spec = CLOUDS[cloud]
    _require(spec)
    if cloud == "bedrock":
        with needs_extra("bedrock"):
            from anthropic import AsyncAnthropicBedrock

        return _built(spec, model, lambda: AsyncAnthropicBedrock(**options))
    with needs_extra("vertex"):
        from anthropic import AsyncAnthropicVertex

    vertex = {k: v for k, v in options.items() if k != "api_key"}
    token = options.get("api_key")
    if token is not None:  # a Vertex access token given as the key
        vertex["access_token"] = token
    return _built(spec, model, lambda: AsyncAnthropicVertex(**vertex))


def azure_client(model: str, options: dict[str, Any]) -> Callable[[], Any]:
    """A factory of ``AsyncAzureOpenAI`` clients for the deployment ``model``.

    The endpoint comes from ``base_url`` or ``AZURE_OPENAI_ENDPOINT``, the API version
    from ``OPENAI_API_VERSION`` (``api_version`` in ``options``), the key from
    ``AZURE_OPENAI_API_KEY`` or ``AZURE_OPENAI_AD_TOKEN`` (``api_key`` in ``options``).
    """
    with needs_extra("openai"):
        from openai import AsyncAzureOpenAI

    kwargs = {k: v for k, v in options.items() if v is not None and k != "base_url"}
    endpoint = options.get("base_url") or os.environ.get("AZURE_OPENAI_ENDPOINT")
    if not (
        kwargs.get("api_key")
        or os.environ.get("AZURE_OPENAI_API_KEY")
        or os.environ.get("AZURE_OPENAI_AD_TOKEN")
    ):
        raise MissingCredentials(
            f"{AZURE.label} model {model!r}: no API key; set AZURE_OPENAI_API_KEY or "
            "AZURE_OPENAI_AD_TOKEN (or pass api_key=)",
            env=AZURE.key_env,
            provider="azure",
            model=model,
        )
    if not endpoint:
        raise ModelConfigError(
            f"{AZURE.label} model {model!r}: no endpoint; set AZURE_OPENAI_ENDPOINT "
            "(https://RESOURCE.openai.azure.com) or pass base_url=",
            provider="azure",
            model=model,
        )
    kwargs["azure_endpoint"] = endpoint
    return _built(AZURE, model, lambda: AsyncAzureOpenAI(**kwargs))


def credential_error(exc: BaseException, spec: CloudSpec, model: str) -> MissingCredentials | None:
    """A cloud SDK's "no credentials" exception as one line; ``None`` for anything else."""
    botocore = sys.modules.get("botocore.exceptions")
    google = sys.modules.get("google.auth.exceptions")
    found = (
        (botocore is not None and isinstance(exc, botocore.NoCredentialsError))
        or (google is not None and isinstance(exc, google.DefaultCredentialsError))
        # the anthropic SDK's own words when boto3 / google-auth found nothing
        or (isinstance(exc, RuntimeError) and str(exc).startswith("Could not resolve"))
    )
    if not found:
        return None
    where = " or ".join(spec.key_env)
    return MissingCredentials(
        f"{spec.label} model {model!r}: no credentials found; set {where} "
        "(the cloud SDK's usual sources are read)",
        env=spec.key_env,
        provider=spec.name,
        model=model,
    )
