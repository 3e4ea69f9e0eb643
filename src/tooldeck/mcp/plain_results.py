"""The common ``tools/call`` result, taken from the wire without the SDK's models.

Most results are text blocks and nothing else: ``{"content": [{"type": "text", "text":
...}, ...], "isError": false}``. For those, :func:`plain_texts` checks the raw answer
(as :func:`json.loads` gave it) against exactly that shape, and :func:`plain_tool_result`
makes the :class:`~tooldeck.result.ToolResult` that
:func:`~.results.call_tool_result_to_tool_result` makes of the SDK's validated model of
it: the same content, ``is_error`` and details (``details["mcp"]``: the model's
``model_dump(mode="json", by_alias=True, exclude_none=True)``, keys in its order),
without the two validations, the dump and the result's JSON copy of its details
(tests/test_plain_results.py compares the two paths on valid and hostile answers).

Anything else (another block type, a block with more keys, ``structuredContent``,
an ``isError`` that is not a bool, text with lone surrogates, a ``resultType``
the negotiated version would check) is left to the SDK's models, as before.
"""

from __future__ import annotations

from typing import Any

from ..result import TextPart, ToolResult, made_result

__all__ = ["plain_texts", "plain_tool_result"]

_TEXT = "text"
_SHAPE = frozenset({"content", "isError", "resultType", "_meta"})
_SCALARS = (str, int, bool, type(None))


def _clean(text: str) -> bool:
    """Text a result keeps as it is: UTF-8 can carry it (no lone surrogates)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _plain_json(value: Any, depth: int = 0) -> bool:
    """Whether the SDK's JSON dump of ``value`` (from :func:`json.loads`) is ``value``
    itself: no float that is not finite (dumped as null), no lone surrogate, not deep."""
    kind = type(value)
    if kind is str:
        return _clean(value)
    if kind is float:
        return bool(value - value == 0.0)
    if kind in _SCALARS:
        return True
    if depth > 8:
        return False
    if kind is dict:
        return all(_clean(k) and _plain_json(v, depth + 1) for k, v in value.items())
    if kind is list:
        return all(_plain_json(v, depth + 1) for v in value)
    return False


def plain_texts(raw: dict[str, Any], result_type_checked: bool) -> list[str] | None:
    """The texts of ``raw`` (a ``tools/call`` result off the wire) when it is text blocks
    only (see the module docstring), else ``None``. ``result_type_checked``: the
    negotiated version has ``resultType`` (2026-07-28: it must be ``"complete"``); an
    older one drops the key unread."""
    if not raw.keys() <= _SHAPE:
        return None
    if result_type_checked and type(raw.get("resultType")) is not str:
        return None
    if result_type_checked and raw["resultType"] != "complete":
        return None
    is_error = raw.get("isError", False)
    if type(is_error) is not bool:
        return None
    meta = raw.get("_meta")
    if meta is not None and (type(meta) is not dict or not _plain_json(meta)):
        return None
    blocks = raw.get("content")
    if type(blocks) is not list:
        return None
    texts: list[str] = []
    for block in blocks:
        if type(block) is not dict or len(block) != 2 or block.get("type") != _TEXT:
            return None
        text = block.get("text")
        if type(text) is not str or type(block["type"]) is not str or not _clean(text):
            return None
        texts.append(text)
    return texts


def plain_tool_result(
    texts: list[str], is_error: bool, meta: dict[str, Any] | None, server: str, tool: str
) -> ToolResult:
    """What :func:`~.results.call_tool_result_to_tool_result` makes of the SDK's model
    of a plain result (:func:`plain_texts`) with these texts and ``_meta`` (handed over:
    kept as it is)."""
    content: str | tuple[TextPart, ...]
    if not texts:
        content, text = "", ""
    elif len(texts) == 1:
        content = text = texts[0]
    else:
        content = tuple(TextPart(t) for t in texts)
        text = "\n".join(texts)
    mcp: dict[str, Any] = {} if meta is None else {"_meta": meta}
    mcp |= {
        "content": [{"type": _TEXT, "text": t} for t in texts],
        "isError": is_error,
        "resultType": "complete",
    }
    details = {"mcp": mcp, "representation": "content", "server": server, "tool": tool}
    return made_result(content, text, details, is_error)
