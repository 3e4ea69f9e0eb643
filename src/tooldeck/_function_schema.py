"""Turn a typed Python function into a parameters JSON Schema, a Pydantic model and a description.

Used by :func:`tooldeck.tool`. The docstring (Google, NumPy or Sphinx style, detected
automatically by ``docstring_parser``) gives the tool description and per-parameter
descriptions; ``Annotated[..., Field(description=...)]`` wins over the docstring. A
parameter annotated :class:`~tooldeck.context.ToolContext` is injected at call time and
never appears in the schema.

The JSON Schema is generated without creating the Pydantic model class: the fields go
through the same pydantic-core schema generation a model would use, and the model itself
(``create_model``, about half the cost of defining a tool) is only created when the tool
is first validated. A tool that is only shown to a model never pays for it. The schema is
the one the model would produce (``tests/test_function_schema_fast.py`` compares them);
whenever the fast path cannot be trusted (a field name that clashes with ``BaseModel``,
a ``ClassVar``/``Final``/``InitVar`` annotation, or any error) the model is created
eagerly, exactly as before, so errors and warnings are unchanged.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
import threading
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode
from pydantic_core import core_schema

from .context import ToolContext
from .errors import ToolDefinitionError

__all__ = ["FunctionSignature", "LazyModel", "NoTitles", "inspect_function"]

# No NaN or infinity for a float parameter: JSON has neither (a number too large for a
# double, 1e400, would arrive as infinity), and the schema says "number".
_MODEL_CONFIG = ConfigDict(extra="forbid", arbitrary_types_allowed=False, allow_inf_nan=False)


class NoTitles(GenerateJsonSchema):
    """Pydantic's generator without field titles: they cost tokens and say nothing.

    Three overrides make it cheaper without changing its output: the schema-type → method
    table is bound on demand instead of ~80 ``getattr`` per generator (one generator per
    schema), ``mode`` reads the configuration dictionary directly (pydantic's
    ``ConfigWrapper.__getattr__`` raises and catches a ``KeyError`` on every call, tens
    of thousands of times per 1,000 tools), and JSON-native defaults are encoded as
    themselves instead of through a fresh ``TypeAdapter`` each.
    """

    _method_names: typing.ClassVar[dict[str, str] | None] = None

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def build_schema_type_to_method(self) -> dict[Any, Callable[[Any], Any]]:
        names = type(self).__dict__.get("_method_names")
        if names is None:
            full = super().build_schema_type_to_method()
            names = {key: method.__name__ for key, method in full.items()}
            type(self)._method_names = names
        return _BoundMethods(self, names)

    @property
    def mode(self) -> JsonSchemaMode:
        try:
            effective = self._config_wrapper_stack.tail.effective_config
        except AttributeError:  # another pydantic version: its own (slower) lookup
            return super().mode
        override: JsonSchemaMode | None = effective.get("json_schema_mode_override")
        return self._mode if override is None else override

    def encode_default(self, dft: Any) -> Any:
        kind = type(dft)
        if kind is str or kind is int or kind is bool or dft is None:
            return dft
        if kind is float and math.isfinite(dft):
            return dft
        return super().encode_default(dft)


class _BoundMethods(dict[Any, Callable[[Any], Any]]):
    """``GenerateJsonSchema._schema_type_to_method``, binding each method on first use."""

    __slots__ = ("_names", "_owner")

    def __init__(self, owner: GenerateJsonSchema, names: dict[str, str]) -> None:
        super().__init__()
        self._owner = owner
        self._names = names

    def __missing__(self, key: Any) -> Callable[[Any], Any]:
        method: Callable[[Any], Any] = getattr(self._owner, self._names[key])
        self[key] = method
        return method


class LazyModel:
    """The parameters model of a function tool, created on first :meth:`get`."""

    __slots__ = ("_fields", "_lock", "_model", "_name", "_tool_name")

    def __init__(self, name: str, tool_name: str, fields: dict[str, Any]) -> None:
        self._name = name
        self._tool_name = tool_name
        self._fields = fields
        self._model: type[BaseModel] | None = None
        self._lock = threading.Lock()

    @classmethod
    def of(cls, model: type[BaseModel], tool_name: str, fields: dict[str, Any]) -> LazyModel:
        """An already created model."""
        made = cls(model.__name__, tool_name, fields)
        made._model = model
        return made

    @property
    def fields(self) -> dict[str, Any]:
        """The ``create_model`` field definitions: ``{name: (annotation, default)}``."""
        return self._fields

    def get(self) -> type[BaseModel]:
        model = self._model
        if model is not None:
            return model
        with self._lock:  # two threads validating the first call must get one class
            if self._model is None:
                try:
                    self._model = create_model(
                        self._name,
                        __config__=ConfigDict(**_MODEL_CONFIG),
                        __module__=__name__,
                        **self._fields,
                    )
                except Exception as exc:  # pydantic raises several types for unusable annotations
                    raise ToolDefinitionError(
                        f"tool {self._tool_name!r}: parameters cannot be modelled: {exc}"
                    ) from exc
            return self._model


@dataclass(frozen=True, slots=True)
class FunctionSignature:
    params: LazyModel
    schema: dict[str, Any] | None  # None: the model was created eagerly; use its schema
    description: str
    context_param: str | None
    is_async: bool


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.replace("-", "_").split("_"))


def _is_context(annotation: Any) -> bool:
    if annotation is ToolContext or typing.get_origin(annotation) is ToolContext:
        return True  # ToolContext, or ToolContext[Deps]
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


# Qualifiers a model class treats specially (class variables, final attributes): leave
# those to create_model.
_SPECIAL_FORMS = (typing.ClassVar, typing.Final, dataclasses.InitVar)


def _plain(annotation: Any) -> bool:
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return not (
        annotation in _SPECIAL_FORMS
        or typing.get_origin(annotation) in _SPECIAL_FORMS
        or isinstance(annotation, dataclasses.InitVar)
    )


def _fast_path_applies(fields: dict[str, Any]) -> bool:
    """Whether the model-free schema is known to equal the model's for these fields."""
    for name, (annotation, _default) in fields.items():
        # BaseModel attributes (shadowing warnings, deprecated methods such as `json`)
        # and the protected `model_` prefix behave differently on a class.
        if hasattr(BaseModel, name) or name.startswith("model_") or not _plain(annotation):
            return False
    return True


def _fields_schema(fields: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema ``create_model(..., **fields)`` would have, without the class.

    Mirrors what pydantic does for a model: each field's ``FieldInfo`` from its
    annotation and assigned value, its core schema from ``GenerateSchema`` under the
    model's configuration, a ``model-fields`` core schema, then JSON Schema generation
    under the same configuration, and the class-level ``additionalProperties: false``.
    """
    from pydantic._internal._config import ConfigWrapper
    from pydantic._internal._decorators import DecoratorInfos
    from pydantic._internal._fields import update_field_from_config
    from pydantic._internal._generate_schema import GenerateSchema

    config = ConfigWrapper(_MODEL_CONFIG, check=False)
    generator = GenerateSchema(config)
    decorators = DecoratorInfos()
    core_fields: dict[str, core_schema.ModelField] = {}
    for name, (annotation, default) in fields.items():
        info = FieldInfo.from_annotated_attribute(annotation, default)
        update_field_from_config(config, name, info)
        core_fields[name] = generator._generate_md_field_schema(name, info, decorators)
    core = generator.clean_schema(core_schema.model_fields_schema(core_fields))
    json_generator = NoTitles()
    with json_generator._config_wrapper_stack.push(config):
        schema = json_generator.generate(core)
    schema["additionalProperties"] = False
    return dict(sorted(schema.items()))


def inspect_function(fn: Callable[..., Any], tool_name: str) -> FunctionSignature:
    """Build the parameters schema and description for ``fn``; raise on unusable signatures.

    The parameters model is created lazily (see the module docstring) unless the fast
    schema path does not apply, in which case it is created here, as it always was.
    """
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

    model_name = f"{_camel(tool_name)}Params"
    lazy = LazyModel(model_name, tool_name, fields)
    schema: dict[str, Any] | None = None
    if _fast_path_applies(fields):
        try:
            schema = _fields_schema(fields)
        except Exception:  # whatever it is, the model path below reports it as before
            schema = None
    if schema is None:  # the model now, created exactly as it always was
        try:
            model = create_model(
                model_name,
                __config__=ConfigDict(**_MODEL_CONFIG),
                **fields,
            )
        except Exception as exc:  # pydantic raises several types for unusable annotations
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameters cannot be modelled: {exc}"
            ) from exc
        lazy = LazyModel.of(model, tool_name, fields)
    return FunctionSignature(
        params=lazy,
        schema=schema,
        description=description,
        context_param=context_param,
        is_async=inspect.iscoroutinefunction(fn),
    )
