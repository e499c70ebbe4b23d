"""GitHub conformance checks for tests: is this request, answer, query or webhook one GitHub
would send or accept?

Built on GitHub's own published descriptions, copied into ``tests/fixtures/github`` (see
PROVENANCE.md there): the REST OpenAPI 3.0 subset, the public GraphQL schema (SDL) and
octokit/webhooks' JSON schemas. Every check returns a list of readable problems; ``[]`` means
it conforms. Parsed documents are cached for the whole process.

``GitHubConformance`` plugs these checks into ``app.sandbox.FakeGitHub`` as its ``Validator``.

Quirks of the data handled here:
- OpenAPI 3.0's ``nullable: true`` is not JSON Schema; it becomes ``type: [t, "null"]`` (or an
  ``anyOf`` with null when the schema has no ``type``), and ``null`` joins any ``enum``.
- ``{path}``, ``{ref}`` and ``{basehead}`` path parameters may contain ``/``.
- A GitHub Enterprise Server ``/api/v3`` prefix (or a full URL) is accepted and stripped.
- GitHub's SDL does not pass graphql-core's own schema validation (duplicate field definitions,
  deprecated fields implementing non-deprecated interface fields), so the schema is built with
  ``assume_valid``; documents are still validated against it normally.
- octokit's webhook schemas ``$ref`` one another by ``$id`` (``common/user.schema.json``), so all
  of them go into one ``referencing`` registry. Most forbid unlisted properties; live GitHub
  sends newer fields, so ``additionalProperties: false`` is dropped unless ``strict=True``.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import graphql
from graphql.execution.values import get_variable_values
from jsonschema import Draft4Validator, Draft7Validator
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4, DRAFT7

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "github"
OPENAPI_PATH = FIXTURES / "openapi" / "github-subset.json"
GRAPHQL_PATH = FIXTURES / "graphql" / "schema.graphql"
WEBHOOK_SCHEMAS = FIXTURES / "webhooks" / "schemas"
WEBHOOK_EXAMPLES = FIXTURES / "webhooks" / "examples"

REST_BASE_URI = "urn:github:rest"
HTTP_METHODS = ("get", "put", "post", "patch", "delete", "head", "options", "trace")
SLASHY_PARAMS = frozenset({"path", "ref", "basehead"})
MAX_REPORTED = 20


# =========================================================================== REST (OpenAPI 3.0)
def _openapi_to_json_schema(node: Any) -> Any:
    """Rewrite an OpenAPI schema tree into plain JSON Schema (draft 4 flavour).

    Local ``#/components/...`` references become absolute under ``REST_BASE_URI`` so any
    sub-schema can be used as a validation root with the registry.
    """
    if isinstance(node, list):
        return [_openapi_to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$ref" and isinstance(value, str) and value.startswith("#/"):
            converted[key] = REST_BASE_URI + value
        elif key == "properties" and isinstance(value, dict):
            # property *names* are data, not schema keywords: convert only their schemas
            converted[key] = {name: _openapi_to_json_schema(sub) for name, sub in value.items()}
        elif key in ("example", "examples", "enum", "default"):
            converted[key] = value
        else:
            converted[key] = _openapi_to_json_schema(value)
    if converted.pop("nullable", False) is True:
        kind = converted.get("type")
        if isinstance(kind, str):
            converted["type"] = [kind, "null"]
            if isinstance(converted.get("enum"), list) and None not in converted["enum"]:
                converted["enum"] = [*converted["enum"], None]
        else:
            converted = {"anyOf": [converted, {"type": "null"}]}
    return converted


@dataclass(frozen=True)
class _PathTemplate:
    template: str
    regex: re.Pattern[str]
    literal_length: int


@dataclass(frozen=True)
class _Rest:
    document: dict[str, Any]
    registry: Registry[Any]
    templates: tuple[_PathTemplate, ...]


@functools.cache
def _rest() -> _Rest:
    raw = json.loads(OPENAPI_PATH.read_text(encoding="utf-8"))
    document = _openapi_to_json_schema(raw)
    registry: Registry[Any] = Registry().with_resource(
        REST_BASE_URI, Resource.from_contents(document, default_specification=DRAFT4)
    )
    templates = []
    for template in document["paths"]:
        pattern = ""
        for literal, name in re.findall(r"([^{]*)(?:\{(\w+)\})?", template):
            pattern += re.escape(literal)
            if name:
                pattern += f"(?P<{name}>{'.+' if name in SLASHY_PARAMS else '[^/]+'})"
        literal_length = len(re.sub(r"\{\w+\}", "", template))
        templates.append(_PathTemplate(template, re.compile(pattern + "/?"), literal_length))
    # Prefer the template with the most literal text: /pulls/comments/{id} before /pulls/{number}.
    templates.sort(key=lambda t: -t.literal_length)
    return _Rest(document, registry, tuple(templates))


def _follow(node: Any) -> Any:
    """Resolve a component ``$ref`` (parameters, requestBodies, responses) to its object."""
    document = _rest().document
    while isinstance(node, dict) and isinstance(node.get("$ref"), str):
        pointer = node["$ref"].split("#/", 1)[1]
        target: Any = document
        for part in pointer.split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        node = target
    return node


def _where(error: ValidationError) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)


def _check_schema(schema: dict[str, Any], instance: Any, label: str) -> list[str]:
    validator = Draft4Validator(schema, registry=_rest().registry)
    found = sorted(f"{label}{_where(e)}: {e.message[:240]}" for e in validator.iter_errors(instance))
    return found[:MAX_REPORTED]


def _json_media_schema(content: dict[str, Any] | None) -> dict[str, Any] | None:
    if not content:
        return None
    for media, entry in content.items():
        if (media == "application/json" or "json" in media) and isinstance(entry, dict) and "schema" in entry:
            schema: dict[str, Any] = entry["schema"]
            return schema
    return None


@dataclass
class _Operation:
    template: str
    path_item: dict[str, Any]
    operation: dict[str, Any] | None
    path_params: dict[str, str]
    url_query: dict[str, str]


def _split_target(path: str) -> tuple[str, dict[str, str]]:
    parts = urlsplit(path)
    concrete = re.sub(r"^/api/v3(?=/|$)", "", parts.path) or "/"
    return concrete, dict(parse_qsl(parts.query, keep_blank_values=True))


def _find_operation(method: str, path: str) -> _Operation | str:
    concrete, url_query = _split_target(path)
    rest = _rest()
    for candidate in rest.templates:
        found = candidate.regex.fullmatch(concrete)
        if found is None:
            continue
        item = rest.document["paths"][candidate.template]
        params = {k: unquote(v) for k, v in found.groupdict().items()}
        return _Operation(candidate.template, item, item.get(method.lower()), params, url_query)
    return f"{method.upper()} {concrete}: no path of GitHub's REST description (subset) matches"


def _typed(value: str, schema: dict[str, Any]) -> Any:
    """A URL string as the integer/number/boolean its schema wants, when it spells one."""
    kinds = schema.get("type")
    kinds = set(kinds) if isinstance(kinds, list) else {kinds}
    if "integer" in kinds and re.fullmatch(r"-?\d+", value):
        return int(value)
    if "number" in kinds and re.fullmatch(r"-?\d+(\.\d+)?", value):
        return float(value)
    if "boolean" in kinds and value in ("true", "false"):
        return value == "true"
    return value


def validate_request(method: str, path: str, body: Any, query: dict[str, Any] | None = None) -> list[str]:
    """Would GitHub accept this call? Path template, method, parameters, and the JSON body.

    ``path`` is a concrete path with an optional query string (or a full URL); ``body`` None
    means the request had no body.
    """
    found = _find_operation(method, path)
    if isinstance(found, str):
        return [found]
    if found.operation is None:
        allowed = sorted(m.upper() for m in found.path_item if m in HTTP_METHODS)
        return [f"{method.upper()} is not an operation of {found.template} (it has {', '.join(allowed)})"]
    operation = found.operation
    problems: list[str] = []
    declared = [
        _follow(p) for p in [*found.path_item.get("parameters", []), *operation.get("parameters", [])]
    ]
    by_place = {(p["in"], p["name"]): p for p in declared}
    query_values = {**found.url_query, **{k: str(v) for k, v in (query or {}).items()}}
    for (place, name), param in by_place.items():
        schema = param.get("schema", {})
        if place == "path":
            value = found.path_params.get(name, "")
            if value == "":
                problems.append(f"path parameter {name!r} is empty")
            else:
                problems += _check_schema(schema, _typed(value, schema), f"path parameter {name}")
        elif place == "query":
            if name in query_values:
                problems += _check_schema(
                    schema, _typed(query_values[name], schema), f"query parameter {name}"
                )
            elif param.get("required"):
                problems.append(f"required query parameter {name!r} is missing")
    known_query = {name for place, name in by_place if place == "query"}
    for name in query_values:
        if name not in known_query:
            problems.append(f"query parameter {name!r} is not defined for {method.upper()} {found.template}")
    request_body = _follow(operation["requestBody"]) if "requestBody" in operation else None
    if body is None:
        if request_body is not None and request_body.get("required"):
            problems.append(f"{method.upper()} {found.template} needs a JSON body")
    elif request_body is None:
        problems.append(f"{method.upper()} {found.template} takes no body")
    else:
        schema = _json_media_schema(request_body.get("content"))
        if schema is not None:
            problems += _check_schema(schema, body, "body")
    return problems


def validate_response(
    method: str, path: str, status: int, body: Any, *, strict_status: bool = False
) -> list[str]:
    """Does this answer have the shape GitHub documents for that operation and status?

    A status GitHub does not document for the operation is skipped, or reported with
    ``strict_status``; a documented status without a JSON schema (204, 304) wants no body.
    """
    found = _find_operation(method, path)
    if isinstance(found, str):
        return [found]
    if found.operation is None:
        return [f"{method.upper()} is not an operation of {found.template}"]
    responses = found.operation.get("responses", {})
    key = next((k for k in (str(status), f"{status // 100}XX", "default") if k in responses), None)
    if key is None:
        if not strict_status:
            return []
        documented = ", ".join(sorted(responses))
        return [f"{method.upper()} {found.template} does not document status {status} (only {documented})"]
    schema = _json_media_schema(_follow(responses[key]).get("content"))
    if schema is None:  # 204/304, or an error GitHub documents without a body shape
        return []
    if body is None:
        return [f"{method.upper()} {found.template} -> {status} needs a JSON body"]
    return _check_schema(schema, body, "response")


def documented_examples() -> Iterator[tuple[str, dict[str, Any], Any]]:
    """(label, schema, example) for every response example GitHub ships with the subset."""
    for template, item in _rest().document["paths"].items():
        for method, operation in item.items():
            if method not in HTTP_METHODS:
                continue
            for status, response in operation.get("responses", {}).items():
                for media in (_follow(response).get("content") or {}).values():
                    for example in (media.get("examples") or {}).values():
                        value = _follow(example).get("value")
                        if "schema" in media and value is not None:
                            yield f"{method.upper()} {template} {status}", media["schema"], value


# ====================================================================================== GraphQL
@functools.cache
def graphql_schema() -> graphql.GraphQLSchema:
    source = GRAPHQL_PATH.read_text(encoding="utf-8")
    return graphql.build_ast_schema(
        graphql.parse(source, no_location=True), assume_valid=True, assume_valid_sdl=True
    )


def _graphql_message(error: graphql.GraphQLError) -> str:
    places = ", ".join(f"{loc.line}:{loc.column}" for loc in error.locations or ())
    return f"{error.message} (at {places})" if places else error.message


def validate_graphql(
    query: str, variables: dict[str, Any] | None = None, operation_name: str | None = None
) -> list[str]:
    """Syntax, validation against GitHub's schema, and (when given) coercion of the variables."""
    schema = graphql_schema()
    try:
        document = graphql.parse(query)
    except graphql.GraphQLError as error:
        return [f"syntax: {_graphql_message(error)}"]
    problems = [_graphql_message(e) for e in graphql.validate(schema, document)]
    if problems or variables is None:
        return problems
    operations = [d for d in document.definitions if isinstance(d, graphql.OperationDefinitionNode)]
    if operation_name is not None:
        operations = [o for o in operations if o.name is not None and o.name.value == operation_name]
    if len(operations) != 1:
        return [f"expected exactly one operation to run, found {len(operations)}"]
    coerced = get_variable_values(schema, operations[0].variable_definitions or (), variables)
    return [_graphql_message(e) for e in coerced] if isinstance(coerced, list) else []


# ===================================================================================== webhooks
def _without_closed_objects(node: Any) -> Any:
    if isinstance(node, list):
        return [_without_closed_objects(item) for item in node]
    if isinstance(node, dict):
        return {
            k: _without_closed_objects(v)
            for k, v in node.items()
            if not (k == "additionalProperties" and v is False)
        }
    return node


@dataclass(frozen=True)
class _Webhooks:
    registry: Registry[Any]
    by_event: dict[str, dict[str, str]]  # event -> action (or "event") -> schema $id


@functools.cache
def _webhooks(strict: bool) -> _Webhooks:
    resources: list[tuple[str, Resource[Any]]] = []
    by_event: dict[str, dict[str, str]] = {}
    for file in sorted(WEBHOOK_SCHEMAS.glob("*/*.schema.json")):
        schema = json.loads(file.read_text(encoding="utf-8"))
        contents = schema if strict else _without_closed_objects(schema)
        resources.append((schema["$id"], Resource.from_contents(contents, default_specification=DRAFT7)))
        if file.parent.name != "common":
            by_event.setdefault(file.parent.name, {})[file.name.removesuffix(".schema.json")] = schema["$id"]
    return _Webhooks(Registry().with_resources(resources), by_event)


def validate_webhook(event: str, payload: dict[str, Any], *, strict: bool = False) -> list[str]:
    """Does a delivery fit octokit's schema for its event and action?"""
    hooks = _webhooks(strict)
    schemas = hooks.by_event.get(event)
    if not schemas:
        return [f"no schema for webhook event {event!r}"]
    action = payload.get("action")
    if action is not None and action not in schemas:
        return [f"{event}: no schema for action {action!r} (known: {', '.join(sorted(schemas))})"]
    candidates = [schemas[action]] if action is not None else list(schemas.values())
    fewest: list[str] | None = None
    for schema_id in candidates:
        validator = Draft7Validator({"$ref": schema_id}, registry=hooks.registry)
        found = sorted(f"{event}{_where(e)}: {e.message[:240]}" for e in validator.iter_errors(payload))
        if not found:
            return []
        if fewest is None or len(found) < len(fewest):
            fewest = found
    return (fewest or [])[:MAX_REPORTED]


def webhook_examples(event: str | None = None) -> list[tuple[str, str, dict[str, Any]]]:
    """(event, example name, payload) for the stored real payloads."""
    folders = (
        [WEBHOOK_EXAMPLES / event] if event else sorted(p for p in WEBHOOK_EXAMPLES.iterdir() if p.is_dir())
    )
    out = []
    for folder in folders:
        for file in sorted(folder.glob("*.json")):
            out.append(
                (folder.name, file.name.removesuffix(".json"), json.loads(file.read_text(encoding="utf-8")))
            )
    return out


# ==================================================================================== validator
class GitHubConformance:
    """``app.sandbox.Validator`` built on the checks above (webhooks tolerate newer fields)."""

    def request(self, method: str, path_with_query: str, body: Any) -> list[str]:
        return validate_request(method, path_with_query, body)

    def graphql(self, query: str, variables: dict[str, Any] | None) -> list[str]:
        return validate_graphql(query, variables if variables is not None else {})

    def webhook(self, event: str, payload: dict[str, Any]) -> list[str]:
        return validate_webhook(event, payload)
