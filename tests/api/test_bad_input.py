"""The bad-input matrix: every malformed request gets a 4xx problem+json and changes nothing."""

import json

import pytest

from tests.helpers import assert_problem, skill_body

WRONG_TYPES = [None, 1, 1.5, True, [], {}, ["x"]]
BAD_NAMES = ["", "a" * 64, "ñame", "名前", "a/b", "a b", " a", "a'b", 'a"b', "1st", "a;b", "a.b"]


def snapshot(client) -> dict:
    """Everything the API shows, to prove a refused request left the store as it was."""
    projects = client.get("/api/projects").get_json()
    state = {"projects": projects}
    for p in projects:
        state[p["name"]] = (client.get(f"/api/projects/{p['name']}/skills").get_json(),
                            client.get(f"/api/projects/{p['name']}/agents").get_json())
    return state


@pytest.fixture
def seeded(client):
    client.post("/api/projects", json={"name": "p1"})
    client.post("/api/projects/p1/skills", json=skill_body("s1"))
    client.post("/api/projects/p1/agents", json={"agent": {"name": "a1", "skills": ["s1"]}})
    return snapshot(client)


def _variants(base: dict, wrapper: str, field: str):
    for value in WRONG_TYPES:
        body = json.loads(json.dumps(base))
        body[wrapper][field] = value
        yield body
    body = json.loads(json.dumps(base))
    del body[wrapper][field]
    yield body


SKILL = {"skill": {"name": "s2", "type": "retrieval", "params": {"source": "x"}}}
AGENT = {"agent": {"name": "a2", "skills": ["s1"], "params": {}}}


@pytest.mark.parametrize("field", ["name", "type", "params"])
def test_skill_field_missing_null_or_wrong_type(client, seeded, field):
    for body in _variants(SKILL, "skill", field):
        if field == "params" and body["skill"].get(field) == {}:
            continue  # an empty object is a valid params
        assert_problem(client.post("/api/projects/p1/skills", json=body), 400, field)
    assert snapshot(client) == seeded


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_names_everywhere(client, seeded, name):
    assert_problem(client.post("/api/projects", json={"name": name}), 400, "name")
    body = {"skill": {"name": name, "type": "t", "params": {}}}
    assert_problem(client.post("/api/projects/p1/skills", json=body), 400, "name")
    assert_problem(client.post("/api/projects/p1/agents", json={"agent": {"name": name}}),
                   400, "name")
    assert_problem(client.put("/api/projects/p1/skills/s1", json={"skill": {"name": name}}),
                   400, "name")
    assert_problem(client.put("/api/projects/p1/agents/a1", json={"agent": {"name": name}}),
                   400, "name")
    assert snapshot(client) == seeded


def test_type_must_be_a_non_empty_short_string(client, seeded):
    for value in ["", "x" * 256]:
        body = {"skill": {"name": "s2", "type": value, "params": {}}}
        assert_problem(client.post("/api/projects/p1/skills", json=body), 400, "type")
    assert snapshot(client) == seeded


def test_names_may_use_the_whole_alphabet(client, seeded):
    for name in ["a" * 63, "_x", "-x", "A-b_9", "x1"]:
        assert client.post("/api/projects", json={"name": name}).status_code == 201


@pytest.mark.parametrize("field", ["model_name", "provider", "prompt_template"])
def test_agent_string_fields_of_wrong_type(client, seeded, field):
    for value in [1, 1.5, True, [], {}]:
        body = {"agent": {"name": "a2", field: value}}
        assert_problem(client.post("/api/projects/p1/agents", json=body), 400, field)
    assert snapshot(client) == seeded


@pytest.mark.parametrize("field", ["params", "model", "data"])
def test_agent_object_fields_of_wrong_type(client, seeded, field):
    for value in [1, "x", True, [], ["x"]]:
        body = {"agent": {"name": "a2", field: value}}
        assert_problem(client.post("/api/projects/p1/agents", json=body), 400, field)
        body = {"agent": {field: value}}
        assert_problem(client.put("/api/projects/p1/agents/a1", json=body), 400, field)
    assert snapshot(client) == seeded


@pytest.mark.parametrize("url", ["/api/projects", "/api/projects/p1/skills",
                                 "/api/projects/p1/agents", "/projects/p1/skills"])
@pytest.mark.parametrize("raw, content_type", [
    ("[1, 2]", "application/json"),
    ('"a string"', "application/json"),
    ("42", "application/json"),
    ("null", "application/json"),
    ('{"name": ', "application/json"),
    ("name=x", "application/x-www-form-urlencoded"),
    ("SELECT 1", "text/plain"),
    ("\xff\xfe", "application/json"),
    ("", "application/json"),
])
def test_bodies_that_are_not_objects(client, seeded, url, raw, content_type):
    response = client.post(url, data=raw.encode("latin-1"), content_type=content_type)
    assert_problem(response, 400)
    assert snapshot(client) == seeded


@pytest.mark.parametrize("method, url", [
    ("put", "/api/projects/p1/skills/s1"), ("put", "/api/projects/p1/agents/a1")])
def test_put_bodies_that_are_not_objects(client, seeded, method, url):
    for raw in ["[1]", '"x"', "{", "1"]:
        response = getattr(client, method)(url, data=raw, content_type="application/json")
        assert_problem(response, 400)
    assert snapshot(client) == seeded


def test_unknown_fields_are_refused(client, seeded):
    assert_problem(client.post("/api/projects", json={"name": "p2", "x": 1}), 400, "x")
    body = {"skill": {"name": "s2", "type": "t", "params": {}, "colour": "red"}}
    assert_problem(client.post("/api/projects/p1/skills", json=body), 400, "colour")
    body = {"skill": {"name": "s2", "type": "t", "params": {}}, "extra": 1}
    assert_problem(client.post("/api/projects/p1/skills", json=body), 400, "extra")
    assert snapshot(client) == seeded


def test_oversize_body_is_413(client, seeded):
    huge = {"skill": {"name": "s2", "type": "t", "params": {"blob": "x" * (20 * 1024 * 1024)}}}
    body = assert_problem(client.post("/api/projects/p1/skills", json=huge), 413, "limit")
    assert str(client.application.config["MAX_BODY_BYTES"]) in body["detail"]
    assert snapshot(client) == seeded


def test_body_limit_is_a_setting(make_app):
    app = make_app(MAX_BODY_BYTES=1000)
    client = app.test_client()
    body = {"skill": {"name": "s2", "type": "t", "params": {"blob": "x" * 2000}}}
    assert_problem(client.post("/api/projects/mindsdb/skills", json=body), 413, "1000")
    small = {"skill": {"name": "s2", "type": "t", "params": {"blob": "x" * 10}}}
    assert client.post("/api/projects/mindsdb/skills", json=small).status_code == 201


def test_unicode_in_free_text_round_trips(client, seeded):
    params = {"description": "naïve 名前 \U0001f600 'quoted' \"double\" / back\\slash"}
    created = client.post("/api/projects/p1/skills",
                          json={"skill": {"name": "s2", "type": "retrieval", "params": params}})
    assert created.status_code == 201
    assert client.get("/api/projects/p1/skills/s2").get_json()["params"] == params


def test_path_refs_with_odd_characters_are_404(client, seeded):
    for ref in ["a%20b", "%27x%27", "%22", "naïve", "x" * 300]:
        assert_problem(client.get(f"/api/projects/p1/skills/{ref}"), 404)
        assert_problem(client.get(f"/api/projects/{ref}"), 404)


def test_odd_ids_are_404(client, seeded):
    for ref in ["99999999999999999999999", "0", "²", "٣"]:
        assert_problem(client.get(f"/api/projects/p1/skills/{ref}"), 404)
        assert_problem(client.get(f"/api/projects/p1/agents/{ref}"), 404)


@pytest.mark.parametrize("raw", [
    b'{"skill": {"name": "s2", "type": "t", "params": {"a": NaN}}}',
    b'{"skill": {"name": "s2", "type": "t", "params": {"a": Infinity}}}',
    b'{"skill": {"name": "s2", "type": "t", "params": {"a": -1e400}}}',
    b'{"skill": {"name": "s2", "type": "t", "params": {"a": ' + b"1" * 5000 + b"}}}",
])
def test_non_json_numbers_are_400_and_never_stored(client, seeded, raw):
    # Python's json reads NaN/Infinity (and 1e400 as inf): stored, they came back as invalid
    # JSON; a 5 000-digit integer made json.loads raise a ValueError (a 500).
    response = client.post("/api/projects/p1/skills", data=raw,
                           content_type="application/json")
    assert_problem(response, 400, "json")
    assert_problem(client.post("/api/projects", data=raw.replace(b"skill", b"name")), 400)
    assert snapshot(client) == seeded
