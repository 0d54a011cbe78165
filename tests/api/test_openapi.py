"""OpenAPI 3 at /api/openapi.json, generated from the schemas, covering every route."""

import contextlib
import io
import re
import sqlite3
import urllib.parse
import uuid
from concurrent.futures import ThreadPoolExecutor

from app.services import auth as auth_service
from tests.helpers import assert_problem


def test_openapi_covers_every_route(app, client):
    spec = client.get("/api/openapi.json").get_json()
    assert spec["openapi"].startswith("3.")
    documented = {(path, method.upper()) for path, item in spec["paths"].items()
                  for method in item if method in {"get", "post", "put", "delete", "patch"}}
    missing = []
    for rule in app.url_map.iter_rules():
        # The console's page and files are HTML, script and styles, not API operations.
        if rule.endpoint in {"static", "api-docs.openapi_json", "console.show_console",
                             "console.console_asset"}:
            continue
        path = re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule.rule)
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            if (path, method) not in documented:
                missing.append((path, method))
    assert not missing


def test_the_document_is_written_once_by_its_first_readers(make_app):
    """The app is made without its document (QuarryApi.spec writes it at the first read);
    first requests at once all get the whole document, each operation written once."""
    app = make_app()
    api = app.extensions["flask-smorest"]["apis"][""]["ext_obj"]
    assert api._spec._paths == {}  # apispec's registry of paths: nothing written yet
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: app.test_client().get("/api/openapi.json"),
                                range(4)))
    assert {a.status_code for a in answers} == {200}
    documents = [a.get_data(as_text=True) for a in answers]
    assert documents.count(documents[0]) == 4
    spec = answers[0].get_json()
    assert len(spec["paths"]) > 50
    tags = [tag["name"] for tag in spec["tags"]]
    assert len(tags) == len(set(tags)) and "skills" in tags  # one tag per blueprint


def test_openapi_describes_bodies_from_the_schemas(client):
    spec = client.get("/api/openapi.json").get_json()
    post = spec["paths"]["/api/projects/{project}/skills"]["post"]
    ref = post["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    schema = spec["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert "skill" in schema["properties"] and schema["required"] == ["skill"]


def test_openapi_documents_errors_as_problem_documents(client):
    # Every error is sent as application/problem+json (app/errors.py); the document said
    # application/json with flask-smorest's own error shape.
    spec = client.get("/api/openapi.json").get_json()
    for name in ("BAD_REQUEST", "NOT_FOUND", "CONFLICT", "UNPROCESSABLE_ENTITY",
                 "REQUEST_ENTITY_TOO_LARGE", "SERVICE_UNAVAILABLE"):
        content = spec["components"]["responses"][name]["content"]
        assert list(content) == ["application/problem+json"]
        ref = content["application/problem+json"]["schema"]["$ref"].rsplit("/", 1)[1]
        properties = spec["components"]["schemas"][ref]["properties"]
        assert {"title", "detail", "status"} <= set(properties)
    agent = spec["components"]["schemas"]["AgentOut"]["properties"]
    assert agent["model_name"]["nullable"] and agent["prompt_template"]["nullable"]
    project = spec["components"]["schemas"]["ProjectIn"]["properties"]["name"]
    assert project["pattern"].startswith("^[A-Za-z_-]")


def test_openapi_documents_the_ways_to_sign_in(client):
    spec = client.get("/api/openapi.json").get_json()
    schemes = spec["components"]["securitySchemes"]
    assert schemes["bearer"] == {"type": "http", "scheme": "bearer"}
    assert schemes["apiKey"]["name"] == "X-Api-Key" and schemes["session"]["in"] == "cookie"
    assert {} in spec["security"]  # anonymous access is allowed while auth is off


METHODS = {"get", "put", "post", "delete", "patch"}


def operations(spec):
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield path, method, operation


def test_openapi_lists_every_answer_of_every_operation(client):
    # No catch-all "default": a status the document does not list is a finding of
    # tests/api/test_schemathesis.py, not something "default" silently covers.
    spec = client.get("/api/openapi.json").get_json()
    ids = []
    for path, method, operation in operations(spec):
        responses = operation["responses"]
        assert "default" not in responses, (path, method)
        assert "503" in responses, (path, method)
        if "requestBody" in operation:
            assert {"400", "413"} <= set(responses), (path, method)
        # Not the object tree, nor a PUT of a database (creates it).
        if "{" in path and not path.startswith("/api/tree") \
                and (path, method) not in {("/api/databases/{name}", "put"),
                                           ("/api/files/{name}", "put")}:  # they create
            assert "404" in responses, (path, method)
        assert "401" not in responses or path == "/api/login"  # sign-in is off here
        # Sign-in off: 403 only for a change a browser sends for a page on another origin.
        if method != "get":
            assert "403" in responses, (path, method)
        for status, response in responses.items():
            if int(status) >= 400:
                if "$ref" in response:
                    name = response["$ref"].rsplit("/", 1)[1]
                    response = spec["components"]["responses"][name]
                content = response["content"]
                assert list(content) == ["application/problem+json"]
        ids.append(operation["operationId"])
    assert len(ids) == len(set(ids))
    statuses = {(path, method): set(operation["responses"])
                for path, method, operation in operations(spec)}
    assert {"404", "409", "422"} <= statuses[("/api/projects/{project}/models", "post")]
    assert {"200", "201", "422"} <= statuses[("/projects/{project}/skills/{ref}", "put")]
    assert "409" in statuses[("/api/projects/{project}", "delete")]


def test_openapi_path_parameters_carry_the_naming_rule(client):
    spec = client.get("/api/openapi.json").get_json()
    pattern = {param["name"]: param["schema"]["pattern"] for param in
               spec["paths"]["/api/projects/{project}/skills/{ref}"]["parameters"]}
    assert re.fullmatch(pattern["project"], "p_1-x") and not re.search(pattern["project"], "1p")
    assert re.search(pattern["ref"], "42") and re.search(pattern["ref"], "s1")
    assert not re.search(pattern["ref"], "s.1")
    model = {param["name"]: param["schema"]["pattern"] for param in
             spec["paths"]["/api/projects/{project}/models/{ref}"]["parameters"]}
    assert re.search(model["ref"], "m1.2") and not re.search(model["ref"], "42")
    # What validation accepts, the document says, and the other way round.
    assert client.put("/api/projects/mindsdb/skills/s.1",
                      json={"skill": {"type": "t", "params": {}}}).status_code == 400
    assert client.put("/api/projects/mindsdb/skills/s1",
                      json={"skill": {"type": "t", "params": {}}}).status_code == 201


def test_openapi_links_lead_from_a_create_to_the_new_object(client):
    spec = client.get("/api/openapi.json").get_json()
    links = spec["paths"]["/api/projects"]["post"]["responses"]["201"]["links"]
    assert links["get_project"] == {"operationId": "get_project",
                                    "parameters": {"project": "$response.body#/name"}}
    skill = spec["paths"]["/projects/{project}/skills"]["post"]["responses"]["201"]["links"]
    assert skill["delete_skill"]["operationId"] == "delete_skill_unprefixed"
    assert skill["delete_skill"]["parameters"] == {"project": "$request.path.project",
                                                   "ref": "$response.body#/name"}


def test_openapi_security_follows_the_sign_in_setting(make_app):
    app = make_app(AUTH_REQUIRED=True, SECRET_KEY="k" * 40, DEMO_SOURCE=False)
    with app.app_context():
        auth_service.create_user("alice", "correct horse battery")
        token = auth_service.create_token("alice", "docs")[1]
    spec = app.test_client().get("/api/openapi.json",
                                 headers={"Authorization": f"Bearer {token}"}).get_json()
    assert {} not in spec["security"]  # every route needs credentials …
    paths = spec["paths"]
    assert "401" in paths["/api/projects"]["get"]["responses"]
    assert "401" in paths["/projects/{project}/agents/{ref}"]["put"]["responses"]
    # … but the public ones, which say so.
    assert paths["/api/status"]["get"]["security"] == [{}]
    assert "401" not in paths["/api/status"]["get"]["responses"]
    assert paths["/api/login"]["post"]["security"] == [{}]


def test_issue_9_d7_requests_answer_as_the_document_says(client):
    # The four requests schemathesis found refused with 400 although the document allowed
    # them. Now the document refuses the first, second and fourth (400 is right); the third
    # has the documented shape and is refused for what it asks: 422.
    spec = client.get("/api/openapi.json").get_json()
    schemas = spec["components"]["schemas"]
    assert not re.search(schemas["ModelIn"]["properties"]["query"]["pattern"], "")
    assert "nullable" not in schemas["PredictIn"]["properties"]["data"]
    skill_ref = schemas["AgentChanges"]["properties"]["skills_to_remove"]["items"]["oneOf"]
    assert schemas["SkillRefFields"]["required"] == ["name"]
    assert {"$ref": "#/components/schemas/SkillRefFields"} in skill_ref

    assert client.post("/api/projects", json={"name": "A"}).status_code == 201
    assert_problem(client.post("/api/projects/A/models", json={"query": ""}), 400, "query")
    assert_problem(client.post("/api/projects/A/models/m/predict", json={"data": None}),
                   400, "data")
    assert_problem(client.put("/projects/A/skills/x", json={"skill": {}}), 422, "type")
    assert client.post("/api/projects/A/agents", json={"agent": {"name": "a0"}}).status_code \
        == 201
    assert_problem(client.put("/api/projects/A/agents/a0",
                              json={"agent": {"skills_to_remove": [{}]}}), 400, "skill")


# --- issue 30 §10: what the document says is refused, the service refuses as it says --------

def _responses(spec, path, method):
    return set(spec["paths"][path][method]["responses"])


NUL_BODIES = [  # (method, url, OpenAPI path, body): a NUL in a key, or in a value
    ("POST", "/api/projects/mindsdb/skills", "/api/projects/{project}/skills",
     {"skill": {"name": "s", "type": "t", "params": {"k\x00": 1}}}),
    ("POST", "/projects/mindsdb/agents", "/projects/{project}/agents",
     {"agent": {"name": "a", "params": {"x": {"\x00": None}}}}),
    ("POST", "/api/projects/mindsdb/models/m/predict",
     "/api/projects/{project}/models/{ref}/predict", {"data": [{"a\x00": 1}]}),
    ("POST", "/api/projects/mindsdb/agents/a/completions",
     "/api/projects/{project}/agents/{agent_name}/completions",
     {"messages": [{"question": "hi\x00", "answer": None}]}),
    ("POST", "/mcp", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "ping",
                              "params": {"\x00": 1}}),
    ("POST", "/api/sql/query", "/api/sql/query", {"query": "SELECT 1", "context": {"d\x00": 1}}),
    ("POST", "/api/databases", "/api/databases",
     {"database": {"name": "d", "engine": "sqlite", "parameters": {"\x00": ""}}}),
]


def test_nul_in_a_body_is_422_on_every_route_and_documented(client):
    # A NUL in a key of a free-form object was 400 "A key holds a NUL character", on 14
    # operations whose document allowed it (schemathesis does not apply propertyNames):
    # now 422 everywhere, a value the service cannot keep, and every body route lists 422.
    spec = client.get("/api/openapi.json").get_json()
    for method, url, path, body in NUL_BODIES:
        problem = assert_problem(client.open(url, method=method, json=body), 422, "NUL")
        assert problem["title"] == "Invalid text", (url, problem)
        assert "422" in _responses(spec, path, method.lower()), (path, method)
    for path, method, operation in operations(spec):
        if "application/json" in operation.get("requestBody", {}).get("content", {}):
            assert "422" in operation["responses"], (path, method)
    # The rule is stated for request bodies only: a problem may quote the text it refuses.
    problem = spec["components"]["schemas"]["Problem"]["properties"]["detail"]
    assert "pattern" not in problem
    assert spec["components"]["schemas"]["ProjectIn"]["properties"]["name"]["pattern"] \
        != "^[^\\u0000]*$"  # its own, stricter pattern stays
    detail = client.get("/api/console/schema?database=x%00").get_json()["detail"]
    assert "\x00" in detail  # answered as documented: any text


# Gunicorn's request line limit (gunicorn.conf.py keeps the default): a longer request line
# is gunicorn's 414 in HTML, which no operation documents.
GUNICORN_REQUEST_LINE = 4094
# The most bytes one character takes in a URL: four UTF-8 bytes, each percent-encoded.
WORST_CHARACTER = len("%F0%9F%98%80")


def _longest(schema: dict) -> int:
    """The longest text of a parameter of this schema, in URL bytes; 0 when unbounded."""
    if "enum" in schema:
        return max(len(str(value)) for value in schema["enum"] if value is not None)
    kind = schema.get("type")
    if kind == "boolean":
        return len("false")
    if kind == "integer":
        return max(len(str(schema.get(bound, 0))) for bound in ("minimum", "maximum")) \
            if "maximum" in schema and "minimum" in schema else 0
    if kind == "string" and schema.get("format") == "date-time":
        return len("2026-11-27T10:00:00.000000+00:00") * 3
    if kind == "string" and "maxLength" in schema:
        ascii_only = schema.get("pattern", "").startswith(("^[A-Za-z", "^(?:[0-9]", "^[0-9",
                                                           "^(?!"))
        return schema["maxLength"] * (1 if ascii_only else WORST_CHARACTER)
    return 0


def test_every_documented_request_line_fits_gunicorn(client):
    # GET /api/console/history?q=<very long> got gunicorn's 414 (undocumented): every path
    # and query parameter is bounded now, so that a request of the documented shape always
    # reaches Quarry, which answers 400 for a longer one.
    spec = client.get("/api/openapi.json").get_json()
    for path, method, operation in operations(spec):
        parameters = spec["paths"][path].get("parameters", []) + operation.get("parameters", [])
        line = len(f"{method.upper()} {path} HTTP/1.1")
        for parameter in parameters:
            longest = _longest(parameter["schema"])
            assert longest, (path, method, parameter)
            line += longest + (len(parameter["name"]) + 2 if parameter["in"] == "query" else 0)
        assert line < GUNICORN_REQUEST_LINE, (path, method, line)
    q = next(p for p in spec["paths"]["/api/console/history"]["get"]["parameters"]
             if p["name"] == "q")["schema"]
    longest = "\U0001F600" * q["maxLength"]
    assert client.get("/api/console/history", query_string={"q": longest}).status_code == 200
    assert_problem(client.get("/api/console/history", query_string={"q": longest + "x"}),
                   400, "q")


def test_history_limit_is_bounded_as_documented(client):
    spec = client.get("/api/openapi.json").get_json()
    limit = next(p for p in spec["paths"]["/api/console/history"]["get"]["parameters"]
                 if p["name"] == "limit")["schema"]
    assert (limit["minimum"], limit["maximum"]) == (1, 1000)
    for value in (-1, 0, 1001):  # refused (400: outside the documented range), not clamped
        assert_problem(client.get(f"/api/console/history?limit={value}"), 400, "limit")
    assert client.get("/api/console/history?limit=1").status_code == 200


def test_path_parameters_all_carry_a_pattern(client):
    # The file name's pattern was missing: a name outside it got 400 from a document that
    # allowed it. Now every path parameter of every operation states its pattern and length.
    spec = client.get("/api/openapi.json").get_json()
    for path, item in spec["paths"].items():
        for parameter in item.get("parameters", []):
            schema = parameter["schema"]
            assert "pattern" in schema and "maxLength" in schema, (path, parameter)
    file_name = spec["paths"]["/api/files/{name}"]["parameters"][0]["schema"]
    assert re.fullmatch(file_name["pattern"], "rentals_2")
    for bad in ("a.csv", "0abc", "a/b", "a\nb"):
        assert not re.search(file_name["pattern"], bad), bad
        url = "/api/files/" + urllib.parse.quote(bad, safe="")
        assert_problem(client.put(url, data={"file": (io.BytesIO(b"a\n1\n"), "x.csv")}), 400,
                       "name")
        assert_problem(client.delete(url), 404)
    upload = spec["paths"]["/api/files/{name}"]["put"]["requestBody"]
    assert upload["content"]["multipart/form-data"]["schema"]["required"] == ["file"]
    query_id = spec["paths"]["/api/sql/queries/{query_id}"]["parameters"][0]["schema"]
    assert re.fullmatch(query_id["pattern"], uuid.uuid4().hex)
    assert_problem(client.delete("/api/sql/queries/x%00"), 404, "query id")


def test_put_database_takes_a_top_level_engine_as_mindsdb_does(make_app, tmp_path):
    # A top-level engine was 400 "Unknown field" although schemathesis' generator called it
    # valid; MindsDB reads only "database" and "check_connection" and ignores the rest. It is
    # documented and accepted now (and ignored: the engine is database.engine); any other
    # unknown member is still refused, as the document says.
    client = make_app(SQLITE_ROOTS=str(tmp_path)).test_client()
    spec = client.get("/api/openapi.json").get_json()
    put = spec["components"]["schemas"]["DatabasePut"]
    assert "engine" in put["properties"] and put["additionalProperties"] is False
    with contextlib.closing(sqlite3.connect(tmp_path / "d1.db")) as conn:
        conn.execute("CREATE TABLE t (a INTEGER)")
    parameters = {"db_file": str(tmp_path / "d1.db")}
    body = {"database": {"engine": "sqlite", "parameters": parameters}, "engine": "postgres"}
    created = client.put("/api/databases/d1", json=body)
    assert created.status_code == 201 and created.get_json()["engine"] == "sqlite", created.json
    assert_problem(client.put("/api/databases/d1", json={**body, "engin": "x"}), 400, "engin")
    assert_problem(client.put("/api/databases/d1", json={**body, "engine": ""}), 400, "engine")
