"""Build ``bench/catalog/tools.json``: a large catalog of real tool definitions.

The catalog feeds the tool-search benchmark (``bench/bench_search.py``). Every tool keeps
its real name, description and parameter schema, plus a ``source`` saying exactly where
it came from. Four kinds of source:

- ``mcp-server``: real MCP servers' tool lists, transcribed (names, descriptions,
  parameter names/types/descriptions, nothing else) into ``sources/mcp_*.txt`` from each
  server's public repository, which every entry cites (``repo`` and ``path``);
- ``openapi``: every operation of OpenAI's public OpenAPI spec (``--openapi``, default
  ``/work/shared/reference/openai-openapi.yml``);
- ``google-discovery``: the methods of selected Google APIs, from the discovery documents
  that ``google-api-python-client`` ships (public repository googleapis/google-api-python-client);
- ``aws-botocore``: the operations of selected AWS services, from the service models that
  ``botocore`` ships (public repository boto/botocore).

Rebuild (the two packages are used by this script only; they are not project dependencies)::

    uv run --with google-api-python-client==2.202.0 --with botocore==1.44.8 \\
        python bench/catalog/build_catalog.py

AWS namespaces are ``aws_<service>``. Tool names are ``<namespace>__<original name>``
(sanitised to ``[A-Za-z0-9_-]``, at most 64 characters), so names from different servers
never collide. Long descriptions are cut
(tool: 700 characters, parameter: 300) and schemas are kept to two levels of nesting.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import html
import importlib.util
import json
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "sources"
DEFAULT_OPENAPI = Path("/work/shared/reference/openai-openapi.yml")
GOOGLE_PACKAGE = "google-api-python-client==2.202.0"
BOTOCORE_PACKAGE = "botocore==1.44.8"

TOOL_DESCRIPTION_LIMIT = 700
PARAM_DESCRIPTION_LIMIT = 300
MAX_DEPTH = 2

# Google APIs (discovery document file names) and AWS services (botocore data folders)
# taken whole. Chosen for breadth: mail, files, calendars, docs, video, chat, storage,
# queues, secrets, translation, speech, analytics, serverless functions, databases.
GOOGLE_APIS = (
    "gmail.v1",
    "drive.v3",
    "calendar.v3",
    "sheets.v4",
    "docs.v1",
    "slides.v1",
    "youtube.v3",
    "tasks.v1",
    "people.v1",
    "forms.v1",
    "chat.v1",
    "keep.v1",
    "blogger.v3",
    "customsearch.v1",
    "searchconsole.v1",
    "translate.v2",
    "meet.v2",
    "script.v1",
    "fitness.v1",
    "language.v2",
    "texttospeech.v1",
    "speech.v1",
    "analyticsdata.v1beta",
    "bigquery.v2",
    "storage.v1",
    "pubsub.v1",
    "secretmanager.v1",
)
AWS_SERVICES = (
    "s3",
    "lambda",
    "sqs",
    "sns",
    "dynamodb",
    "secretsmanager",
    "translate",
    "polly",
    "bedrock-runtime",
)

_NAME_OK = re.compile(r"[^A-Za-z0-9_-]+")
_MD_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_TAG = re.compile(r"<[^>]+>")
_SPACE = re.compile(r"\s+")


# -- helpers -----------------------------------------------------------------------------
def clean(text: Any, limit: int) -> str:
    """Plain one-paragraph text: markdown links and HTML tags removed, whitespace folded."""
    if not isinstance(text, str):
        return ""
    text = _MD_LINK.sub(r"\1", text)
    text = html.unescape(_TAG.sub(" ", text))
    text = _SPACE.sub(" ", text.replace("**", "").replace("`", "")).strip()
    if len(text) > limit:
        cut = text[:limit].rsplit(" ", 1)[0]
        text = cut.rstrip(" ,;:") + " ..."
    return text


def tool_name(namespace: str, original: str) -> str:
    name = _NAME_OK.sub("_", f"{namespace}__{original}")
    if len(name) > 64:
        digest = hashlib.sha1(name.encode()).hexdigest()[:6]
        name = f"{name[:57]}_{digest}"
    return name


def object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


# -- MCP servers (transcribed tool lists) -------------------------------------------------
_SIMPLE_TYPES = {"string", "number", "integer", "boolean", "object", "array"}


def _dsl_type(token: str) -> dict[str, Any]:
    if token.startswith("enum(") and token.endswith(")"):
        return {"type": "string", "enum": token[5:-1].split("|")}
    if token.endswith("[]"):
        return {"type": "array", "items": _dsl_type(token[:-2])}
    if token not in _SIMPLE_TYPES:
        raise ValueError(f"unknown type {token!r}")
    return {"type": token}


def _dsl_param(spec: str) -> tuple[str, dict[str, Any], bool]:
    """``name type[!] description`` -> (name, schema, required)."""
    parts = spec.split(None, 2)
    name = parts[0]
    if len(parts) == 1:
        return name, {"type": "string"}, False
    type_token = parts[1]
    required = type_token.endswith("!")
    schema = _dsl_type(type_token.rstrip("!"))
    if len(parts) == 3:
        schema["description"] = parts[2]
    return name, schema, required


def _nested_target(schema: dict[str, Any]) -> dict[str, Any]:
    """The object schema that nested (4-space) parameter lines add properties to."""
    target = schema["items"] if schema.get("type") == "array" else schema
    target["type"] = "object"
    target.setdefault("properties", {})
    return target


def parse_mcp_file(path: Path) -> Iterator[dict[str, Any]]:
    """Parse one ``sources/mcp_*.txt`` file (format: ``bench/catalog/README.md``)."""
    server: dict[str, Any] = {}
    shared: dict[str, tuple[dict[str, Any], bool]] = {}
    current: dict[str, Any] | None = None
    last_param: dict[str, Any] | None = None

    def finish() -> Iterator[dict[str, Any]]:
        if current is not None:
            yield current

    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{path.name}:{number}"
        if line.startswith("@"):
            key, _, value = line[1:].partition(" ")
            if key == "server":
                yield from finish()
                current = None
                server = {"namespace": value.strip()}
                shared = {}
            elif key == "source":
                repo, _, file = value.strip().partition(" ")
                server["source"] = {"kind": "mcp-server", "repo": repo, "path": file}
            elif key in ("title", "description"):
                server[key] = value.strip()
            elif key == "shared":
                name, schema, required = _dsl_param(value.strip())
                shared[name] = (schema, required)
            else:
                raise ValueError(f"{where}: unknown directive @{key}")
            continue
        indent = len(line) - len(line.lstrip(" "))
        body = line.strip()
        if indent == 0:
            yield from finish()
            name, sep, description = body.partition(" | ")
            if not sep:
                raise ValueError(f"{where}: expected 'name | description'")
            ns = server["namespace"]
            current = {
                "name": tool_name(ns, name.strip()),
                "description": description.strip(),
                "input_schema": object_schema({}, []),
                "namespace": ns,
                "namespace_description": server.get("description", ""),
                "source": {**server["source"], "tool": name.strip()},
            }
            last_param = None
            continue
        if current is None:
            raise ValueError(f"{where}: parameter outside a tool")
        root = current["input_schema"]
        if indent == 2 and body.startswith("+"):
            for ref in body.split():
                schema, required = shared[ref[1:]]
                root["properties"][ref[1:]] = json.loads(json.dumps(schema))
                if required:
                    root.setdefault("required", []).append(ref[1:])
            continue
        name, schema, required = _dsl_param(body)
        if indent == 2:
            target = root
            last_param = schema
        elif indent == 4 and last_param is not None:
            target = _nested_target(last_param)
        else:
            raise ValueError(f"{where}: bad indentation")
        target["properties"][name] = schema
        if required:
            target.setdefault("required", []).append(name)
    yield from finish()


def mcp_tools() -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    for path in sorted(SOURCES.glob("mcp_*.txt")):
        tools.extend(parse_mcp_file(path))
    return tools


# -- OpenAPI (OpenAI) ------------------------------------------------------------------------
class _OpenAPI:
    def __init__(self, spec: Mapping[str, Any]):
        self.spec = spec

    def resolve(self, node: Any) -> Any:
        seen = 0
        while isinstance(node, Mapping) and "$ref" in node and seen < 20:
            ref = node["$ref"]
            target: Any = self.spec
            for part in ref.lstrip("#/").split("/"):
                target = target[part]
            node = target
            seen += 1
        return node

    def simplify(self, node: Any, depth: int) -> dict[str, Any]:
        node = self.resolve(node)
        if not isinstance(node, Mapping):
            return {}
        if "allOf" in node:
            merged: dict[str, Any] = {"type": "object", "properties": {}}
            required: list[str] = []
            for part in node["allOf"]:
                sub = self.simplify(part, depth)
                merged["properties"].update(sub.get("properties", {}))
                required += sub.get("required", [])
                if "description" in sub and "description" not in merged:
                    merged["description"] = sub["description"]
            if required:
                merged["required"] = required
            if "description" in node:
                merged["description"] = clean(node["description"], PARAM_DESCRIPTION_LIMIT)
            return merged
        for key in ("anyOf", "oneOf"):
            if key in node:
                variants = [self.resolve(v) for v in node[key]]
                variants = [v for v in variants if isinstance(v, Mapping)]
                usable = [v for v in variants if v.get("type") != "null"] or variants
                chosen = next((v for v in usable if v.get("type") == "object"), usable[0])
                out = self.simplify(chosen, depth)
                if "description" in node:
                    out["description"] = clean(node["description"], PARAM_DESCRIPTION_LIMIT)
                return out
        out = {}
        kind = node.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "string")
        if isinstance(kind, str):
            out["type"] = kind
        elif "properties" in node:
            out["type"] = "object"
        if "description" in node:
            out["description"] = clean(node["description"], PARAM_DESCRIPTION_LIMIT)
        if isinstance(node.get("enum"), list):
            out["enum"] = [e for e in node["enum"] if isinstance(e, str | int | float)][:20]
        if kind == "array" and "items" in node and depth < MAX_DEPTH:
            out["items"] = self.simplify(node["items"], depth + 1)
        if isinstance(node.get("properties"), Mapping) and depth < MAX_DEPTH:
            out["type"] = "object"
            out["properties"] = {
                k: self.simplify(v, depth + 1) for k, v in node["properties"].items()
            }
            req = [r for r in node.get("required", []) if r in out["properties"]]
            if req:
                out["required"] = req
        return out


def openai_tools(openapi_path: Path) -> list[dict[str, Any]]:
    import yaml

    spec = yaml.safe_load(openapi_path.read_text(encoding="utf-8"))
    api = _OpenAPI(spec)
    ns_description = clean(spec.get("info", {}).get("description", ""), 300)
    tools = []
    for path, item in spec["paths"].items():
        shared_params = item.get("parameters", [])
        for method, op in item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            properties: dict[str, Any] = {}
            required: list[str] = []
            for raw in [*shared_params, *op.get("parameters", [])]:
                param = api.resolve(raw)
                schema = api.simplify(param.get("schema", {}), 1)
                if param.get("description"):
                    schema["description"] = clean(param["description"], PARAM_DESCRIPTION_LIMIT)
                properties[param["name"]] = schema
                if param.get("required"):
                    required.append(param["name"])
            content = api.resolve(op.get("requestBody", {})).get("content", {})
            for media in ("application/json", "multipart/form-data"):
                if media in content:
                    body = api.simplify(content[media].get("schema", {}), 0)
                    properties.update(body.get("properties", {}))
                    required += [r for r in body.get("required", []) if r not in required]
                    break
            summary = clean(op.get("summary", ""), 200)
            details = clean(op.get("description", ""), TOOL_DESCRIPTION_LIMIT)
            description = (
                summary if not details else f"{summary}. {details}" if summary else details
            )
            tools.append(
                {
                    "name": tool_name("openai", op["operationId"]),
                    "description": clean(description, TOOL_DESCRIPTION_LIMIT),
                    "input_schema": object_schema(properties, required),
                    "namespace": "openai",
                    "namespace_description": ns_description,
                    "source": {
                        "kind": "openapi",
                        "path": "shared/reference/openai-openapi.yml",
                        "operation": f"{method.upper()} {path}",
                        "operationId": op["operationId"],
                    },
                }
            )
    return tools


# -- Google discovery documents ---------------------------------------------------------------
def _package_dir(module: str, package: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        sys.exit(
            f"{module} is not importable; run with: uv run --with {GOOGLE_PACKAGE} "
            f"--with {BOTOCORE_PACKAGE} python bench/catalog/build_catalog.py ({package})"
        )
    return Path(spec.origin).parent


def _google_schema(doc: Mapping[str, Any], node: Mapping[str, Any], depth: int) -> dict[str, Any]:
    if "$ref" in node:
        target = doc.get("schemas", {}).get(node["$ref"], {})
        out = _google_schema(doc, target, depth) if depth < MAX_DEPTH else {"type": "object"}
        if "description" in node:
            out["description"] = clean(node["description"], PARAM_DESCRIPTION_LIMIT)
        return out
    out: dict[str, Any] = {}
    kind = node.get("type", "object" if "properties" in node else "string")
    out["type"] = kind if kind in _SIMPLE_TYPES else "string"
    if "description" in node:
        out["description"] = clean(node["description"], PARAM_DESCRIPTION_LIMIT)
    if isinstance(node.get("enum"), list):
        out["enum"] = node["enum"][:20]
    if kind == "array" and "items" in node and depth < MAX_DEPTH:
        out["items"] = _google_schema(doc, node["items"], depth + 1)
    if "properties" in node and depth < MAX_DEPTH:
        out["properties"] = {
            k: _google_schema(doc, v, depth + 1) for k, v in node["properties"].items()
        }
    return out


def _google_methods(resource: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield from resource.get("methods", {}).values()
    for child in resource.get("resources", {}).values():
        yield from _google_methods(child)


def google_tools() -> list[dict[str, Any]]:
    base = _package_dir("googleapiclient", GOOGLE_PACKAGE) / "discovery_cache" / "documents"
    tools = []
    for api in GOOGLE_APIS:
        doc = json.loads((base / f"{api}.json").read_text(encoding="utf-8"))
        ns = doc["name"]
        title, about = doc.get("title", ns), doc.get("description", "")
        owner = doc.get("ownerName", "Google")
        if owner.lower() not in title.lower():
            title = f"{owner} {title}"
        ns_description = clean(f"{title}. {about}" if about else title, 300)
        for method in _google_methods(doc):
            properties: dict[str, Any] = {}
            required: list[str] = []
            for pname, param in method.get("parameters", {}).items():
                properties[pname] = _google_schema(doc, param, 1)
                if param.get("required"):
                    required.append(pname)
            if "request" in method:
                body = _google_schema(doc, method["request"], 0)
                properties.update(body.get("properties", {}))
            method_id = method["id"]
            tools.append(
                {
                    "name": tool_name(ns, method_id.split(".", 1)[1].replace(".", "_")),
                    "description": clean(method.get("description", ""), TOOL_DESCRIPTION_LIMIT),
                    "input_schema": object_schema(properties, required),
                    "namespace": ns,
                    "namespace_description": ns_description,
                    "source": {
                        "kind": "google-discovery",
                        "package": GOOGLE_PACKAGE,
                        "path": f"googleapiclient/discovery_cache/documents/{api}.json",
                        "method": method_id,
                    },
                }
            )
    return tools


# -- AWS service models -----------------------------------------------------------------------
_AWS_TYPES = {
    "structure": "object",
    "map": "object",
    "list": "array",
    "string": "string",
    "blob": "string",
    "timestamp": "string",
    "integer": "integer",
    "long": "integer",
    "boolean": "boolean",
    "float": "number",
    "double": "number",
}


def _aws_schema(shapes: Mapping[str, Any], ref: Mapping[str, Any], depth: int) -> dict[str, Any]:
    shape = shapes[ref["shape"]]
    out: dict[str, Any] = {"type": _AWS_TYPES.get(shape["type"], "string")}
    doc = ref.get("documentation") or shape.get("documentation")
    if doc:
        out["description"] = clean(doc, PARAM_DESCRIPTION_LIMIT)
    if isinstance(shape.get("enum"), list):
        out["enum"] = shape["enum"][:20]
    if shape["type"] == "list" and depth < MAX_DEPTH:
        out["items"] = _aws_schema(shapes, shape["member"], depth + 1)
    if shape["type"] == "structure" and depth < MAX_DEPTH:
        out["properties"] = {
            k: _aws_schema(shapes, v, depth + 1) for k, v in shape.get("members", {}).items()
        }
    return out


def aws_tools() -> list[dict[str, Any]]:
    base = _package_dir("botocore", BOTOCORE_PACKAGE) / "data"
    tools = []
    for service in AWS_SERVICES:
        model_path = sorted((base / service).glob("*/service-2.json*"))[-1]
        opener = gzip.open if model_path.suffix == ".gz" else open
        with opener(model_path, "rt", encoding="utf-8") as fh:
            model = json.load(fh)
        shapes = model["shapes"]
        ns = "aws_" + service.replace("-", "_")
        meta = model["metadata"]
        ns_description = clean(
            f"{meta.get('serviceFullName', service)}. {model.get('documentation', '')}", 300
        )
        for op_name, op in model["operations"].items():
            if op.get("deprecated"):
                continue
            properties: dict[str, Any] = {}
            required: list[str] = []
            if "input" in op:
                shape = shapes[op["input"]["shape"]]
                for member, ref in shape.get("members", {}).items():
                    properties[member] = _aws_schema(shapes, ref, 1)
                required = list(shape.get("required", []))
            rel = model_path.relative_to(base.parent.parent)
            tools.append(
                {
                    "name": tool_name(ns, op_name),
                    "description": clean(op.get("documentation", ""), TOOL_DESCRIPTION_LIMIT),
                    "input_schema": object_schema(properties, required),
                    "namespace": ns,
                    "namespace_description": ns_description,
                    "source": {
                        "kind": "aws-botocore",
                        "package": BOTOCORE_PACKAGE,
                        "path": str(rel),
                        "operation": op_name,
                    },
                }
            )
    return tools


# -- assembly ---------------------------------------------------------------------------------
def build(openapi_path: Path) -> list[dict[str, Any]]:
    tools = [*mcp_tools(), *openai_tools(openapi_path), *google_tools(), *aws_tools()]
    seen: set[str] = set()
    for t in tools:
        if t["name"] in seen:
            raise ValueError(f"duplicate tool name {t['name']}")
        seen.add(t["name"])
        if not t["description"]:
            t["description"] = t["name"].split("__", 1)[1].replace("_", " ")
    return tools


def write(tools: list[dict[str, Any]], out: Path) -> None:
    counts: dict[str, int] = {}
    for t in tools:
        key = f"{t['source']['kind']}:{t['namespace']}"
        counts[key] = counts.get(key, 0) + 1
    header = {
        "version": 1,
        "description": "Real tool definitions for the tool-search benchmark; see build_catalog.py.",
        "count": len(tools),
        "counts": counts,
    }
    lines = [json.dumps(t, ensure_ascii=False, separators=(",", ":")) for t in tools]
    head = json.dumps(header, ensure_ascii=False, indent=1)[:-2]
    out.write_text(head + ',\n "tools": [\n' + ",\n".join(lines) + "\n]}\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--openapi", type=Path, default=DEFAULT_OPENAPI)
    parser.add_argument("--out", type=Path, default=HERE / "tools.json")
    args = parser.parse_args()
    tools = build(args.openapi)
    write(tools, args.out)
    json.loads(args.out.read_text(encoding="utf-8"))  # round-trip check
    kinds: dict[str, int] = {}
    for t in tools:
        kinds[t["source"]["kind"]] = kinds.get(t["source"]["kind"], 0) + 1
    size = args.out.stat().st_size / 1e6
    print(f"{args.out}: {len(tools)} tools ({kinds}), {size:.1f} MB")


if __name__ == "__main__":
    main()
