"""The tool contract: :class:`Tool` and the :func:`tool` decorator.

A tool is a name, a description, a parameters schema (a Pydantic model, or an external
JSON Schema used verbatim) and an ``execute`` callable. Everything else is metadata the
runtime reads: strictness, namespace, deferral, execution mode, safety hints and
activity labels. Tools never decide when they run or validate their own input; the
dispatcher does both and hands ``execute`` validated parameters only.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeAlias, TypeVar, overload

from pydantic import BaseModel, RootModel
from pydantic.json_schema import JsonSchemaValue

from ._compile import compile_schema, located
from ._function_schema import LazyModel, inspect_function
from ._function_schema import NoTitles as _NoTitles
from ._threads import run_in_thread
from .context import ToolContext
from .errors import SchemaError, ToolDefinitionError
from .result import ToolResult

__all__ = ["TIERS", "TOOL_NAME_PATTERN", "ExecutionMode", "Tier", "Tool", "tool"]

ExecutionMode: TypeAlias = Literal["parallel", "sequential"]
Tier: TypeAlias = Literal["STANDARD", "WRITE", "DANGEROUS"]
TIERS: tuple[Tier, ...] = ("STANDARD", "WRITE", "DANGEROUS")
TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

Execute: TypeAlias = Callable[[Any, ToolContext], Any]
Describe: TypeAlias = Callable[[Any], str]
DescribeCompleted: TypeAlias = Callable[[Any, ToolResult], str | None]

F = TypeVar("F", bound=Callable[..., Any])


def _model_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema: dict[str, Any] = model.model_json_schema(schema_generator=_NoTitles)
    schema.pop("title", None)
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and len(schema) == 2:
        # A self-referencing model comes back as a root $ref; inline the root definition
        # so the root is an object, and keep $defs for the recursive references inside.
        defs = dict(schema["$defs"])
        root = dict(defs[ref.removeprefix("#/$defs/")])
        root.pop("title", None)
        schema = {**root, "$defs": defs}
    return schema


def _check_name(kind: str, name: str) -> None:
    if not isinstance(name, str) or not TOOL_NAME_PATTERN.fullmatch(name):
        raise ToolDefinitionError(
            f"{kind} {name!r} must match {TOOL_NAME_PATTERN.pattern} "
            "(letters, digits, '_' and '-', 1 to 64 characters; accepted by every provider)"
        )


def _object_root_problems(schema: Any) -> list[str]:
    if not isinstance(schema, Mapping):
        return [f"$: the schema must be a JSON object, got {type(schema).__name__}"]
    if schema.get("type") != "object":
        got = schema.get("type", "no 'type'")
        return [f"$: the root must be 'type: object' (tool arguments are an object), got {got!r}"]
    return []


class Tool:
    """A tool the model can call.

    Give either ``params`` (a Pydantic model class; its JSON Schema is generated once) or
    ``json_schema`` (an external JSON Schema sent exactly as given), not both; with
    neither the tool takes no arguments. ``execute(params, ctx)`` may be sync or async
    and may return a :class:`ToolResult` or a plain value (str, dict, list, Pydantic
    model), which is wrapped. Sync callables run in a worker thread by default so they
    never block the event loop (``run_sync_in_thread=False`` for trivial ones).

    ``tier`` is the approval tier: ``STANDARD`` (default for read-only tools),
    ``WRITE`` (default otherwise) or ``DANGEROUS`` (always needs a human).

    ``execution_mode`` defaults to ``'parallel'`` for read-only tools and
    ``'sequential'`` otherwise: a tool that changes the world runs in the model's order,
    after everything before it and before everything after it.
    """

    __slots__ = (
        "__dict__",
        "_arg_spec",
        "_describe",
        "_describe_completed",
        "_execute",
        "_is_async",
        "_lazy_params",
        "_params",
        "_params_schema",
        "_projections",
        "_validator",
        "defer_loading",
        "description",
        "destructive",
        "execution_mode",
        "external_schema",
        "name",
        "namespace",
        "namespace_description",
        "read_only",
        "run_sync_in_thread",
        "strict",
        "tier",
    )

    def __init__(
        self,
        *,
        name: str,
        description: str,
        params: type[BaseModel] | None = None,
        json_schema: Mapping[str, Any] | None = None,
        execute: Execute | None = None,
        strict: bool | None = None,
        namespace: str | None = None,
        namespace_description: str | None = None,
        defer_loading: bool = False,
        execution_mode: ExecutionMode | None = None,
        read_only: bool = False,
        destructive: bool = False,
        describe_activity: Describe | None = None,
        describe_completed_activity: DescribeCompleted | None = None,
        run_sync_in_thread: bool = True,
        tier: Tier | None = None,
        _function_params: tuple[LazyModel, dict[str, Any]] | None = None,
    ) -> None:
        _check_name("tool name", name)
        if namespace is not None:
            _check_name("namespace", namespace)
        if params is not None and json_schema is not None:
            raise ToolDefinitionError(f"tool {name!r}: give params or json_schema, not both")
        if execution_mode not in (None, "parallel", "sequential"):
            raise ToolDefinitionError(
                f"tool {name!r}: execution_mode must be 'parallel' or 'sequential', "
                f"got {execution_mode!r}"
            )
        if tier is not None and tier not in TIERS:
            raise ToolDefinitionError(f"tool {name!r}: tier must be one of {TIERS}, got {tier!r}")
        if strict not in (None, True, False):
            raise ToolDefinitionError(f"tool {name!r}: strict must be True, False or None")
        self.name = name
        self.description = description
        self.strict = strict
        self.namespace = namespace
        self.namespace_description = namespace_description
        self.defer_loading = bool(defer_loading)
        self.read_only = bool(read_only)
        self.destructive = bool(destructive)
        self.execution_mode: ExecutionMode = execution_mode or (
            "parallel" if self.read_only else "sequential"
        )
        self.run_sync_in_thread = run_sync_in_thread
        self.tier: Tier = tier or ("STANDARD" if self.read_only else "WRITE")
        self._describe = describe_activity
        self._describe_completed = describe_completed_activity
        self._projections: dict[Any, Any] = {}
        self._arg_spec: Any = None  # built by tooldeck.arguments on first use
        self._validator: Any = None  # an external schema's compiled validator
        self._is_async: bool | None = None  # whether execute is a coroutine function
        self._lazy_params: LazyModel | None = None
        if execute is not None:
            self._execute: Execute | None = execute
        elif type(self).execute is not Tool.execute:
            self._execute = None  # a subclass overrides execute()
        else:
            raise ToolDefinitionError(f"tool {name!r}: no execute callable")

        if json_schema is not None:
            problems = _object_root_problems(json_schema)
            if problems:
                raise SchemaError(name, problems)
            try:  # a private JSON copy: later edits to the caller's dict change nothing
                schema = json.loads(json.dumps(json_schema))
            except (TypeError, ValueError) as exc:
                raise SchemaError(name, [f"$: not JSON-serialisable: {exc}"]) from exc
            except RecursionError as exc:  # e.g. from a hostile MCP server
                raise SchemaError(name, ["$: nested too deeply to be used"]) from exc
            # Compiled now, never fetching anything (tooldeck._compile): an unusable
            # schema is a definition error, not a failure of the first call.
            validator, compiled = compile_schema(schema)
            if compiled:
                raise SchemaError(name, located(compiled))
            self._validator = validator
            self._params: type[BaseModel] | None = None
            self.external_schema = True
            self._params_schema: dict[str, Any] = schema
        elif _function_params is not None:
            # From @tool: the schema was generated without the model class, which is
            # created on first use of `params` (see tooldeck._function_schema).
            self._lazy_params, schema = _function_params
            problems = _object_root_problems(schema)
            if problems:
                raise SchemaError(name, problems)
            self._params = None
            self.external_schema = False
            self._params_schema = schema
        else:
            if params is None:
                params = _NoParams
            if not (isinstance(params, type) and issubclass(params, BaseModel)):
                raise ToolDefinitionError(
                    f"tool {name!r}: params must be a Pydantic model class, got {params!r}"
                )
            if issubclass(params, RootModel):
                raise SchemaError(name, ["$: a RootModel has no object root; use a BaseModel"])
            self._params = params
            self.external_schema = False
            try:
                schema = _model_schema(params)
            except Exception as exc:
                raise SchemaError(name, [f"$: cannot generate a JSON Schema: {exc}"]) from exc
            problems = _object_root_problems(schema)
            if problems:
                raise SchemaError(name, problems)
            self._params_schema = schema

    # -- schema ---------------------------------------------------------------------
    @property
    def params(self) -> type[BaseModel] | None:
        """The Pydantic parameters model (``None`` for an external JSON Schema).

        For a tool made by :func:`tool` the class is created on first access (the first
        validation): building a tool and projecting its schema never needs it.
        """
        model = self._params
        if model is None and self._lazy_params is not None:
            model = self._params = self._lazy_params.get()
        return model

    @params.setter
    def params(self, model: type[BaseModel] | None) -> None:
        self._params = model
        self._lazy_params = None

    def input_schema(self) -> dict[str, Any]:
        """The JSON Schema of the arguments, as the model sees it (a private copy).

        An external schema comes back unchanged; a generated one is computed once, when
        the tool is defined.
        """
        return copy.deepcopy(self._params_schema)

    @property
    def schema(self) -> Mapping[str, Any]:
        """The shared, cached schema. Read it, never mutate it."""
        return self._params_schema

    # -- activity labels --------------------------------------------------------------
    def describe_activity(self, params: Any) -> str:
        """A short label for progress displays, e.g. ``"Reading notes.md"``."""
        if self._describe is not None:
            return self._describe(params)
        return f"Running {self.name}"

    def describe_completed_activity(self, params: Any, result: ToolResult) -> str | None:
        """A label that replaces the activity label once the call is done (optional)."""
        if self._describe_completed is not None:
            return self._describe_completed(params, result)
        return None

    # -- execution --------------------------------------------------------------------
    def execute(self, params: Any, ctx: ToolContext) -> Any:
        """Do the work. Subclasses may override; otherwise the ``execute`` callable runs."""
        assert self._execute is not None
        return self._execute(params, ctx)

    async def invoke(self, params: Any, ctx: ToolContext) -> ToolResult:
        """Run :meth:`execute` with validated ``params`` and freeze what it returns.

        Only the dispatcher calls this. Sync work runs in a worker thread unless the tool
        opted out, and its result is frozen in that thread, the moment ``execute``
        returns; async work runs on the caller's loop so cancellation reaches it, and is
        frozen right after it returns, before anything else can run (see
        :mod:`tooldeck.result`).
        """
        execute = self.execute if self._execute is None else self._execute
        is_async = self._is_async
        if is_async is None:  # decided once per tool, not per call
            is_async = self._is_async = _is_async_callable(execute)
        if is_async:
            value = await execute(params, ctx)
        elif self.run_sync_in_thread:
            value = await run_in_thread(_call_and_freeze, execute, params, ctx)
        else:
            value = execute(params, ctx)
        if type(value) not in _PLAIN and inspect.isawaitable(value):
            value = await value
        return ToolResult.wrap(value)

    @classmethod
    def from_schema(
        cls,
        *,
        name: str,
        description: str,
        json_schema: Mapping[str, Any],
        execute: Execute,
        **options: Any,
    ) -> Tool:
        """A tool around an external JSON Schema, which is sent to the model unchanged.

        ``execute`` receives the validated arguments as a ``dict``.
        """
        return cls(
            name=name, description=description, json_schema=json_schema, execute=execute, **options
        )

    def replace(self, *, name: str | None = None, tier: Tier | None = None) -> Tool:
        """A copy under another ``name`` or ``tier`` (the source combinators make these):
        the same ``execute`` and schema, no cache shared with this tool."""
        if name is not None:
            _check_name("tool name", name)
        if tier is not None and tier not in TIERS:
            raise ToolDefinitionError(f"tool {self.name!r}: tier must be one of {TIERS}")
        twin = copy.copy(self)
        twin.name = self.name if name is None else name
        twin.tier = self.tier if tier is None else tier
        twin._projections = {}  # a projection carries the name
        twin._arg_spec = None
        return twin

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r}, mode={self.execution_mode!r})"


class _NoParams(BaseModel):
    # The arguments of a tool that takes none (no docstring: it would become a description).
    model_config = {"extra": "forbid"}


def _is_async_callable(fn: Any) -> bool:
    if getattr(fn, "_tooldeck_async", False):
        return True
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - async __call__ on an object
    )


_PLAIN = frozenset({str, int, float, bool, dict, list, tuple, type(None), ToolResult})


def _call_and_freeze(execute: Execute, params: Any, ctx: ToolContext) -> Any:
    """In the worker thread: run ``execute`` and freeze its result before returning."""
    value = execute(params, ctx)
    if inspect.isawaitable(value):
        return value  # awaited (and frozen) on the loop
    return ToolResult.wrap(value)


def _function_executor(fn: Callable[..., Any], context_param: str | None) -> Execute:
    """Adapt ``fn(a=..., b=..., ctx=...)`` to the ``execute(params, ctx)`` contract."""
    if context_param is None:

        def call(params: BaseModel, ctx: ToolContext) -> Any:
            # the model forbids extra keys, so its __dict__ holds exactly the parameters
            return fn(**params.__dict__)

    else:

        def call(params: BaseModel, ctx: ToolContext) -> Any:
            kwargs = dict(params.__dict__)
            kwargs[context_param] = ctx
            return fn(**kwargs)

    if inspect.iscoroutinefunction(fn):
        call._tooldeck_async = True  # type: ignore[attr-defined]  # returns fn's coroutine
    return call


@overload
def tool(fn: F, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool | None = None,
    namespace: str | None = None,
    namespace_description: str | None = None,
    defer_loading: bool = False,
    execution_mode: ExecutionMode | None = None,
    read_only: bool = False,
    destructive: bool = False,
    describe_activity: Describe | None = None,
    describe_completed_activity: DescribeCompleted | None = None,
    run_sync_in_thread: bool = True,
    tier: Tier | None = None,
) -> Callable[[F], Tool]: ...


def tool(fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Make a :class:`Tool` from a typed function (sync or async).

    The name defaults to the function's name, the description to its docstring (Google,
    NumPy or Sphinx style; parameter descriptions are taken from it too). A parameter
    annotated :class:`ToolContext` receives the call's context and is not shown to the
    model. ``describe_activity`` and ``describe_completed_activity`` receive the
    validated parameters model.
    """

    def build(f: Callable[..., Any]) -> Tool:
        name = options.pop("name", None) or getattr(f, "__name__", None)
        if not isinstance(name, str):
            raise ToolDefinitionError(f"cannot name a tool for {f!r}; pass name=")
        _check_name("tool name", name)
        sig = inspect_function(f, name)
        description = options.pop("description", None) or sig.description
        if not description:
            raise ToolDefinitionError(
                f"tool {name!r}: no description; write a docstring or pass description="
            )
        if sig.schema is None:  # the model was created eagerly: the usual path
            made = Tool(
                name=name,
                description=description,
                params=sig.params.get(),
                execute=_function_executor(f, sig.context_param),
                **options,
            )
        else:
            made = Tool(
                name=name,
                description=description,
                execute=_function_executor(f, sig.context_param),
                _function_params=(sig.params, sig.schema),
                **options,
            )
        functools.update_wrapper(made, f, updated=())  # type: ignore[arg-type]
        return made

    if fn is not None:
        return build(fn)
    return build


def schema_of(model: type[BaseModel]) -> JsonSchemaValue:
    """The JSON Schema tooldeck generates for a parameters model (no field titles)."""
    return _model_schema(model)
