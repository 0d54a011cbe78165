"""API.md §2: projects."""

from tests.helpers import assert_problem, skill_body


def test_default_project_exists(client):
    response = client.get("/api/projects")
    assert response.status_code == 200
    names = [p["name"] for p in response.get_json()]
    assert names == ["mindsdb"]
    record = response.get_json()[0]
    assert set(record) == {"name", "id", "created_at"}
    assert record["created_at"].endswith("+00:00")


def test_trailing_slash_lists_too(client):
    assert client.get("/api/projects/").status_code == 200


def test_create_get_and_case_insensitive_lookup(client):
    created = client.post("/api/projects", json={"name": "Sales"})
    assert created.status_code == 201
    assert created.get_json()["name"] == "Sales"
    for ref in ("Sales", "sales", "SALES"):
        got = client.get(f"/api/projects/{ref}")
        assert got.status_code == 200
        assert got.get_json() == created.get_json()


def test_create_taken_name_is_409_case_insensitively(client):
    assert client.post("/api/projects", json={"name": "p1"}).status_code == 201
    assert_problem(client.post("/api/projects", json={"name": "P1"}), 409, "p1", "exists")
    assert [p["name"] for p in client.get("/api/projects").get_json()] == ["mindsdb", "p1"]


def test_create_bad_names(client):
    for bad in ["", "1abc", "a" * 64, "a b", "a/b", "naïve", "a'b", 'a"b', "a.b"]:
        assert_problem(client.post("/api/projects", json={"name": bad}), 400, "name")
    for bad in [None, 1, [], {}, True]:
        assert_problem(client.post("/api/projects", json={"name": bad}), 400, "name")
    assert len(client.get("/api/projects").get_json()) == 1


def test_get_missing_project_is_404(client):
    assert_problem(client.get("/api/projects/nope"), 404, "nope")


def test_delete_empty_project(client):
    client.post("/api/projects", json={"name": "p1"})
    response = client.delete("/api/projects/p1")
    assert response.status_code == 204 and response.data == b""
    assert_problem(client.get("/api/projects/p1"), 404)
    assert_problem(client.delete("/api/projects/p1"), 404, "p1")


def test_delete_default_project_is_409(client):
    assert_problem(client.delete("/api/projects/mindsdb"), 409, "mindsdb")
    assert_problem(client.delete("/api/projects/MindsDB"), 409, "mindsdb")
    assert client.get("/api/projects/mindsdb").status_code == 200


def test_delete_non_empty_project_is_409_listing_contents(client):
    client.post("/api/projects", json={"name": "p1"})
    client.post("/api/projects/p1/skills", json=skill_body("s1"))
    client.post("/api/projects/p1/agents", json={"agent": {"name": "a1", "skills": ["s1"]}})
    body = assert_problem(client.delete("/api/projects/p1"), 409, "s1", "a1", "cascade")
    assert body["contents"] == {"skills": ["s1"], "agents": ["a1"]}
    assert client.get("/api/projects/p1/skills/s1").status_code == 200


def test_delete_with_cascade_removes_contents(client):
    client.post("/api/projects", json={"name": "p1"})
    client.post("/api/projects/p1/skills", json=skill_body("s1"))
    client.post("/api/projects/p1/agents", json={"agent": {"name": "a1", "skills": ["s1"]}})
    assert client.delete("/api/projects/p1?cascade=true").status_code == 204
    assert_problem(client.get("/api/projects/p1/skills"), 404)
    # A new project of the same name starts empty.
    client.post("/api/projects", json={"name": "p1"})
    assert client.get("/api/projects/p1/skills").get_json() == []
    assert client.get("/api/projects/p1/agents").get_json() == []


def test_delete_cascade_flag_must_be_boolean(client):
    client.post("/api/projects", json={"name": "p1"})
    assert_problem(client.delete("/api/projects/p1?cascade=maybe"), 400, "cascade")
    assert client.get("/api/projects/p1").status_code == 200
