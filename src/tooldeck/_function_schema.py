"""Turn a typed Python function into a Pydantic parameters model and a description.

Used by :func:`tooldeck.tool`. The docstring (Google, NumPy or Sphinx style, detected
automatically by ``docstring_parser``) gives the tool description and per-parameter
descriptions; ``Annotated[..., Field(description=...)]`` wins over the docstring. A
parameter annotated :class:`~tooldeck.context.ToolContext` is injected at call time and
never appears in the schema.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo

from .context import ToolContext
from .errors import ToolDefinitionError

__all__ = ["FunctionSignature", "inspect_function"]


@dataclass(frozen=True, slots=True)
class FunctionSignature:
    params: type[BaseModel]
    description: str
    context_param: str | None
    is_async: bool


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.replace("-", "_").split("_"))


def _is_context(annotation: Any) -> bool:
    if annotation is ToolContext:
        return True
    if typing.get_origin(annotation) is typing.Annotated:
        return _is_context(typing.get_args(annotation)[0])
    return False


def _has_description(annotation: Any) -> bool:
    if typing.get_origin(annotation) is not typing.Annotated:
        return False
    return any(
        isinstance(meta, FieldInfo) and meta.description for meta in typing.get_args(annotation)
    )


_GOOGLE_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Raises):\s*$", re.M)
_NUMPY_SECTION = re.compile(r"^\s*(Parameters|Returns)\s*\n\s*-{3,}", re.M)


def _parse_docstring(text: str) -> docstring_parser.Docstring:
    """Parse a docstring, naming the style when it is obvious.

    docstring_parser's automatic mode runs every style's parser and keeps the best;
    naming the style when a section header gives it away is about 3x cheaper, which
    matters when thousands of tools are built at start-up.
    """
    if _NUMPY_SECTION.search(text):
        return docstring_parser.parse(text, style=docstring_parser.DocstringStyle.NUMPYDOC)
    if _GOOGLE_SECTION.search(text):
        return docstring_parser.parse(text, style=docstring_parser.DocstringStyle.GOOGLE)
    if ":param " not in text and "@param" not in text:
        return docstring_parser.parse(text, style=docstring_parser.DocstringStyle.GOOGLE)
    return docstring_parser.parse(text)


def inspect_function(fn: Callable[..., Any], tool_name: str) -> FunctionSignature:
    """Build the parameters model and description for ``fn``; raise on unusable signatures."""
    try:
        signature = inspect.signature(fn)
        hints = typing.get_type_hints(fn, include_extras=True)
    except (NameError, TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"tool {tool_name!r}: cannot read the signature: {exc}") from exc

    doc = _parse_docstring(inspect.getdoc(fn) or "")
    param_docs = {p.arg_name: p.description or "" for p in doc.params}
    description = "\n\n".join(
        part for part in (doc.short_description, doc.long_description) if part
    ).strip()

    fields: dict[str, Any] = {}
    context_param: str | None = None
    problems: list[str] = []
    for pname, param in signature.parameters.items():
        annotation = hints.get(pname, Any)
        if _is_context(annotation):
            if context_param is not None:
                problems.append(f"two ToolContext parameters: {context_param!r} and {pname!r}")
            context_param = pname
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            problems.append(f"parameter {pname!r}: *args and **kwargs cannot be described")
            continue
        if param.kind is param.POSITIONAL_ONLY:
            problems.append(f"parameter {pname!r}: positional-only parameters are not supported")
            continue
        if pname.startswith("_"):
            problems.append(f"parameter {pname!r}: names starting with '_' cannot be fields")
            continue
        default: Any = ... if param.default is inspect.Parameter.empty else param.default
        doc_text = param_docs.get(pname, "")
        if isinstance(default, FieldInfo) or _has_description(annotation) or not doc_text:
            fields[pname] = (annotation, default)
        else:
            fields[pname] = (annotation, Field(default, description=doc_text))
    if problems:
        raise ToolDefinitionError(f"tool {tool_name!r}: unusable signature: " + "; ".join(problems))
    try:
        model = create_model(
            f"{_camel(tool_name)}Params",
            __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False),
            **fields,
        )
    except Exception as exc:  # pydantic raises several types for unusable annotations
        raise ToolDefinitionError(
            f"tool {tool_name!r}: parameters cannot be modelled: {exc}"
        ) from exc
    return FunctionSignature(
        params=model,
        description=description,
        context_param=context_param,
        is_async=inspect.iscoroutinefunction(fn),
    )
