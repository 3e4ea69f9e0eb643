"""The tool contract: :class:`Tool` and the :func:`tool` decorator.

A tool is a name, a description, a parameters schema and an ``execute`` callable.
Everything else is metadata the runtime reads: strictness, namespace, deferral,
execution mode, safety hints and activity labels. Tools never decide when they run or
validate their own input; the dispatcher does both and hands ``execute`` validated
parameters only.

A tool is built by one of three named constructors, one per source of its parameters:
:meth:`Tool.from_function` (a typed function; what :func:`tool` uses),
:meth:`Tool.from_model` (a Pydantic model class) and :meth:`Tool.from_schema` (an
external JSON Schema, sent unchanged). Each prepares the parameters in one place
(:mod:`tooldeck._parameters`); ``Tool(...)`` itself only stores prepared parts.
"""

from __future__ import annotations

import copy
import functools
import inspect
import re
from collections.abc import Callable, Mapping
from typing import (
    Any,
    Generic,
    Literal,
    Self,
    TypeAlias,
    TypedDict,
    TypeVar,
    Unpack,
    overload,
)

from pydantic import BaseModel

from ._function_schema import LazyModel, inspect_function
from ._parameters import (
    Parameters,
    function_parameters,
    model_parameters,
    schema_parameters,
)
from ._threads import run_in_thread
from .context import ToolContext
from .errors import ToolDefinitionError
from .result import ToolResult

__all__ = ["TIERS", "Tier", "ToolOptions"]

ExecutionMode: TypeAlias = Literal["parallel", "sequential"]
Tier: TypeAlias = Literal["STANDARD", "WRITE", "DANGEROUS"]
TIERS: tuple[Tier, ...] = ("STANDARD", "WRITE", "DANGEROUS")
TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

M = TypeVar("M", bound=BaseModel)
P = TypeVar("P")  # what execute receives: a model instance, or a dict (external schema)
F = TypeVar("F", bound=Callable[..., Any])

Execute: TypeAlias = Callable[[Any, ToolContext], Any]


class ToolOptions(TypedDict, Generic[P], total=False):
    """The metadata every constructor of :class:`Tool` accepts (all optional).

    ``P`` is what ``execute`` receives: the parameters model, or a ``dict`` for an
    external schema.
    """

    strict: bool | None
    namespace: str | None
    namespace_description: str | None
    defer_loading: bool
    execution_mode: ExecutionMode | None
    read_only: bool
    destructive: bool
    describe_activity: Callable[[P], str] | None
    describe_completed_activity: Callable[[P, ToolResult], str | None] | None
    run_sync_in_thread: bool
    tier: Tier | None


def _check_name(kind: str, name: str) -> None:
    if not isinstance(name, str) or not TOOL_NAME_PATTERN.fullmatch(name):
        raise ToolDefinitionError(
            f"{kind} {name!r} must match {TOOL_NAME_PATTERN.pattern} "
            "(letters, digits, '_' and '-', 1 to 64 characters; accepted by every provider)"
        )


_OPTIONS = ToolOptions.__optional_keys__
_USE = {
    "json_schema": "Tool.from_schema(json_schema, execute, name=, description=, ...)",
    "params": "Tool.from_model(model, execute, name=, description=, ...)",
}


def _check_options_given(constructor: str, options: Mapping[str, Any]) -> None:
    """A keyword no constructor takes (``json_schema=``, ``params=``...): one line saying
    which constructor takes it."""
    if not options or _OPTIONS.issuperset(options):
        return
    key = min(k for k in options if k not in _OPTIONS)
    if key in _USE:
        instead = f"; for {key}= use {_USE[key]}"
    elif key == "execute":
        instead = ": the function itself runs"
    else:
        instead = f"; its options are {', '.join(sorted(_OPTIONS))}"
    raise ToolDefinitionError(f"Tool.{constructor}() has no option {key!r}{instead}")


def _not_a_function(fn: Any) -> None:
    """A model class or a schema given to :meth:`Tool.from_function`: the one to use."""
    if isinstance(fn, type) and issubclass(fn, BaseModel):
        raise ToolDefinitionError(
            f"Tool.from_function: {fn.__name__} is a Pydantic model class: use "
            "Tool.from_model(model, execute, name=, description=, ...)"
        )
    if isinstance(fn, Mapping):
        raise ToolDefinitionError(
            "Tool.from_function: the first argument is a JSON Schema: use "
            "Tool.from_schema(json_schema, execute, name=, description=, ...)"
        )


class Tool:
    """A tool the model can call.

    Build one with :meth:`from_function` (or the :func:`tool` decorator),
    :meth:`from_model` or :meth:`from_schema`; the constructor stores parts they
    prepared. ``execute(params, ctx)`` may be sync or async and may return a
    :class:`ToolResult` or a plain value (str, dict, list, Pydantic model), which is
    wrapped. Sync callables run in a worker thread by default so they never block the
    event loop (``run_sync_in_thread=False`` for trivial ones). A subclass may override
    :meth:`execute` instead of passing one.

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
        "_direct",
        "_execute",
        "_is_async",
        "_lazy_params",
        "_params",
        "_params_schema",
        "_projections",
        "_takes_context",
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

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        # Tool(...) takes parameters a constructor prepared; the keywords of the old
        # constructor (json_schema=, params=) are told which constructor takes them.
        if kwargs and "parameters" not in kwargs and cls.__init__ is Tool.__init__:
            given = next((k for k in _USE if k in kwargs), None)
            raise ToolDefinitionError(
                f"Tool({given}=...) is {_USE[given]}"
                if given
                else "build a Tool with Tool.from_function, Tool.from_model or "
                "Tool.from_schema (Tool(...) takes the parameters they prepare)"
            )
        return super().__new__(cls)

    def __init__(
        self,
        *,
        name: str,
        description: str,
        parameters: Parameters,
        execute: Execute | None = None,
        strict: bool | None = None,
        namespace: str | None = None,
        namespace_description: str | None = None,
        defer_loading: bool = False,
        execution_mode: ExecutionMode | None = None,
        read_only: bool = False,
        destructive: bool = False,
        describe_activity: Callable[[Any], str] | None = None,
        describe_completed_activity: Callable[[Any, ToolResult], str | None] | None = None,
        run_sync_in_thread: bool = True,
        tier: Tier | None = None,
    ) -> None:
        _check_options(name, namespace, execution_mode, tier, strict)
        if execute is None and type(self).execute is Tool.execute:
            raise ToolDefinitionError(f"tool {name!r}: no execute callable")
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
        self._execute = execute  # None: a subclass overrides execute()
        self._is_async: bool | None = None  # whether execute is a coroutine function
        # whether execute reads its ToolContext: False only for a function without a
        # ToolContext parameter, whose calls the dispatcher then makes no context for
        self._takes_context = getattr(execute, "_tooldeck_takes_context", True) is not False
        # such a function, called with the parameters themselves (no wrapper frame)
        self._direct: Callable[..., Any] | None = getattr(execute, "_tooldeck_direct", None)
        self._projections: dict[Any, Any] = {}
        self._arg_spec: Any = None  # built by tooldeck.arguments on first use
        model = parameters.model
        self._params: type[BaseModel] | None = None if isinstance(model, LazyModel) else model
        self._lazy_params = model if isinstance(model, LazyModel) else None
        self._params_schema: dict[str, Any] = parameters.schema
        self._validator: Any = parameters.validator  # an external schema's compiled validator
        self.external_schema = model is None

    # -- constructors -----------------------------------------------------------------
    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        **options: Unpack[ToolOptions[Any]],
    ) -> Self:
        """A tool from a typed function (sync or async): what :func:`tool` does.

        The name defaults to the function's name, the description to its docstring
        (Google, NumPy or Sphinx style; parameter descriptions are taken from it too). The
        function is called with the validated arguments as keyword arguments; a
        parameter annotated :class:`ToolContext` receives the call's context and is not
        shown to the model. ``describe_activity`` and ``describe_completed_activity``
        receive the validated parameters model.
        """
        _not_a_function(fn)
        _check_options_given("from_function", options)
        name = name or getattr(fn, "__name__", None)
        if not isinstance(name, str):
            raise ToolDefinitionError(f"cannot name a tool for {fn!r}; pass name=")
        _check_name("tool name", name)
        sig = inspect_function(fn, name)
        description = description or sig.description
        if not description:
            raise ToolDefinitionError(
                f"tool {name!r}: no description; write a docstring or pass description="
            )
        made = cls(
            name=name,
            description=description,
            parameters=function_parameters(name, sig),
            execute=_function_executor(fn, sig.context_param),
            **options,
        )
        functools.update_wrapper(made, fn, updated=())  # type: ignore[arg-type]
        return made

    @classmethod
    def from_model(
        cls,
        model: type[M],
        execute: Callable[[M, ToolContext], Any] | None = None,
        *,
        name: str,
        description: str,
        **options: Unpack[ToolOptions[M]],
    ) -> Self:
        """A tool whose arguments are validated into ``model``, a Pydantic model class.

        Its JSON Schema is generated once, here. ``execute(params, ctx)`` receives the
        model instance.
        """
        _check_options_given("from_model", options)
        _check_name("tool name", name)
        return cls(
            name=name,
            description=description,
            parameters=model_parameters(name, model),
            execute=execute,
            **options,
        )

    @classmethod
    def from_schema(
        cls,
        json_schema: Mapping[str, Any],
        execute: Callable[[dict[str, Any], ToolContext], Any] | None = None,
        *,
        name: str,
        description: str,
        **options: Unpack[ToolOptions[dict[str, Any]]],
    ) -> Self:
        """A tool around an external JSON Schema, which is sent to the model unchanged.

        The schema (its root an object) is copied and compiled here, never fetching
        anything: an unusable one raises :class:`~tooldeck.errors.SchemaError` now.
        ``execute(params, ctx)`` receives the validated arguments as a ``dict``.
        """
        _check_options_given("from_schema", options)
        _check_name("tool name", name)
        return cls(
            name=name,
            description=description,
            parameters=schema_parameters(name, json_schema),
            execute=execute,
            **options,
        )

    # -- schema ---------------------------------------------------------------------
    @property
    def params(self) -> type[BaseModel] | None:
        """The Pydantic parameters model (``None`` for an external JSON Schema).

        For a tool made from a function the class is created on first access (the first
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

        Only the dispatcher calls this. It passes ``ctx=None`` to a tool made from a
        function that takes no :class:`ToolContext` (which never sees it), and makes no
        context for such a call. Sync work runs in a worker thread unless the tool
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
            direct = self._direct  # the model forbids extra keys: __dict__ is the arguments
            value = await (execute(params, ctx) if direct is None else direct(**params.__dict__))
        elif self.run_sync_in_thread:
            value = await run_in_thread(_call_and_freeze, execute, params, ctx)
        else:
            value = execute(params, ctx)
        if type(value) not in _PLAIN and inspect.isawaitable(value):
            value = await value
        return _wrap(value)

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


def _is_async_callable(fn: Any) -> bool:
    if getattr(fn, "_tooldeck_async", False):
        return True
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - async __call__ on an object
    )


_PLAIN = frozenset({str, int, float, bool, dict, list, tuple, type(None), ToolResult})
_wrap = ToolResult.wrap


def _call_and_freeze(execute: Execute, params: Any, ctx: ToolContext) -> Any:
    """In the worker thread: run ``execute`` and freeze its result before returning."""
    value = execute(params, ctx)
    if inspect.isawaitable(value):
        return value  # awaited (and frozen) on the loop
    return _wrap(value)


def _function_executor(fn: Callable[..., Any], context_param: str | None) -> Execute:
    """Adapt ``fn(a=..., b=..., ctx=...)`` to the ``execute(params, ctx)`` contract."""
    if context_param is None:

        def call(params: BaseModel, ctx: ToolContext) -> Any:
            # the model forbids extra keys, so its __dict__ holds exactly the parameters
            return fn(**params.__dict__)

        call._tooldeck_takes_context = False  # type: ignore[attr-defined]
        call._tooldeck_direct = fn  # type: ignore[attr-defined]  # what invoke calls instead

    else:

        def call(params: BaseModel, ctx: ToolContext) -> Any:
            kwargs = dict(params.__dict__)
            kwargs[context_param] = ctx
            return fn(**kwargs)

    if inspect.iscoroutinefunction(fn):
        call._tooldeck_async = True  # type: ignore[attr-defined]  # returns fn's coroutine
    return call


def _check_options(
    name: str, namespace: str | None, execution_mode: Any, tier: Any, strict: Any
) -> None:
    _check_name("tool name", name)
    if namespace is not None:
        _check_name("namespace", namespace)
    if execution_mode not in (None, "parallel", "sequential"):
        raise ToolDefinitionError(
            f"tool {name!r}: execution_mode must be 'parallel' or 'sequential', "
            f"got {execution_mode!r}"
        )
    if tier is not None and tier not in TIERS:
        raise ToolDefinitionError(f"tool {name!r}: tier must be one of {TIERS}, got {tier!r}")
    if strict not in (None, True, False):
        raise ToolDefinitionError(f"tool {name!r}: strict must be True, False or None")


@overload
def tool(fn: F, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    **options: Unpack[ToolOptions[Any]],
) -> Callable[[F], Tool]: ...


def tool(fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Make a :class:`Tool` from a typed function: :meth:`Tool.from_function` as a decorator.

    ``@tool`` or ``@tool(name=..., read_only=True, ...)``, with the options of
    :meth:`Tool.from_function`.
    """
    if fn is not None:
        return Tool.from_function(fn, **options)
    return functools.partial(Tool.from_function, **options)
