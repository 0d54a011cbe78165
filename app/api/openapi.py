"""The OpenAPI document: what flask-smorest generates from the schemas, made exact.

The document is the contract a client (or schemathesis, tests/api/test_schemathesis.py)
checks requests and answers against, so it says exactly what the service does:

- path parameters carry the naming rule (converters that route like ``string`` but document
  a pattern), so that clients and fuzzers know which names can exist (the service answers
  404 for the others, and 400 where a PUT would create an object by such a name);
- ``OneOf`` fields are documented as ``oneOf`` of their shapes, and a nullable nested object
  as "that object or null" (apispec writes "any object or null");
- every operation lists each status it can answer, with the problem+json schema, and no
  catch-all ``default``: 400 (request not of the documented shape), 401 (sign-in required,
  when it is), 403 (a change from another origin, and with sign-in a right short of the
  route's), 413 (body over the limit), 503 (store unreachable), plus each view's own
  (404, 409, 422, 429) from ``Blueprint.problems``;
- the security requirement follows QUARRY_AUTH_REQUIRED, and public views need none;
- every operation has an operationId (its view's name), and what a create answers links to
  the operations on the object it made (OpenAPI links), so that a client or a stateful
  fuzzer knows that ``project`` is the new project's name.

The ``Api`` object itself (``QuarryApi``) lives here too, not in ``extensions.py``:
documenting the error responses needs the problem schema (``schemas``), a floor above the
extensions (tests/test_layers.py).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from copy import deepcopy
from http import HTTPStatus
from typing import Any

from apispec.ext.marshmallow.field_converter import FieldConverterMixin
from flask import Flask
from flask_smorest import Api
from marshmallow import fields
from werkzeug.routing import BaseConverter, PathConverter

from ..errors import PROBLEM_JSON, from_http_exception
from ..rules.names import SYSTEM_DATABASE
from ..schemas.common import (
    DATABASE_NAME_REGEX,
    MODEL_REF_REGEX,
    NAME_REGEX,
    REF_REGEX,
    OneOf,
    ProblemSchema,
)
from ..services.auth import USER_NAME
from ..services.queries import QUERY_ID
from ..sql.formats import MEDIA_TYPES

METHODS = ("get", "put", "post", "delete", "patch")
# The methods app/security.py refuses from another origin.
UNSAFE_METHODS = ("put", "post", "delete", "patch")


class QuarryApi(Api):
    """flask-smorest's Api, answering its errors in the one problem+json envelope.

    The blueprints' routes are registered at once, their operations written into the
    document when it is first read (``spec``): building it is half of what making an app
    costs (~50 ms of CPU), and a worker that never serves /api/openapi.json never needs it.
    """

    # No catch-all "default" answer in the document: each operation lists the statuses it
    # gives (``document`` below), so that an undocumented one is a finding, not "default".
    DEFAULT_ERROR_RESPONSE_NAME = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._undocumented: list[tuple[Any, str, Any]] = []
        self._finish: Callable[[], None] | None = None
        self._documenting = threading.Lock()
        self._writer: int | None = None  # the thread writing the document, while it does
        self._responses_unwritten = False
        super().__init__(*args, **kwargs)

    def init_app(self, app: Flask, *, spec_kwargs: dict | None = None) -> None:
        # This app's blueprints only: one bound before it is never documented now.
        self._undocumented, self._finish = [], None
        super().init_app(app, spec_kwargs=spec_kwargs)

    @property
    def spec(self) -> Any:
        """The document; the blueprints' operations and ``finish`` added at the first read."""
        # The writer's own reads (``finish`` reads the document) take it as it stands; a
        # request meanwhile waits for the whole of it.
        if self._finish is not None and self._writer != threading.get_ident():
            with self._documenting:
                if self._finish is not None:
                    self._writer = threading.get_ident()
                    try:
                        self._write_operations()
                    finally:
                        self._writer, self._finish = None, None
        return self._spec

    @spec.setter
    def spec(self, value: Any) -> None:
        self._spec = value

    def register_blueprint(self, blp: Any, *, parameters: Any = None, **options: Any) -> None:
        """flask-smorest's, with the blueprint's operations left for the first read."""
        name = options.get("name", blp.name)
        self._app.extensions["flask-smorest"]["blp_name_to_api"][name] = self
        self._app.register_blueprint(blp, **options)
        self._undocumented.append((blp, name, parameters))

    def document_when_read(self, finish: Callable[[], None]) -> None:
        """After the blueprints: ``finish`` completes the document after their operations."""
        self._finish = finish

    def _write_operations(self) -> None:
        finish = self._finish
        if self._responses_unwritten:
            self._responses_unwritten = False
            self._write_responses()
        undocumented, self._undocumented = self._undocumented, []
        for blp, name, parameters in undocumented:
            blp.register_views_in_doc(self, self._app, self._spec, name=name,
                                      parameters=parameters)
            self._spec.tag({"name": name, "description": blp.description})
        if finish is not None:
            finish()

    def handle_http_exception(self, error):
        return from_http_exception(error)

    def _register_responses(self):
        # Left for the first read too: resolving the error responses' schemas was half of
        # what was left of making an app (~17 ms of CPU; every test makes one or more).
        self._responses_unwritten = True

    def _write_responses(self):
        """Document the error responses as they are sent: problem+json problem documents.

        flask-smorest documents its own ErrorSchema as application/json; clients that check
        responses against the OpenAPI document (schemathesis does) would see every error as
        undocumented.
        """
        self.ERROR_SCHEMA = ProblemSchema
        self.DEFAULT_RESPONSE_CONTENT_TYPE = PROBLEM_JSON
        try:
            super()._register_responses()
        finally:
            del self.DEFAULT_RESPONSE_CONTENT_TYPE  # success responses stay application/json


# Created unbound, bound to the app in the factory (like the extensions).
openapi = QuarryApi()


class _DocumentedSegment(BaseConverter):
    """One path segment, routed as ``string`` does: the view decides what it names (404)."""

    doc: dict[str, Any] = {}


class NameConverter(_DocumentedSegment):
    doc = {"type": "string", "pattern": NAME_REGEX, "minLength": 1, "maxLength": 63,
           "example": "mindsdb"}  # the default project, always there


class RefConverter(_DocumentedSegment):
    # An ID is at most 10 digits (MAX_ID); no name is longer than 63 characters.
    doc = {"type": "string", "pattern": REF_REGEX, "minLength": 1, "maxLength": 63,
           "description": "A name, or an ID (all digits)"}


class ModelRefConverter(_DocumentedSegment):
    doc = {"type": "string", "pattern": MODEL_REF_REGEX, "minLength": 1, "maxLength": 74,
           "description": "A model's name, or name.version for one version",
           "example": "iris_model"}


class DatabaseConverter(_DocumentedSegment):
    # /api/databases/status is the connection check (POST): a data source named "status" is
    # reached by SQL only, so that the two paths never overlap (nor their Allow headers).
    regex = "(?!status(?:/|$))[^/]+"
    # information_schema (any case) is SQL's catalogue: no data source has that name (400).
    doc = {"type": "string", "pattern": "^(?!status$)(?!" + "".join(
        f"[{c.upper()}{c}]" if c.isalpha() else c for c in SYSTEM_DATABASE) + "$)"
        + DATABASE_NAME_REGEX[1:],
           "minLength": 1, "maxLength": 63, "example": "demo"}


class UserConverter(_DocumentedSegment):
    doc = {"type": "string", "pattern": f"^{USER_NAME.pattern}$", "minLength": 1,
           "maxLength": 63, "description": "A user's name (flask auth create-user)"}


class FileNameConverter(PathConverter):
    """A file's name: every path reaches the view, which refuses a name that breaks the
    naming rule (400) rather than letting it fall through to another route (or to a 404 no
    PUT documents): ``../x``, ``a/b``, a line break."""

    regex = "[^/](?s:.)*?"
    doc = {"type": "string", "pattern": NAME_REGEX, "minLength": 1, "maxLength": 63,
           "example": "rentals"}


class QueryIdConverter(_DocumentedSegment):
    doc = {"type": "string", "pattern": f"^{QUERY_ID.pattern}$", "minLength": 32,
           "maxLength": 32, "description": "A running statement's query_id"}


CONVERTERS = {"name": NameConverter, "ref": RefConverter, "model_ref": ModelRefConverter,
              "database": DatabaseConverter, "user": UserConverter,
              "file_name": FileNameConverter, "query_id": QueryIdConverter}


def register_converters(app: Flask, api: Api) -> None:
    """Before the blueprints: their rules name these converters."""
    for key, converter in CONVERTERS.items():
        app.url_map.converters[key] = converter
        api.flask_plugin.register_converter(converter, lambda c: dict(c.doc))
    api.ma_plugin.converter.add_attribute_function(_one_of)
    api.ma_plugin.converter.add_attribute_function(_nullable_nested)


def _one_of(self: FieldConverterMixin, field: fields.Field, ret: dict, **_: Any) -> dict:
    if not isinstance(field, OneOf):
        return {}
    return {"oneOf": [self.field2property(alternative) for alternative in field.alternatives]}


def _nullable_nested(self: FieldConverterMixin, field: fields.Field, ret: dict,
                     **_: Any) -> dict:
    # apispec documents Nested(allow_none=True) as anyOf [{type: object, nullable: true},
    # $ref], whose first branch admits any object; enum [null] narrows it to null only.
    options = ret.get("anyOf")
    if not (isinstance(field, fields.Nested) and field.allow_none and options):
        return {}
    return {"anyOf": [{**option, "enum": [None]} if option.get("nullable") else option
                      for option in options]}


def document(app: Flask, api: Api) -> None:
    """After the blueprints: the unprefixed paths, the common answers, security, links."""
    _document_unprefixed(api)
    _document_common_problems(app, api)
    _document_sql_formats(api)
    _document_upload(api)
    _document_text(api)
    _document_security(app, api)
    _document_links(app, api)


def _document_unprefixed(api: Api) -> None:
    """Add the unprefixed skill and agent paths to the OpenAPI document as well."""
    paths = api.spec._paths  # apispec keeps no public accessor for registered paths
    for path, operations in list(paths.items()):
        # Completions are served under /api only (as MindsDB serves them).
        if path.startswith("/api/projects/{project}/") and "/completions" not in path and (
                "/skills" in path or "/agent" in path):
            paths.setdefault(path.removeprefix("/api"), deepcopy(operations))


def openapi_path(rule: str) -> str:
    """A werkzeug rule as the OpenAPI document writes it: /p/<name:project> → /p/{project}."""
    return re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule)


def _public_operations(app: Flask) -> set[tuple[str, str]]:
    """(OpenAPI path, method) of every view marked ``@public``."""
    found = set()
    for rule in app.url_map.iter_rules():
        view = app.view_functions.get(rule.endpoint)
        if getattr(view, "quarry_public", False):
            found.update((openapi_path(rule.rule), method.lower())
                         for method in rule.methods or ())
    return found


def _problem(api: Api, status: int) -> dict[str, str]:
    # flask-smorest registers a problem response per status lazily; a reference made
    # through get_ref registers it for real.
    return api.spec.components.get_ref("response", HTTPStatus(status).name)


def _document_common_problems(app: Flask, api: Api) -> None:
    public = _public_operations(app)
    auth_required = app.config["AUTH_REQUIRED"]
    for path, item in api.spec._paths.items():
        for method, operation in item.items():
            if method not in METHODS:
                continue
            responses = operation.setdefault("responses", {})
            common = [503]
            if "requestBody" in operation:
                # 422: text no store can keep (a NUL character, app/jsonio.py), in any body.
                common += [400, 413, 422]
            if auth_required and (path, method) not in public:
                common += [401, 403]  # not signed in; a role or grant short of the route's
            elif method in UNSAFE_METHODS:
                common += [403]  # a browser's change for a page elsewhere (app/security.py)
            for status in common:
                responses.setdefault(str(status), _problem(api, status))


def _document_sql_formats(api: Api) -> None:
    """POST /api/sql/query answers in the format ``response_format`` (or Accept) chooses:
    one JSON document, or a stream (jsonlines, sse, csv, arrow; docs/sql.md)."""
    operation = api.spec._paths.get("/api/sql/query", {}).get("post")
    if operation is None:
        return
    content = operation["responses"]["200"].setdefault("content", {})
    for media_type in MEDIA_TYPES.values():
        content.setdefault(media_type, {})  # lines, events, CSV or Arrow: docs/sql.md


def _document_upload(api: Api) -> None:
    """PUT /api/files/{name} reads its multipart form itself, as it streams (app/api/files.py):
    the form is not a schema's, so it is documented here. A form without the file part is
    refused (400); the other fields MindsDB's clients send are read or ignored."""
    operation = api.spec._paths.get("/api/files/{name}", {}).get("put")
    if operation is None:
        return
    operation["requestBody"] = {"required": True, "content": {"multipart/form-data": {
        "schema": {"type": "object", "required": ["file"], "properties": {
            "file": {"type": "string", "format": "binary",
                     "description": "CSV, TSV, JSON, Parquet or XLSX; the format is sniffed"},
        }, "additionalProperties": True}}}}  # other parts: read (MindsDB's) or ignored


# Text a JSON body may hold (app/jsonio.py): no NUL character, in values and keys alike. The
# pattern is stated on every string and every free-form object a request body holds, so that
# the document says what the service refuses (422: a value no store can keep; a generator
# may not apply ``propertyNames`` to an object's keys, so the body may otherwise be of the
# documented shape). Answers are not constrained: a problem's detail may quote the text.
TEXT_PATTERN = "^[^\\u0000]*$"
JSON_VALUE = "JsonValue"


def _document_text(api: Api) -> None:
    """State the text rule on every string schema of a request body (except those that
    already say exactly what they take: a pattern, an enum, a format) and make free-form
    objects there hold only JSON values whose strings and keys follow it."""
    ref = {"$ref": f"#/components/schemas/{JSON_VALUE}"}
    schemas = api.spec.components.schemas
    # JSON bodies only: a multipart form's parts are text Quarry reads or ignores itself.
    bodies = [media.get("schema", {})
              for item in api.spec._paths.values()
              for method, operation in item.items() if method in METHODS
              for kind, media in operation.get("requestBody", {}).get("content", {}).items()
              if kind == "application/json"]
    for name in _referenced(bodies, schemas):
        _text_rule(schemas[name], ref)
    for schema in bodies:
        _text_rule(schema, ref)
    api.spec.components.schema(JSON_VALUE, {
        "description": "Any JSON value; strings and keys hold no NUL character",
        "nullable": True,
        "oneOf": [
            {"type": "string", "pattern": TEXT_PATTERN},
            {"type": "number"},
            {"type": "boolean"},
            {"type": "array", "items": ref},
            {"type": "object", "propertyNames": {"pattern": TEXT_PATTERN},
             "additionalProperties": ref},
        ]})


def _referenced(roots: list[Any], schemas: dict[str, Any]) -> set[str]:
    """The names of the component schemas ``roots`` refer to, directly or through others."""
    found: set[str] = set()
    todo = list(roots)
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            target = node.get("$ref", "")
            if isinstance(target, str) and target.startswith("#/components/schemas/"):
                name = target.rsplit("/", 1)[1]
                if name not in found and name in schemas:
                    found.add(name)
                    todo.append(schemas[name])
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    return found


def _text_rule(schema: Any, ref: dict[str, str]) -> None:
    if not isinstance(schema, dict) or "$ref" in schema:
        return
    if schema.get("type") == "string" and not {"pattern", "enum", "format"} & set(schema):
        schema["pattern"] = TEXT_PATTERN
    if schema.get("type") == "object" and schema.get("additionalProperties") is not False:
        if schema.get("additionalProperties") in ({}, None, True):
            schema["additionalProperties"] = dict(ref)
        schema.setdefault("propertyNames", {"pattern": TEXT_PATTERN})
    for key in ("items", "additionalProperties", "not"):
        _text_rule(schema.get(key), ref)
    for key in ("properties",):
        for value in (schema.get(key) or {}).values():
            _text_rule(value, ref)
    for key in ("oneOf", "anyOf", "allOf"):
        for value in schema.get(key) or []:
            _text_rule(value, ref)


def _document_security(app: Flask, api: Api) -> None:
    """The three ways to sign in (docs/deploy.md); required only when sign-in is on."""
    spec = api.spec
    spec.components.security_scheme("bearer", {"type": "http", "scheme": "bearer"})
    spec.components.security_scheme("apiKey", {"type": "apiKey", "in": "header",
                                               "name": "X-Api-Key"})
    spec.components.security_scheme("session", {"type": "apiKey", "in": "cookie",
                                                "name": "session"})
    ways: list[dict[str, list]] = [{"bearer": []}, {"apiKey": []}, {"session": []}]
    if not app.config["AUTH_REQUIRED"]:
        ways.append({})  # anonymous callers are served too
    spec.options["security"] = ways
    for path, method in _public_operations(app):
        operation = spec._paths.get(path, {}).get(method)
        if operation is not None:
            operation["security"] = [{}]


# What a create (or an update) answers, and the operations that then act on the object it
# names: operationId → (statuses, {operationId of the follow-up: its parameters}). The
# unprefixed skill and agent operations link to their unprefixed follow-ups.
_IN_PROJECT = {"project": "$request.path.project", "ref": "$response.body#/name"}
_SKILL = ("get_skill", "put_skill", "delete_skill")
_AGENT = ("get_agent", "update_agent", "delete_agent", "delete_agent_singular")
_LINKS: dict[str, tuple[tuple[str, ...], dict[str, dict[str, str]]]] = {
    # Not list_skills: its ?agent= may name no agent (404), which would read as the project
    # missing to a client (or fuzzer) following the link.
    "create_project": (("201",), {
        follower: {"project": "$response.body#/name"}
        for follower in ("get_project", "delete_project", "create_skill", "list_agents",
                         "create_agent", "list_models", "create_model", "list_members",
                         "list_saved_queries", "save_query", "list_views", "create_view",
                         "list_knowledge_bases", "create_knowledge_base", "list_jobs",
                         "create_job")}),
    "create_database": (("201",), dict.fromkeys(
        ("get_database", "update_database", "delete_database", "list_tables"),
        {"name": "$response.body#/name"})),
    "save_query": (("201",), {"delete_saved_query": {"project": "$request.path.project",
                                                     "name": "$response.body#/name"}}),
    "create_skill": (("201",), dict.fromkeys(_SKILL, _IN_PROJECT)),
    "put_skill": (("200", "201"), dict.fromkeys(_SKILL, _IN_PROJECT)),
    "create_agent": (("201",), dict.fromkeys(_AGENT, _IN_PROJECT)),
    "update_agent": (("200",), dict.fromkeys(_AGENT, _IN_PROJECT)),
    "create_view": (("201",), dict.fromkeys(("get_view", "update_view", "delete_view"),
                                            {"project": "$request.path.project",
                                             "name": "$response.body#/name"})),
    "create_knowledge_base": (("201",), dict.fromkeys(
        ("get_knowledge_base", "insert_into_knowledge_base", "delete_knowledge_base"),
        {"project": "$request.path.project", "name": "$response.body#/name"})),
    "create_job": (("201",), dict.fromkeys(
        ("get_job", "drop_job", "job_history"),
        {"project": "$request.path.project", "name": "$response.body#/name"})),
    "create_model": (("201",), dict.fromkeys(
        ("get_model", "delete_model", "describe_model", "predict_model"), _IN_PROJECT)),
}


def _operation_ids(app: Flask, api: Api) -> dict[tuple[str, str], str]:
    """Give each operation its view's name as operationId (…_unprefixed for the copies)."""
    ids = {}
    for rule in app.url_map.iter_rules():
        path = openapi_path(rule.rule)
        blueprint, _, view = rule.endpoint.rpartition(".")
        operation_id = view + ("_unprefixed" if blueprint.endswith("_unprefixed") else "")
        methods = [m.lower() for m in rule.methods or () if m.lower() in METHODS]
        for method in methods:
            operation = api.spec._paths.get(path, {}).get(method)
            if operation is not None:
                # One view serving several methods: one id each.
                unique = operation_id if len(methods) == 1 else f"{operation_id}_{method}"
                operation["operationId"] = unique
                ids[(path, method)] = unique
    return ids


def _document_links(app: Flask, api: Api) -> None:
    ids = _operation_ids(app, api)
    known = set(ids.values())
    for (path, method), operation_id in ids.items():
        suffix = "_unprefixed" if operation_id.endswith("_unprefixed") else ""
        statuses, followers = _LINKS.get(operation_id.removesuffix(suffix), ((), {}))
        links = {follower: {"operationId": follower + suffix, "parameters": dict(parameters)}
                 for follower, parameters in followers.items() if follower + suffix in known}
        for status in statuses:
            response = api.spec._paths[path][method]["responses"].get(status)
            if response is not None and links:
                response["links"] = deepcopy(links)
