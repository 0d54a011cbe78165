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
  when it is), 413 (body over the limit), 503 (store unreachable), plus each view's own
  (404, 409, 422, 429) from ``Blueprint.problems``;
- the security requirement follows QUARRY_AUTH_REQUIRED, and public views need none;
- every operation has an operationId (its view's name), and what a create answers links to
  the operations on the object it made (OpenAPI links), so that a client or a stateful
  fuzzer knows that ``project`` is the new project's name.
"""

from __future__ import annotations

import re
from copy import deepcopy
from http import HTTPStatus
from typing import Any

from apispec.ext.marshmallow.field_converter import FieldConverterMixin
from flask import Flask
from flask_smorest import Api
from marshmallow import fields
from werkzeug.routing import BaseConverter

from ..schemas.common import MODEL_REF_REGEX, NAME_REGEX, REF_REGEX, OneOf

METHODS = ("get", "put", "post", "delete", "patch")


class _DocumentedSegment(BaseConverter):
    """One path segment, routed as ``string`` does: the view decides what it names (404)."""

    doc: dict[str, Any] = {}


class NameConverter(_DocumentedSegment):
    doc = {"type": "string", "pattern": NAME_REGEX, "minLength": 1, "maxLength": 63,
           "example": "mindsdb"}  # the default project, always there


class RefConverter(_DocumentedSegment):
    doc = {"type": "string", "pattern": REF_REGEX, "minLength": 1,
           "description": "A name, or an ID (all digits)"}


class ModelRefConverter(_DocumentedSegment):
    doc = {"type": "string", "pattern": MODEL_REF_REGEX, "minLength": 1,
           "description": "A model's name, or name.version for one version",
           "example": "iris_model"}


CONVERTERS = {"name": NameConverter, "ref": RefConverter, "model_ref": ModelRefConverter}


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
    _document_security(app, api)
    _document_links(app, api)


def _document_unprefixed(api: Api) -> None:
    """Add the unprefixed skill and agent paths to the OpenAPI document as well."""
    paths = api.spec._paths  # apispec keeps no public accessor for registered paths
    for path, operations in list(paths.items()):
        if path.startswith("/api/projects/{project}/") and (
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
                common += [400, 413]
            if auth_required and (path, method) not in public:
                common.append(401)
            for status in common:
                responses.setdefault(str(status), _problem(api, status))


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
                         "create_agent", "list_models", "create_model")}),
    "create_skill": (("201",), dict.fromkeys(_SKILL, _IN_PROJECT)),
    "put_skill": (("200", "201"), dict.fromkeys(_SKILL, _IN_PROJECT)),
    "create_agent": (("201",), dict.fromkeys(_AGENT, _IN_PROJECT)),
    "update_agent": (("200",), dict.fromkeys(_AGENT, _IN_PROJECT)),
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
        for method in rule.methods or ():
            operation = api.spec._paths.get(path, {}).get(method.lower())
            if operation is not None:
                operation["operationId"] = operation_id
                ids[(path, method.lower())] = operation_id
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
