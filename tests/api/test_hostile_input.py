"""Hostile input (issue 9, D2, D3, D8 and their families): every answer is a 4xx problem,
on SQLite and on PostgreSQL alike, and the store is left as it was.

- D2/D8: bodies nested deeper than QUARRY_MAX_JSON_DEPTH (100 000 ``[``, a 5 000-deep
  ``name``, 500-deep skill params, deep SQL params or predict data) → 400 "nested too
  deep" naming the field and the limit, on every route that reads a JSON body.
- D3: NUL characters in path segments, query strings and JSON text, which PostgreSQL
  cannot hold → 404 for a lookup (no such name can exist), 400 naming the field otherwise.
- the same families: lone UTF-16 surrogates, IDs beyond the 32-bit ID columns, names of a
  megabyte, invalid UTF-8, %2F in path segments, very long URLs.

Each test sends its whole list of requests to one store (a store per request would make
this file take minutes); a failure names the request.
"""

from __future__ import annotations

import json

import pytest

from app import create_app
from tests.helpers import assert_problem, skill_body

LIMIT = 64  # the default QUARRY_MAX_JSON_DEPTH
# A one-second budget: these tests need a model to look up, not a good one (the default
# search of a small table takes 6 s).
IRIS_MODEL = ("CREATE MODEL p1.m1 FROM demo (SELECT * FROM iris) PREDICT species "
              "USING join_learn_process = true, time_budget_s = 1")
MEGABYTE = "a" * 1024 * 1024


def store_state(client) -> dict:
    """Everything the API shows of the store, to prove a refused request changed nothing."""
    projects = client.get("/api/projects").get_json()
    state = {"projects": projects}
    for p in projects:
        name = p["name"]
        state[name] = {kind: client.get(f"/api/projects/{name}/{kind}").get_json()
                       for kind in ("skills", "agents", "models")}
        for model in state[name]["models"]:  # training moves these on by itself
            for key in ("status", "updated_at", "training_time", "accuracy"):
                model.pop(key)
    return state


@pytest.fixture
def seeded(client):
    """p1 with a skill s1 and an agent a1 using it; the state."""
    assert client.post("/api/projects", json={"name": "p1"}).status_code == 201
    assert client.post("/api/projects/p1/skills", json=skill_body("s1")).status_code == 201
    assert client.post("/api/projects/p1/agents",
                       json={"agent": {"name": "a1", "skills": ["s1"]}}).status_code == 201
    return store_state(client)


@pytest.fixture
def with_model(client, seeded):
    """As ``seeded``, plus a model m1 of p1 (for the lookups that reach models)."""
    assert client.post("/api/projects/p1/models", json={"query": IRIS_MODEL}).status_code == 201
    return store_state(client)


def nested(depth: int, leaf: str = "1", kind: str = "[") -> str:
    """JSON text of ``depth`` nested arrays (or objects {"a": …}) around ``leaf``."""
    if kind == "[":
        return "[" * depth + leaf + "]" * depth
    return '{"a":' * depth + leaf + "}" * depth


def send(client, method: str, url: str, body=None, raw: str | bytes | None = None):
    if raw is not None:
        data = raw.encode() if isinstance(raw, str) else raw
        return client.open(url, method=method, data=data, content_type="application/json")
    return client.open(url, method=method, json=body)


def refused(response, status: int, *words: str, request: str) -> dict:
    """``assert_problem``, saying which request of a test's list failed."""
    try:
        return assert_problem(response, status, *words)
    except AssertionError as error:
        raise AssertionError(f"{request[:200]}: {error}"[:2000]) from None


# Every route that reads a JSON body (test_body_routes_are_all_listed keeps this true).
BODY_ROUTES = [
    ("POST", "/api/projects"),
    ("POST", "/api/projects/p1/skills"),
    ("PUT", "/api/projects/p1/skills/s1"),
    ("POST", "/projects/p1/skills"),
    ("PUT", "/projects/p1/skills/s1"),
    ("POST", "/api/projects/p1/agents"),
    ("PUT", "/api/projects/p1/agents/a1"),
    ("POST", "/projects/p1/agents"),
    ("PUT", "/projects/p1/agents/a1"),
    ("POST", "/api/projects/p1/models"),
    ("POST", "/api/projects/p1/models/m1/predict"),
    ("PUT", "/api/projects/p1/models/m1"),
    ("POST", "/api/projects/p1/models/m1/retrain"),
    ("POST", "/api/projects/p1/models/m1/finetune"),
    ("GET", "/api/projects/p1/models/m1/describe"),
    ("POST", "/api/sql/query"),
    ("POST", "/api/login"),
    ("POST", "/api/databases"),
    ("POST", "/api/databases/status"),
    ("PUT", "/api/databases/p1"),
    ("PUT", "/api/projects/p1/members/u1"),
    ("POST", "/api/console/projects/p1/saved"),
    ("POST", "/api/projects/p1/agents/a1/completions"),
    ("POST", "/api/projects/p1/agents/a1/completions/stream"),
    ("POST", "/mcp"),
    ("POST", "/mcp/projects/p1/agents/a1"),
    ("POST", "/api/projects/p1/views"),
    ("PUT", "/api/projects/p1/views/p1"),
    ("POST", "/api/projects/p1/knowledge_bases"),
    ("PUT", "/api/projects/p1/knowledge_bases/p1"),
    ("POST", "/api/projects/p1/knowledge_bases/p1/completions"),
    ("POST", "/api/projects/p1/jobs"),
]


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_body_routes_are_all_listed(client):
    spec = client.get("/api/openapi.json").get_json()
    documented = set()
    for path, operations in spec["paths"].items():
        ref = "s1" if "skills" in path else "a1" if "agent" in path else "m1"
        for method, operation in operations.items():
            # JSON bodies (an upload's multipart form is read by the files route itself).
            if isinstance(operation, dict) and "application/json" in operation.get(
                    "requestBody", {}).get("content", {}):
                documented.add((method.upper(),
                                path.replace("{project}", "p1").replace("{ref}", ref)
                                .replace("{name}", "p1").replace("{user}", "u1")
                                .replace("{agent_name}", "a1")))
    assert documented <= set(BODY_ROUTES), documented - set(BODY_ROUTES)


# --- D2 and D8: nesting -------------------------------------------------------------------

DEEP_BODIES = [nested(100_000), "[" * 100_000, nested(5_000, kind="{"), nested(LIMIT + 1)]


def test_deep_bodies_are_refused_on_every_route(client, seeded):
    # D2: 100 000 nested [ (closed or not) used to exhaust the decoder's stack: a 500.
    for method, url in BODY_ROUTES:
        for body in DEEP_BODIES:
            problem = refused(send(client, method, url, raw=body), 400, "nested too deep",
                              f"the limit is {LIMIT}", request=f"{method} {url} {body[:20]}")
            assert problem["title"] == "Nested too deep"
    assert store_state(client) == seeded


# The field named: the leading object keys down to the too-deep value, at most two (as
# deep as the request schemas go), none inside an array.
DEEP_FIELDS = [
    ("POST", "/api/projects", '{"name": %s}', "name", "name.a"),
    ("POST", "/api/projects/p1/skills",
     '{"skill": {"name": "s2", "type": "knowledge_base", "params": %s}}',
     "skill.params", "skill.params"),
    ("PUT", "/api/projects/p1/skills/s1", '{"skill": {"params": %s}}',
     "skill.params", "skill.params"),
    ("PUT", "/api/projects/p1/skills/s9", '{"skill": {"type": "t", "params": %s}}',
     "skill.params", "skill.params"),
    ("POST", "/api/projects/p1/agents", '{"agent": {"name": "a2", "params": %s}}',
     "agent.params", "agent.params"),
    ("PUT", "/api/projects/p1/agents/a1", '{"agent": {"data": %s}}', "agent.data", "agent.data"),
    ("POST", "/api/sql/query", '{"query": "SELECT 1", "params": %s}', "params", "params.a"),
    ("POST", "/api/projects/p1/models/m1/predict", '{"data": [%s]}', "data", "data"),
    ("POST", "/api/projects/p1/models/m1/retrain", '{"using": %s}', "using", "using.a"),
    ("POST", "/api/projects/p1/models/m1/finetune", '{"query": "SELECT 1", "using": %s}',
     "using", "using.a"),
]


def test_deep_field_is_named_and_nothing_is_stored(client, seeded):
    # D8: a 500-deep skill params object used to be stored, then answered 500 (the answer
    # could not be written); D2: a 5 000-deep name failed while decoding.
    for method, url, template, array_field, object_field in DEEP_FIELDS:
        for depth, kind, field in [(5_000, "[", array_field), (500, "{", object_field)]:
            response = send(client, method, url, raw=template % nested(depth, kind=kind))
            problem = refused(response, 400, f": {field} holds", f"the limit is {LIMIT}",
                              request=f"{method} {url} {kind}")
            errors = problem["errors"]
            for key in field.split("."):
                errors = errors[key]
            assert errors == [f"Nested more than {LIMIT} levels deep (the limit is {LIMIT})."]
    assert store_state(client) == seeded


def test_depth_up_to_the_limit_is_stored_and_read_back_intact(client, seeded):
    # The body's own two levels ({"skill": {…}}) count: params may nest LIMIT - 2 deep.
    params = json.loads(nested(LIMIT - 2, kind="{"))
    body = {"skill": {"name": "deep", "type": "knowledge_base", "params": params}}
    assert client.post("/api/projects/p1/skills", json=body).status_code == 201
    assert client.get("/api/projects/p1/skills/deep").get_json()["params"] == params
    too_deep = {"skill": {"name": "deeper", "type": "t", "params": {"a": params}}}
    assert_problem(client.post("/api/projects/p1/skills", json=too_deep), 400, "skill.params")
    assert client.get("/api/projects/p1/skills/deeper").status_code == 404


def test_brackets_and_escapes_inside_strings_do_not_count(client, seeded):
    text = "[{" * 20_000 + '\\"' + "]}" * 5 + '"\\'
    body = {"skill": {"name": "s2", "type": "t", "params": {"text": text, "k\"[": "[["}}}
    assert client.post("/api/projects/p1/skills", json=body).status_code == 201
    assert client.get("/api/projects/p1/skills/s2").get_json()["params"] == body["skill"]["params"]
    # Strings ending in backslashes, escaped quotes before brackets, brackets in keys: the
    # nesting next to them is counted exactly (three levels above "deep").
    tricky = {s: s for s in ["\\", "\\\\", '"', '\\"[', "]\\", "[[[[", "}}}}", '\\\\"{{']}
    for depth, status in [(LIMIT - 3, 201), (LIMIT - 2, 400)]:
        params = {**tricky, "deep": json.loads(nested(depth)), "after": "]]]]"}
        body = {"skill": {"name": f"t{depth}", "type": "t", "params": params}}
        response = client.post("/api/projects/p1/skills", json=body)
        assert response.status_code == status, response.get_json()
        if status == 201:
            assert client.get(f"/api/projects/p1/skills/t{depth}").get_json()["params"] == params


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_the_limit_is_a_setting(make_app):
    client = make_app(MAX_JSON_DEPTH=4).test_client()
    ok = {"skill": {"name": "s1", "type": "t", "params": {"a": {"b": 1}}}}
    assert client.post("/api/projects/mindsdb/skills", json=ok).status_code == 201
    deep = {"skill": {"name": "s2", "type": "t", "params": {"a": {"b": [1]}}}}
    assert_problem(client.post("/api/projects/mindsdb/skills", json=deep), 400,
                   "skill.params", "the limit is 4")


@pytest.mark.parametrize("depth", [0, 257, 10_000])
def test_a_limit_the_code_could_not_honour_is_refused_at_start(tmp_path, depth):
    with pytest.raises(RuntimeError, match="QUARRY_MAX_JSON_DEPTH"):
        create_app({"MAX_JSON_DEPTH": depth, "INSTANCE_PATH": str(tmp_path),
                    "DATABASE_URL": f"sqlite:///{tmp_path}/x.db", "DEMO_SOURCE": False})


# --- D3: NUL characters -------------------------------------------------------------------

OBJECT_URLS_WITH_NUL = [
    "/api/projects/a%00b",
    "/api/projects/p1%00",
    "/api/projects/p1/skills/a%00b",
    "/api/projects/p1/skills/s1%00",
    "/api/projects/p1%00/skills/s1",
    "/projects/p1/skills/s1%00",
    "/api/projects/p1/agents/a1%00",
    "/projects/p1/agents/%00",
    "/api/projects/p1/models/m1%00",
    "/api/projects/p1/models/m1%00.1",
]
LOOKUP_URLS_WITH_NUL = [
    "/api/projects/a%00b/skills",
    "/api/projects/p1%00/agents",
    "/api/projects/p1/models/m1%00/describe",
]
# A filter in the query string is checked against the naming rule as the OpenAPI document
# states it: a value no name can have is refused with 400 naming the argument.
QUERY_FILTERS_WITH_NUL = ["/api/projects/p1/skills?agent=a1%00"]


def test_nul_in_a_looked_up_name_is_not_found(client, with_model):
    # D3: on PostgreSQL these were 500s (psycopg DataError: NUL in text); a name with NUL
    # breaks the naming rule, so no such object can exist: 404 without asking the store.
    for url in OBJECT_URLS_WITH_NUL + LOOKUP_URLS_WITH_NUL:
        refused(client.get(url), 404, "does not exist", request=f"GET {url}")
    for url in QUERY_FILTERS_WITH_NUL:
        refused(client.get(url), 400, "agent", request=f"GET {url}")
    for url in [*OBJECT_URLS_WITH_NUL, "/api/projects/p1/agent/a1%00"]:
        refused(client.delete(url), 404, "does not exist", request=f"DELETE {url}")
    assert store_state(client) == with_model


def test_nul_in_the_name_of_a_put_that_creates_is_refused(client, seeded):
    for url in ["/api/projects/p1/skills/a%00b", "/projects/p1/skills/a%00b"]:
        refused(client.put(url, json={"skill": {"type": "t", "params": {}}}), 400, "name",
                request=url)
    assert store_state(client) == seeded


NUL_IN_TEXT = [
    ("POST", "/api/projects", {"name": "a\x00"}, "name"),
    ("POST", "/api/projects/p1/skills",
     {"skill": {"name": "s2", "type": "t", "params": {"x": "a\x00b"}}}, "skill.params.x"),
    ("POST", "/api/projects/p1/skills",
     {"skill": {"name": "s2", "type": "t", "params": {"k\x00": 1}}}, "skill.params"),
    ("POST", "/api/projects/p1/skills",
     {"skill": {"name": "s2", "type": "t", "params": {"x": [1, {"y": "\x00"}]}}},
     "skill.params.x.1.y"),
    ("POST", "/api/projects/p1/skills",
     {"skill": {"name": "s2", "type": "a\x00", "params": {}}}, "skill.type"),
    ("PUT", "/api/projects/p1/skills/s1", {"skill": {"params": {"x": "\x00"}}},
     "skill.params.x"),
    ("POST", "/api/projects/p1/agents",
     {"agent": {"name": "a2", "params": {"prompt": "\x00"}}}, "agent.params.prompt"),
    ("POST", "/api/projects/p1/agents",
     {"agent": {"name": "a2", "model_name": "gpt\x00"}}, "agent.model_name"),
    ("PUT", "/api/projects/p1/agents/a1", {"agent": {"prompt_template": "hi \x00"}},
     "agent.prompt_template"),
    ("PUT", "/api/projects/p1/agents/a1",
     {"agent": {"skills": [{"name": "s1", "parameters": {"d": "\x00"}}]}},
     "agent.skills.0.parameters.d"),
    ("POST", "/api/projects/p1/models",
     {"query": IRIS_MODEL.replace("m1", "m2").replace("iris", "iris WHERE species = '\x00'")},
     "query"),
    ("POST", "/api/projects/p1/models/m1/predict", {"data": [{"sepal_length": "\x00"}]},
     "data.0.sepal_length"),
    ("POST", "/api/sql/query", {"query": "SELECT '\x00'"}, "query"),
    ("POST", "/api/sql/query", {"query": "SELECT 1", "params": {"p": "\x00"}}, "params.p"),
    ("POST", "/api/login", {"username": "u\x00", "password": "x"}, "username"),
]


def test_nul_in_json_text_is_refused_naming_the_field(client, seeded):
    # D3: no store holds NUL in text (PostgreSQL refuses it in text and jsonb), so it is
    # refused on every store alike, where the body is read. 422, not 400 (issue 30 §10): in a
    # key, a NUL is of the documented shape for a client that does not apply propertyNames.
    for method, url, body, field in NUL_IN_TEXT:
        problem = refused(send(client, method, url, body), 422, "NUL", f"in {field}:",
                          request=f"{method} {url} {field}")
        assert problem["title"] == "Invalid text"
    assert store_state(client) == seeded


def test_text_that_only_looks_like_an_escape_is_kept(client, seeded):
    # A backslash followed by "u0000" / "ud800" is plain text, not NUL or a surrogate.
    params = {"x": "\\u0000", "y": "\\ud800", "z\\u0000": "\\\\u0000"}
    body = {"skill": {"name": "s2", "type": "t", "params": params}}
    assert client.post("/api/projects/p1/skills", json=body).status_code == 201
    assert client.get("/api/projects/p1/skills/s2").get_json()["params"] == params


# --- lone surrogates, invalid UTF-8 -------------------------------------------------------

LONE_SURROGATES = [
    ('{"skill": {"name": "s2", "type": "t", "params": {"x": "\\ud800"}}}', "skill.params.x"),
    ('{"skill": {"name": "s2", "type": "t", "params": {"x": "a\\udfffb"}}}', "skill.params.x"),
    ('{"skill": {"name": "s2", "type": "t", "params": {"\\udc00": 1}}}', "skill.params"),
    ('{"skill": {"name": "s2", "type": "\\uDBFF", "params": {}}}', "skill.type"),
    # A low surrogate first, then a high one: not a pair.
    ('{"skill": {"name": "s2", "type": "t", "params": {"x": "\\ude00\\ud83d"}}}',
     "skill.params.x"),
]


def test_lone_surrogates_are_refused(client, seeded):
    # Not Unicode text: no store could encode them (a 500 on both before).
    for raw, field in LONE_SURROGATES:
        refused(send(client, "POST", "/api/projects/p1/skills", raw=raw), 422, "surrogate",
                f"in {field}:", request=raw)
    assert store_state(client) == seeded


def test_surrogate_pairs_are_text(client, seeded):
    raw = '{"skill": {"name": "s2", "type": "t", "params": {"x": "\\ud83d\\ude00 \\u00e9"}}}'
    assert send(client, "POST", "/api/projects/p1/skills", raw=raw).status_code == 201
    assert client.get("/api/projects/p1/skills/s2").get_json()["params"] == {"x": "😀 é"}


INVALID_UTF8 = [
    b'{"name": "\xff"}',
    b'{"name": "p\xc3"}',  # a truncated sequence
    b'{"name": "\xc0\xaf"}',  # an overlong "/"
    b'{"name": "\xed\xa0\x80"}',  # a surrogate encoded as UTF-8
    b'{"name": "p2"}\xff',
    b"\xef\xbb\xbf" + b"\xfe" * 1000,
]


def test_invalid_utf8_is_refused(client, seeded):
    for raw in INVALID_UTF8:
        refused(send(client, "POST", "/api/projects", raw=raw), 400, "JSON", request=repr(raw))
    assert store_state(client) == seeded


# --- numbers and sizes --------------------------------------------------------------------

BEYOND_ID_COLUMNS = ["2147483648", "4294967296", "9999999999", "99999999999",
                     "999999999999999999", "9223372036854775808", "1" + "0" * 40, "9" * 5000]


def test_ids_beyond_the_id_columns_are_not_found(client, with_model):
    # IDs are 32-bit columns: PostgreSQL refused to compare them with a larger number (a
    # 500 from 2147483648 up to 18 digits), SQLite beyond 64 bits.
    for ref in BEYOND_ID_COLUMNS:
        for kind in ("skills", "agents", "models"):
            url = f"/api/projects/p1/{kind}/{ref}"
            refused(client.get(url), 404, "does not exist", request=f"GET {url}")
            refused(client.delete(url), 404, "does not exist", request=f"DELETE {url}")
        url = f"/api/projects/p1/models/m1.{ref}"
        refused(client.get(url), 404, "does not exist", request=url)
        url = f"/api/projects/p1/skills/{ref}"
        refused(client.put(url, json={"skill": {"type": "t"}}), 404, "does not exist",
                request=f"PUT {url}")
        # A filter beyond the id columns is outside the documented range: a 400 naming it.
        url = f"/api/projects/p1/skills?agent_id={ref}"
        refused(client.get(url), 400, "agent_id", request=url)
    assert store_state(client) == with_model


def test_the_largest_id_finds_nothing_and_leading_zeros_are_ignored(client, with_model):
    skill_id = client.get("/api/projects/p1/skills/s1").get_json()["id"]
    assert client.get(f"/api/projects/p1/skills/{skill_id}").status_code == 200
    assert client.get(f"/api/projects/p1/skills/{'0' * 40}{skill_id}").status_code == 200
    assert client.get(f"/api/projects/p1/models/m1.{'0' * 40}1").status_code == 200
    for kind in ("skills", "agents", "models"):
        assert_problem(client.get(f"/api/projects/p1/{kind}/2147483647"), 404)
        assert_problem(client.get(f"/api/projects/p1/{kind}/0"), 404)


# Names of a million characters: as large as a body may be by default (QUARRY_MAX_BODY_BYTES,
# 1 MiB) with room for the rest of the body; a larger body is refused whole (413).
HUGE_NAME = "a" * 1_000_000
MEGABYTE_NAMES = [
    ("POST", "/api/projects", {"name": HUGE_NAME}, "name"),
    ("POST", "/api/projects/p1/skills", {"skill": {"name": HUGE_NAME, "type": "t", "params": {}}},
     "name"),
    ("PUT", "/api/projects/p1/skills/s1", {"skill": {"name": HUGE_NAME}}, "name"),
    ("POST", "/api/projects/p1/agents", {"agent": {"name": HUGE_NAME}}, "name"),
    ("POST", "/api/projects/p1/agents", {"agent": {"name": "a2", "skills": [HUGE_NAME]}},
     "skills"),
    ("POST", "/api/projects/p1/skills", {"skill": {"name": "s2", "type": HUGE_NAME, "params": {}}},
     "type"),
    ("PUT", f"/api/projects/p1/skills/{HUGE_NAME}", {"skill": {"type": "t", "params": {}}},
     "name"),
]


def test_megabyte_names_are_refused(client, seeded):
    for method, url, body, field in MEGABYTE_NAMES:
        response = send(client, method, url, body)
        refused(response, 400, field, request=f"{method} {url[:60]} {field}")
        assert len(response.data) < 4096  # the answer does not echo the megabyte back
    assert store_state(client) == seeded


LONG_URLS = [
    (f"/api/projects/{MEGABYTE}", 404),
    (f"/api/projects/p1/skills/{MEGABYTE}", 404),
    (f"/api/projects/p1/agents/{MEGABYTE}", 404),
    (f"/api/projects/p1/models/{MEGABYTE}", 404),
    (f"/api/projects/p1/models/{MEGABYTE}.1", 404),
    (f"/api/projects/p1/skills?agent={MEGABYTE}", 400),
    (f"/api/projects/p1/skills?agent_id={'1' * 100_000}", 400),
    (f"/api/projects/p1/models/m1/describe?attribute={MEGABYTE}", 400),
]


def test_very_long_urls(client, seeded):
    # gunicorn refuses request lines over 4 094 bytes itself; behind another server (or
    # with a larger limit) the app must still answer sanely.
    for url, status in LONG_URLS:
        methods = ["GET"] if "?" in url else ["GET", "DELETE"]
        for method in methods:
            response = client.open(url, method=method)
            refused(response, status, request=f"{method} {url[:60]}")
            assert len(response.data) < 4096
    assert store_state(client) == seeded


# --- path segments ------------------------------------------------------------------------

# The server decodes %2F before routing (PATH_INFO is decoded text), so an encoded slash is
# a path separator: it can never become part of a name, nor reach another object.
ODD_PATHS = [
    ("GET", "/api/projects/a%2Fb"),
    ("DELETE", "/api/projects/a%2Fb"),
    ("GET", "/api/projects/p1/skills/s1%2F..%2F..%2Fa1"),
    ("DELETE", "/api/projects/p1/skills/a%2Fb"),
    ("PUT", "/api/projects/p1/skills/a%2Fb"),
    ("PUT", "/api/projects/p1/skills/s1%2F"),
    ("DELETE", "/api/projects/p1/agents/..%2Fskills%2Fs1"),
    ("DELETE", "/api/projects/p1/skills/%2e%2e"),
    ("DELETE", "/api/projects/p1/skills/."),
    ("DELETE", "/api/projects/%2E"),
]


def test_encoded_slashes_and_dots_match_no_object(client, seeded):
    for method, url in ODD_PATHS:
        response = send(client, method, url, {"skill": {"type": "t", "params": {}}})
        assert response.status_code in (404, 405), (method, url, response.status_code)
        refused(response, response.status_code, request=f"{method} {url}")
    assert store_state(client) == seeded
