"""The registry: a definitions file is the single source of truth for native tools.

``definitions.json`` declares every native tool (name, description, input schema,
category and the optional contract fields). Category modules declare their handlers
explicitly in a :class:`Handlers` table; :meth:`ToolRegistry.load` binds handlers to
definitions by name, for exactly the category modules it is given: no package scanning,
no reflection beyond reading each listed module's ``handlers`` table.

Loading checks everything and reports **all** problems at once in one
:class:`RegistryError`: the file against its published JSON Schema
(``tooldeck/schemas/definitions.schema.json``), names, duplicates, each input schema,
handlers without definitions and definitions without handlers, and each handler's
signature against its schema. A broken file never half-loads.

Handlers receive the validated arguments as keyword arguments; a parameter annotated
:class:`~tooldeck.context.ToolContext` receives the call's context.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import string
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import jsonschema_rs

from ._compile import compile_schema, located
from ._config_files import ConfigFileError, load_json
from .assembly import Source, Toolset, TurnContext, assemble
from .context import ToolContext
from .errors import TooldeckError
from .tools import TOOL_NAME_PATTERN, Tool

__all__ = ["DEFINITIONS_SCHEMA_PATH", "Definition", "RegistryCategory", "RegistryError"]

DEFINITIONS_SCHEMA_PATH = Path(__file__).parent / "schemas" / "definitions.schema.json"
F = TypeVar("F", bound=Callable[..., Any])

_JSON_TYPES: dict[Any, set[str]] = {
    str: {"string"},
    int: {"integer"},
    float: {"number", "integer"},
    bool: {"boolean"},
    list: {"array"},
    dict: {"object"},
}


class RegistryError(TooldeckError):
    """A definitions file or its handlers are unusable; ``problems`` lists every one."""

    def __init__(self, source: str, problems: Sequence[str]):
        self.source = source
        self.problems = tuple(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{source}: {len(self.problems)} problem(s):\n{lines}")


class Handlers:
    """A category module's explicit handler table.

    ``handlers = Handlers("files")`` at module level, then ``@handlers("read_document")``
    (or ``@handlers()`` to use the function's name) on each handler.
    """

    def __init__(self, category: str):
        self.category = category
        self.table: dict[str, Callable[..., Any]] = {}
        self.duplicates: list[str] = []

    def __call__(self, name: str | None = None) -> Callable[[F], F]:
        def bind(fn: F) -> F:
            self.add(name or fn.__name__, fn)
            return fn

        return bind

    def add(self, name: str, fn: Callable[..., Any]) -> None:
        if name in self.table:
            self.duplicates.append(name)
        self.table[name] = fn

    def __repr__(self) -> str:
        return f"Handlers({self.category!r}, {sorted(self.table)})"


@dataclass(frozen=True, slots=True)
class Definition:
    """One entry of the definitions file, as loaded."""

    name: str
    description: str
    category: str
    input_schema: Mapping[str, Any]
    raw: Mapping[str, Any]

    @property
    def requires(self) -> tuple[str, ...]:
        return tuple(self.raw.get("requires", ()))


@functools.cache
def _load_schema() -> Any:
    return jsonschema_rs.validator_for(json.loads(DEFINITIONS_SCHEMA_PATH.read_text()))


def _where(index: int, name: Any, path: Sequence[Any] = ()) -> str:
    label = f"tools[{index}]" + (f" ({name})" if isinstance(name, str) else "")
    return label + "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in path)


def _context_param(sig: inspect.Signature, hints: Mapping[str, Any]) -> str | None:
    for pname in sig.parameters:
        if hints.get(pname) is ToolContext:
            return pname
    return None


def _annotation_types(annotation: Any) -> set[str] | None:
    """JSON types an annotation admits, or None when it cannot be checked simply."""
    origin = typing.get_origin(annotation) or annotation
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        kinds: set[str] = set()
        for arg in typing.get_args(annotation):
            if arg is type(None):
                kinds.add("null")
                continue
            sub = _annotation_types(arg)
            if sub is None:
                return None
            kinds |= sub
        return kinds
    return set(_JSON_TYPES[origin]) if origin in _JSON_TYPES else None


def signature_problems(name: str, fn: Callable[..., Any], schema: Mapping[str, Any]) -> list[str]:
    """Where ``fn``'s parameters do not fit ``schema`` (what can be checked statically)."""
    try:
        sig = inspect.signature(fn)
        hints = typing.get_type_hints(fn)
    except (NameError, TypeError, ValueError) as exc:
        return [f"{name}: cannot read the handler's signature: {exc}"]
    problems: list[str] = []
    props: Mapping[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    ctx_param = _context_param(sig, hints)
    has_kwargs = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    params = {
        n: p
        for n, p in sig.parameters.items()
        if n != ctx_param and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    }
    for pname, param in params.items():
        if param.kind is param.POSITIONAL_ONLY:
            problems.append(f"{name}: handler parameter {pname!r} is positional-only")
        if pname not in props:
            problems.append(f"{name}: handler parameter {pname!r} is not in the input schema")
            continue
        if param.default is inspect.Parameter.empty and pname not in required:
            problems.append(
                f"{name}: handler parameter {pname!r} has no default but the schema does not "
                "require it"
            )
        sub = props[pname]
        if isinstance(sub, Mapping):
            if (
                "default" in sub
                and param.default is not inspect.Parameter.empty
                and sub["default"] != param.default
            ):
                problems.append(
                    f"{name}: default of {pname!r} is {sub['default']!r} in the schema but "
                    f"{param.default!r} in the handler"
                )
            wanted = sub.get("type")
            admitted = _annotation_types(hints[pname]) if pname in hints else None
            if isinstance(wanted, str) and admitted is not None and wanted not in admitted:
                problems.append(
                    f"{name}: {pname!r} is {wanted!r} in the schema but annotated "
                    f"{getattr(hints[pname], '__name__', hints[pname])!s} in the handler"
                )
    if not has_kwargs:
        for prop in props:
            if prop not in params:
                problems.append(f"{name}: schema property {prop!r} has no handler parameter")
    return problems


class _Template(string.Formatter):
    def get_value(self, key: Any, args: Any, kwargs: Any) -> Any:
        return kwargs.get(key, "") if isinstance(key, str) else ""

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        if conversion == "u":  # a URL as people say it: "example.com/path", no scheme
            text = str(value)
            return text.split("://", 1)[1] if "://" in text else text
        return super().convert_field(value, conversion)


_FORMATTER = _Template()


def _label(template: str, values: Mapping[str, Any]) -> str:
    try:
        return _FORMATTER.format(template, **values)
    except (ValueError, IndexError, KeyError, AttributeError):
        return template


def _bind(definition: Definition, fn: Callable[..., Any]) -> Tool:
    raw = definition.raw
    sig = inspect.signature(fn)
    try:
        ctx_param = _context_param(sig, typing.get_type_hints(fn))
    except (NameError, TypeError):
        ctx_param = None
    is_async = inspect.iscoroutinefunction(fn)

    if is_async:

        async def execute(params: dict[str, Any], ctx: ToolContext) -> Any:
            kwargs = dict(params)
            if ctx_param:
                kwargs[ctx_param] = ctx
            return await fn(**kwargs)

    else:

        def execute(params: dict[str, Any], ctx: ToolContext) -> Any:  # type: ignore[misc]
            kwargs = dict(params)
            if ctx_param:
                kwargs[ctx_param] = ctx
            return fn(**kwargs)

    activity = raw.get("activity")
    completed = raw.get("completed_activity")
    return Tool.from_schema(
        name=definition.name,
        description=definition.description,
        json_schema=definition.input_schema,
        execute=execute,
        strict=raw.get("strict"),
        namespace=raw.get("namespace"),
        namespace_description=raw.get("namespace_description"),
        defer_loading=raw.get("defer_loading", False),
        execution_mode=raw.get("execution_mode"),
        read_only=raw.get("read_only", False),
        destructive=raw.get("destructive", False),
        tier=raw.get("tier"),
        describe_activity=(lambda p: _label(activity, p)) if activity else None,
        describe_completed_activity=(
            (lambda p, r: _label(completed, {**p, "result": r.text()[:60]})) if completed else None
        ),
    )


def _not_bound(**_: Any) -> Any:
    raise RuntimeError("this tool was built for display only; load the registry to run it")


def unbound_tool(definition: Definition) -> Tool:
    """A Tool for ``definition`` with no handler: for showing schemas, never for running."""
    return _bind(definition, _not_bound)


def _has_search(ctx: TurnContext) -> bool:
    """Whether the turn's web binding names a search provider (a misconfigured one
    raises :class:`~tooldeck.web.WebConfigError`, so assembly names the problem)."""
    from .web.config import search_provider

    return search_provider(ctx.web_provider, net=ctx.web_access) is not None


def _available(definition: Definition, ctx: TurnContext) -> bool:
    for need in definition.requires:
        if need == "web_provider" and ctx.web_provider is None:
            return False
        if need == "web_search" and not _has_search(ctx):
            return False
        if need == "background_jobs" and not ctx.can_create_jobs:
            return False
        if need == "text_turn" and ctx.turn_kind != "text":
            return False
        if need == "memory" and not ctx.memory_enabled:
            return False
    return True


class RegistryCategory(Source):
    """One category of a registry, as a tool source: its tools this turn's facts allow."""

    def __init__(self, category: str, members: Sequence[tuple[Definition, Tool]]) -> None:
        self.category = category
        self.label = f"registry:{category}"
        self.members = tuple(members)
        always = [t for d, t in self.members if not d.requires]
        self.always = tuple(always) if len(always) == len(self.members) else None

    def tools_for(self, ctx: TurnContext, /) -> Sequence[Tool]:
        if self.always is not None:  # nothing depends on the turn's facts
            return self.always
        return tuple(t for d, t in self.members if not d.requires or _available(d, ctx))


class ToolRegistry(Source):
    """Native tools bound from a definitions file; a tool source (every category, in
    file order), and one per category (:meth:`category`)."""

    label = "registry"

    def __init__(self, definitions: Sequence[Definition], tools: Mapping[str, Tool], source: str):
        self.definitions = tuple(definitions)
        self.tools: Mapping[str, Tool] = dict(tools)
        self.source = source
        self.categories: tuple[str, ...] = tuple(dict.fromkeys(d.category for d in definitions))
        self._categories = {
            c: RegistryCategory(
                c, [(d, self.tools[d.name]) for d in self.definitions if d.category == c]
            )
            for c in self.categories
        }

    # -- loading ------------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        definitions_path: str | Path,
        categories: Iterable[ModuleType | Handlers | str],
    ) -> ToolRegistry:
        """Load and check ``definitions_path`` and bind handlers from ``categories``.

        ``categories`` lists category modules (or their import paths, or ``Handlers``
        tables). Raises :class:`RegistryError` listing every problem found.
        """
        path = Path(definitions_path)
        source = str(path)
        try:
            document = load_json(path)
        except OSError as exc:
            raise RegistryError(source, [f"cannot read the file: {exc}"]) from exc
        except ConfigFileError as exc:
            raise RegistryError(source, [exc.problem]) from exc
        return cls.from_document(document, categories, source=source)

    @classmethod
    def from_document(
        cls,
        document: Any,
        categories: Iterable[ModuleType | Handlers | str],
        *,
        source: str = "<definitions>",
    ) -> ToolRegistry:
        tables, problems = _tables(categories)
        definitions, file_problems = check_document(document)
        problems += file_problems
        bound: dict[str, tuple[str, Callable[..., Any]]] = {}
        for table in tables:
            for dup in table.duplicates:
                problems.append(f"category {table.category!r}: handler {dup!r} is bound twice")
            for hname, fn in table.table.items():
                if hname in bound:
                    problems.append(
                        f"handler {hname!r} is bound by category {bound[hname][0]!r} and by "
                        f"{table.category!r}"
                    )
                    continue
                bound[hname] = (table.category, fn)
        known_categories = {t.category for t in tables}
        for d in definitions:
            if d.name not in bound:
                hint = (
                    ""
                    if d.category in known_categories
                    else (f" (category {d.category!r} is not among the loaded category modules)")
                )
                problems.append(f"{d.name}: defined but no handler is bound{hint}")
                continue
            category, fn = bound[d.name]
            if category != d.category:
                problems.append(
                    f"{d.name}: defined in category {d.category!r} but bound in {category!r}"
                )
            problems += signature_problems(d.name, fn, d.input_schema)
        defined = {d.name for d in definitions}
        for hname, (category, _fn) in bound.items():
            if hname not in defined:
                problems.append(f"{hname}: handler in category {category!r} has no definition")

        if problems:
            raise RegistryError(source, problems)
        tools: dict[str, Tool] = {}
        for d in definitions:
            try:
                tools[d.name] = _bind(d, bound[d.name][1])
            except TooldeckError as exc:
                problems.append(f"{d.name}: {exc}")
        if problems:
            raise RegistryError(source, problems)
        return cls(definitions, tools, source)

    # -- as tool sources ----------------------------------------------------------------
    def definition(self, name: str) -> Definition:
        for d in self.definitions:
            if d.name == name:
                return d
        raise KeyError(name)

    def category(self, name: str) -> RegistryCategory:
        """The source of one category: its tools that a turn's facts allow."""
        if name not in self._categories:
            raise KeyError(f"no category {name!r} in {self.source}")
        return self._categories[name]

    def by_category(self, categories: Iterable[str] | None = None) -> list[RegistryCategory]:
        """The sources of ``categories`` (default: every category, in file order)."""
        return [self.category(c) for c in (categories or self.categories)]

    def toolset(self, ctx: TurnContext) -> Toolset:
        """This registry's tools for ``ctx``, each with its category as its origin."""
        return assemble(ctx, self.by_category())

    def tools_for(self, ctx: TurnContext, /) -> Sequence[Tool]:
        return tuple(t for c in self.by_category() for t in c.tools_for(ctx))


def _tables(
    categories: Iterable[ModuleType | Handlers | str],
) -> tuple[list[Handlers], list[str]]:
    tables: list[Handlers] = []
    problems: list[str] = []
    for item in categories:
        module: Any = item
        if isinstance(item, str):
            try:
                module = importlib.import_module(item)
            except Exception as exc:  # a handler module that raises at import time
                problems.append(
                    f"category module {item!r} failed to import: {type(exc).__name__}: {exc}"
                )
                continue
        if isinstance(module, Handlers):
            tables.append(module)
            continue
        table = getattr(module, "handlers", None)
        if not isinstance(table, Handlers):
            problems.append(
                f"category module {getattr(module, '__name__', module)!r} has no "
                "module-level `handlers = Handlers(...)` table"
            )
            continue
        tables.append(table)
    return tables, problems


def check_document(document: Any) -> tuple[list[Definition], list[str]]:
    """Check a definitions document on its own (no handlers): every problem, at once.

    Returns the usable definitions and the problems (the file's JSON Schema, names,
    duplicates, each input schema's root and validity).
    """
    problems: list[str] = []
    for error in _load_schema().iter_errors(document):
        path = list(error.instance_path)
        if len(path) >= 2 and path[0] == "tools" and isinstance(path[1], int):
            entry = document["tools"][path[1]]
            name = entry.get("name") if isinstance(entry, dict) else None
            problems.append(f"{_where(path[1], name, path[2:])}: {error.message}")
        else:
            where = "".join(f"[{p!r}]" for p in path) or "(root)"
            problems.append(f"{where}: {error.message}")
    entries = document.get("tools", []) if isinstance(document, dict) else []
    entries = entries if isinstance(entries, list) else []

    definitions: list[Definition] = []
    seen: dict[str, int] = {}
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            continue
        name = entry.get("name")
        if not isinstance(name, str) or not TOOL_NAME_PATTERN.fullmatch(name):
            continue  # already reported by the file's schema
        if name in seen:
            problems.append(f"{_where(index, name)}: duplicate name, first at tools[{seen[name]}]")
            continue
        seen[name] = index
        schema = entry.get("input_schema")
        if isinstance(schema, dict):
            if schema.get("type") != "object":
                problems.append(
                    f"{_where(index, name, ['input_schema'])}: the root must be "
                    f"'type: object', got {schema.get('type', 'no type')!r}"
                )
            # Compiled as the tool will be (never fetching a reference): a schema
            # jsonschema_rs cannot build is a problem of the file, not of a later call.
            _validator, compiled = compile_schema(schema)
            problems += located(compiled, _where(index, name, ["input_schema"]))
        definitions.append(
            Definition(
                name,
                str(entry.get("description", "")),
                str(entry.get("category", "")),
                schema if isinstance(schema, dict) else {},
                entry,
            )
        )
    return definitions, problems
