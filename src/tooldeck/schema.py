"""Schema projection: a tool's JSON Schema as each provider's tools-array entry.

``project(tool, provider)`` decides strictness per tool and per provider and returns a
:class:`Projection` carrying the entry, the decision and the reason for it.
``project_tools(tools, provider)`` projects a whole request: it enforces Anthropic's
per-request strict limits and groups OpenAI Responses tools into namespaces.

Strictness (see ``_strict.py`` for the rules):

- ``strict=True``: convert to the provider's strict subset, or raise :class:`SchemaError`
  listing every incompatibility, before any network call;
- ``strict=None``: strict when the schema converts without losing a constraint,
  otherwise non-strict with the reason recorded;
- ``strict=False``: the schema is sent as it is, explicitly non-strict.

Projections are cached on the tool, so a warm projection is a dictionary lookup. The
returned entries are shared: read them, copy them, never mutate them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ._strict import Dialect, StrictConversion, convert
from .errors import SchemaError
from .tools import Tool

__all__ = [
    "ANTHROPIC_MAX_OPTIONAL_PARAMS",
    "ANTHROPIC_MAX_STRICT_TOOLS",
    "ANTHROPIC_MAX_UNION_PARAMS",
    "PROVIDERS",
    "Provider",
]

Provider: TypeAlias = Literal["openai-responses", "openai-chat", "anthropic"]
PROVIDERS: tuple[Provider, ...] = ("openai-responses", "openai-chat", "anthropic")

ANTHROPIC_MAX_STRICT_TOOLS = 20
ANTHROPIC_MAX_OPTIONAL_PARAMS = 24
ANTHROPIC_MAX_UNION_PARAMS = 16


@dataclass(frozen=True, slots=True)
class Projection:
    """One tool as one provider will see it.

    ``entry`` is the tools-array entry; ``strict`` the decision; ``reason`` says why the
    tool is not strict (or ``None``); ``changes`` lists what the strict conversion
    rewrote, including constraints moved into descriptions.
    """

    tool: str
    provider: Provider
    entry: dict[str, Any]
    strict: bool
    reason: str | None
    changes: tuple[str, ...]
    optional_params: int = 0
    union_params: int = 0

    @property
    def parameters(self) -> dict[str, Any]:
        """The schema inside the entry."""
        key = "input_schema" if self.provider == "anthropic" else "parameters"
        holder = self.entry["function"] if self.provider == "openai-chat" else self.entry
        params: dict[str, Any] = holder[key]
        return params


def _check_provider(provider: str) -> Provider:
    if provider not in PROVIDERS:
        raise ValueError(f"unknown provider {provider!r}; expected one of {', '.join(PROVIDERS)}")
    return provider


def _entry(
    tool: Tool, provider: Provider, parameters: dict[str, Any], strict: bool, defer: bool
) -> dict[str, Any]:
    if provider == "openai-responses":
        entry: dict[str, Any] = {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": parameters,
            "strict": strict,
        }
        if defer:
            entry["defer_loading"] = True
        return entry
    if provider == "openai-chat":
        return {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": parameters,
                "strict": strict,
            },
        }
    entry = {"name": tool.name, "description": tool.description, "input_schema": parameters}
    if strict:
        entry["strict"] = True
    if defer:
        entry["defer_loading"] = True
    return entry


def _decide(tool: Tool, provider: Provider, strict: bool | None) -> Projection:
    schema = dict(tool.schema)
    if strict is False:
        return Projection(
            tool.name,
            provider,
            _entry(tool, provider, schema, False, False),
            False,
            "strict=False on the tool",
            (),
        )
    dialect: Dialect = "anthropic" if provider == "anthropic" else "openai"
    conversion: StrictConversion = convert(tool.schema, dialect)
    if strict is True:
        if conversion.incompatible:
            raise SchemaError(tool.name, conversion.incompatible, provider=provider)
        assert conversion.schema is not None
        changes = tuple(conversion.changes + conversion.lossy)
        return Projection(
            tool.name,
            provider,
            _entry(tool, provider, conversion.schema, True, False),
            True,
            None,
            changes,
            conversion.optional_params,
            conversion.union_params,
        )
    blockers = conversion.incompatible + conversion.lossy
    if blockers:
        reason = "not strict-compatible: " + "; ".join(blockers)
        return Projection(
            tool.name, provider, _entry(tool, provider, schema, False, False), False, reason, ()
        )
    assert conversion.schema is not None
    return Projection(
        tool.name,
        provider,
        _entry(tool, provider, conversion.schema, True, False),
        True,
        None,
        tuple(conversion.changes),
        conversion.optional_params,
        conversion.union_params,
    )


def project(
    tool: Tool, provider: Provider | str, *, strict: bool | None = None, defer: bool = False
) -> Projection:
    """Project ``tool`` for ``provider`` (cached per tool, provider and options).

    ``strict`` overrides the tool's own setting when given. ``defer=True`` marks the
    entry ``defer_loading`` (OpenAI Responses and Anthropic; tool search decides when).
    """
    prov = _check_provider(provider)
    wanted = tool.strict if strict is None else strict
    key = (prov, wanted, defer)
    cached: Projection | None = tool._projections.get(key)
    if cached is not None:
        return cached
    projection = _decide(tool, prov, wanted)
    if defer and prov != "openai-chat":
        projection = _with_entry(projection, {**projection.entry, "defer_loading": True})
    tool._projections[key] = projection
    return projection


def _with_entry(p: Projection, entry: dict[str, Any]) -> Projection:
    return Projection(
        p.tool, p.provider, entry, p.strict, p.reason, p.changes, p.optional_params, p.union_params
    )


def _downgrade(tool: Tool, p: Projection, why: str, defer: bool) -> Projection:
    plain = project(tool, p.provider, strict=False, defer=defer)
    return Projection(p.tool, p.provider, plain.entry, False, why, (), 0, 0)


def _anthropic_budget(
    tools: Sequence[Tool], projections: list[Projection], deferred: set[str]
) -> list[Projection]:
    """Apply Anthropic's per-request strict limits: explicit strict first, then auto."""
    strict_count = optional = union = 0
    problems: list[str] = []
    result = list(projections)
    order = sorted(range(len(tools)), key=lambda i: tools[i].strict is not True)
    for i in order:
        p = result[i]
        if not p.strict:
            continue
        fits = (
            strict_count + 1 <= ANTHROPIC_MAX_STRICT_TOOLS
            and optional + p.optional_params <= ANTHROPIC_MAX_OPTIONAL_PARAMS
            and union + p.union_params <= ANTHROPIC_MAX_UNION_PARAMS
        )
        if fits:
            strict_count += 1
            optional += p.optional_params
            union += p.union_params
            continue
        why = (
            f"Anthropic per-request strict limits ({ANTHROPIC_MAX_STRICT_TOOLS} tools, "
            f"{ANTHROPIC_MAX_OPTIONAL_PARAMS} optional and {ANTHROPIC_MAX_UNION_PARAMS} "
            f"union parameters) already used by earlier tools"
        )
        if tools[i].strict is True:
            problems.append(f"{p.tool}: {why}")
        else:
            result[i] = _downgrade(tools[i], p, why, p.tool in deferred)
    if problems:
        raise SchemaError("(request)", problems, provider="anthropic")
    return result


def project_tools(
    tools: Iterable[Tool], provider: Provider | str, *, deferred: Iterable[str] = ()
) -> tuple[list[dict[str, Any]], list[Projection]]:
    """Project every tool of one request; returns ``(tools_array, projections)``.

    For OpenAI Responses, tools that share a ``namespace`` are grouped into one
    ``{"type": "namespace"}`` entry placed where the first of them stood. For Anthropic,
    the per-request strict limits are enforced. Names listed in ``deferred`` carry
    ``defer_loading``.
    """
    prov = _check_provider(provider)
    tool_list = list(tools)
    defer_set = set(deferred)
    seen: set[str] = set()
    for t in tool_list:
        if t.name in seen:
            raise SchemaError(t.name, ["$: two tools with this name in one request"], provider=prov)
        seen.add(t.name)
    projections = [project(t, prov, defer=t.name in defer_set) for t in tool_list]
    if prov == "anthropic":
        projections = _anthropic_budget(tool_list, projections, defer_set)
    if prov != "openai-responses":
        return [p.entry for p in projections], projections

    entries: list[dict[str, Any]] = []
    groups: dict[str, dict[str, Any]] = {}
    for t, p in zip(tool_list, projections, strict=True):
        if t.namespace is None:
            entries.append(p.entry)
            continue
        group = groups.get(t.namespace)
        if group is None:
            group = {"type": "namespace", "name": t.namespace, "description": "", "tools": []}
            groups[t.namespace] = group
            entries.append(group)
        if not group["description"] and t.namespace_description:
            group["description"] = t.namespace_description
        group["tools"].append(p.entry)
    missing = [name for name, g in groups.items() if not g["description"]]
    if missing:
        raise SchemaError(
            ", ".join(missing),
            [
                f"$: namespace {n!r} needs a namespace_description on one of its tools"
                for n in missing
            ],
            provider=prov,
        )
    return entries, projections
