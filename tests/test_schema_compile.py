"""External schemas are compiled when a tool is defined, and never fetch anything.

A schema is data from an untrusted party (an MCP server, a definitions file). It must
compile when the tool is defined (or the definitions file is checked), and no ``$ref``
or ``$schema`` may make tooldeck send a request or open a file: a real HTTP server on
127.0.0.1 counts requests, and a FIFO proves no file is opened (a reader blocks on it
until the watcher opens it for writing, so no read can slip by unseen).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import AfterValidator
from typer.testing import CliRunner

from tooldeck import ArgumentError, Dispatcher, SchemaError, Tool, Toolset, tool, validate_arguments
from tooldeck.cli import app
from tooldeck.registry import Handlers, RegistryError, ToolRegistry, check_document
from tooldeck.testing import call
from watchers import CountingServer, WatchedFifo

RUN = CliRunner()
ENV = {"COLUMNS": "200"}


def _noop(params: Any, ctx: Any) -> Any:
    return params


def external(schema: dict[str, Any], name: str = "ext") -> Tool:
    return Tool.from_schema(name=name, description="d", json_schema=schema, execute=_noop)


def wrap(sub: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"a": sub}, **top}


@pytest.fixture
def web() -> Iterator[CountingServer]:
    with CountingServer() as server:
        yield server


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[WatchedFifo]:
    with WatchedFifo(tmp_path) as watched:
        yield watched


def test_the_watchers_notice_a_fetch_and_a_read(web: CountingServer, fifo: WatchedFifo) -> None:
    # The instruments themselves: an ordinary client is seen by both.
    import urllib.request

    with urllib.request.urlopen(web.base + "/x.json") as response:
        assert json.loads(response.read()) == {"type": "string"}
    assert web.hits == ["/x.json"]
    assert json.loads(fifo.path.read_text()) == {"type": "string"}
    assert fifo.opened == 1


# -- uncompilable schemas --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("schema", "where", "why"),
    [
        (wrap({"type": "string", "pattern": "("}), "$['properties']['a']['pattern']", "regex"),
        (wrap({"$ref": "#/nope"}), "$['properties']['a']['$ref']", "'#/nope' points to nothing"),
        (wrap({"$ref": "#/$defs/missing"}), "$['properties']['a']['$ref']", "points to nothing"),
        (wrap({"$ref": "#nowhere"}), "$['properties']['a']['$ref']", "'#nowhere' points to"),
    ],
)
def test_an_uncompilable_schema_is_a_schema_error_at_definition(
    schema: dict[str, Any], where: str, why: str
) -> None:
    with pytest.raises(SchemaError) as info:
        external(schema)
    [problem] = info.value.problems
    assert problem.startswith(where + ": ") and why in problem, problem


def test_local_references_resolve() -> None:
    schemas = [
        wrap({"$ref": "#/$defs/s"}, **{"$defs": {"s": {"type": "string"}}}),
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            **wrap({"$ref": "#/definitions/s"}, definitions={"s": {"type": "string"}}),
        },
        wrap({"$ref": "#s"}, **{"$defs": {"x": {"$anchor": "s", "type": "string"}}}),
        # a base URI of its own changes nothing: "#..." is still this document
        wrap(
            {"$ref": "#/$defs/s"},
            **{"$id": "http://127.0.0.1:9/root.json", "$defs": {"s": {"type": "string"}}},
        ),
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$dynamicAnchor": "node",
            **wrap({"$dynamicRef": "#node"}),
        },
    ]
    for schema in schemas:
        t = external(schema)
        with pytest.raises(ArgumentError):
            validate_arguments(t, '{"a": 5}')
        if "$dynamicRef" not in json.dumps(schema):
            assert validate_arguments(t, '{"a": "x"}').params == {"a": "x"}


# -- nothing is ever fetched -----------------------------------------------------------------------
def remote_schemas(base: str) -> list[tuple[dict[str, Any], str]]:
    """Schemas that would fetch from ``base``, and where tooldeck says so."""
    at = "$['properties']['a']"
    return [
        (wrap({"$ref": f"{base}/a.json"}), f"{at}['$ref']"),
        (wrap({"$ref": f"{base}/a.json#/$defs/x"}), f"{at}['$ref']"),
        # relative, against the schema's own $id
        (wrap({"$ref": "other.json"}, **{"$id": f"{base}/root.json"}), f"{at}['$ref']"),
        (wrap({"$ref": "other.json#/a"}), f"{at}['$ref']"),
        (wrap({"$dynamicRef": f"{base}/meta.json#m"}), f"{at}['$dynamicRef']"),
        (wrap({"items": [{"$ref": f"{base}/b.json"}]}), f"{at}['items'][0]['$ref']"),
        (wrap({"anyOf": [{"type": "null"}, {"$ref": f"{base}/c"}]}), f"{at}['anyOf'][1]['$ref']"),
        ({"type": "object", "$defs": {"u": {"$ref": f"{base}/unused"}}}, "$['$defs']['u']['$ref']"),
        ({"$schema": f"{base}/meta.json", "type": "object"}, "$['$schema']"),
        # a local pointer into an unknown keyword that holds a remote reference: the
        # retriever refuses what the walk does not see
        (
            {"type": "object", "properties": {"a": {"$ref": "#/x-more"}}, "x-more": {"$ref": base}},
            "$",
        ),
    ]


def define_and_validate(schema: dict[str, Any]) -> Exception | None:
    """Define a tool on ``schema`` and validate one call (the code as it was fetched then)."""
    try:
        validate_arguments(external(schema), '{"a": 1}')
    except Exception as exc:
        return exc
    return None


def test_remote_references_are_refused_and_never_fetched(web: CountingServer) -> None:
    for schema, where in remote_schemas(web.base):
        outcome = define_and_validate(schema)
        assert web.hits == [], (schema, web.hits)
        assert isinstance(outcome, SchemaError), (schema, outcome)
        [problem] = outcome.problems
        assert problem.startswith(where + ": "), problem
        assert "never fetches" in problem, problem


def test_file_references_are_refused_and_never_read(fifo: WatchedFifo) -> None:
    uri = fifo.path.as_uri()
    directory = fifo.path.parent.as_uri() + "/"
    schemas = [
        wrap({"$ref": uri}),
        wrap({"$ref": uri + "#/type"}),
        wrap({"$ref": "target.json"}, **{"$id": directory + "root.json"}),
        {"$schema": uri, "type": "object"},
    ]
    for schema in schemas:
        outcome = define_and_validate(schema)
        assert fifo.opened == 0, schema
        assert isinstance(outcome, SchemaError) and "never fetches" in str(outcome), outcome


def test_the_definitions_file_and_tools_check_flag_bad_schemas(
    tmp_path: Path, web: CountingServer, fifo: WatchedFifo
) -> None:
    bad = {
        "pattern": wrap({"type": "string", "pattern": "("}),
        "missing_ref": wrap({"$ref": "#/nope"}),
        "remote_ref": wrap({"$ref": f"{web.base}/a.json"}),
        "file_ref": wrap({"$ref": fifo.path.as_uri()}),
    }
    entries = [
        {"name": name, "description": "d", "category": "demo", "input_schema": schema}
        for name, schema in bad.items()
    ]
    _definitions, problems = check_document({"tools": entries})
    assert len(problems) == 4, problems
    for index, (name, problem) in enumerate(zip(bad, problems, strict=True)):
        assert problem.startswith(f"tools[{index}] ({name}).input_schema['properties']['a']")

    handlers = Handlers("demo")
    for name in bad:
        handlers.add(name, lambda a=None: a)
    with pytest.raises(RegistryError) as info:
        ToolRegistry.from_document({"tools": entries}, [handlers])
    assert len(info.value.problems) == 4

    path = tmp_path / "definitions.json"
    path.write_text(json.dumps({"tools": entries}))
    result = RUN.invoke(app, ["tools", "check", str(path)], env=ENV)
    assert result.exit_code == 1, result.output
    assert "4 problem(s)" in result.output
    assert "'(' is not" in result.output or '"(" is not a "regex"' in result.output
    assert "'#/nope' points to nothing" in result.output
    assert result.output.count("never fetches") == 2
    assert web.hits == [] and fifo.opened == 0


# -- at call time: an ArgumentError, never an exception out of the dispatcher ---------------
def _lookup(value: str) -> str:
    return {"known": "yes"}[value]  # KeyError: pydantic passes it through unwrapped


@tool
def pick(choice: Annotated[str, AfterValidator(_lookup)]) -> str:
    """Pick one."""
    return choice


def test_a_validator_that_raises_is_an_argument_error_of_that_call() -> None:
    with pytest.raises(ArgumentError) as info:
        validate_arguments(pick, '{"choice": "other"}')
    assert "could not be checked (KeyError: 'other')" in info.value.model_message
    assert validate_arguments(pick, '{"choice": "known"}').params.choice == "yes"

    async def go() -> list[Any]:
        batch = [call("pick", {"choice": "other"}, call_id="a"), call("ext", {"a": 1}, call_id="b")]
        result = await Dispatcher(Toolset([pick, external(wrap({"type": "integer"}))])).dispatch(
            batch
        )
        return [o.result for o in result.outputs]

    bad, good = asyncio.run(go())
    assert bad.is_error and "could not be checked" in bad.text()
    assert not good.is_error


def test_a_schema_nested_too_deeply_is_a_schema_error() -> None:
    # A hostile server's schema must not escape as RecursionError (or crash the process).
    for depth in (300, 5000):
        schema: dict[str, Any] = {"type": "object"}
        node = schema
        for _ in range(depth):
            child: dict[str, Any] = {"type": "object"}
            node["properties"] = {"a": child}
            node = child
        with pytest.raises(SchemaError) as info:
            external(schema)
        [problem] = info.value.problems
        assert "too deeply" in problem or "Recursion limit" in problem, problem
        _definitions, problems = check_document(
            {
                "tools": [
                    {"name": "deep", "description": "d", "category": "c", "input_schema": schema}
                ]
            }
        )
        assert problems and all(p.startswith("tools[0] (deep).input_schema") for p in problems)
