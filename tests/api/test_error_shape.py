"""One error envelope: every status the API can return is a problem+json document."""

from tests.helpers import assert_problem, skill_body


def test_routing_404(client):
    assert_problem(client.get("/api/nonexistent"), 404, "endpoint")
    assert_problem(client.get("/nothing/here"), 404)


def test_routing_405_keeps_allow_header(client):
    response = client.patch("/api/projects")
    assert_problem(response, 405, "method")
    assert set(response.headers["Allow"].replace(" ", "").split(",")) >= {"GET", "POST"}
    assert_problem(client.post("/api/projects/p1/agent/a1"), 405)


def test_invalid_json_400(client):
    body = assert_problem(client.post("/api/projects", data="{", content_type="application/json"),
                          400, "json")
    assert "errors" not in body


def test_validation_400_has_per_field_errors(client):
    body = assert_problem(client.post("/api/projects", json={}), 400, "name")
    assert body["errors"] == {"name": ["Missing data for required field."]}


def test_conflict_409_and_not_found_404(client):
    client.post("/api/projects", json={"name": "p1"})
    assert_problem(client.post("/api/projects", json={"name": "p1"}), 409, "p1")
    assert_problem(client.get("/api/projects/p1/skills/zz"), 404, "zz", "p1")


def test_unprocessable_422(client):
    # The shape the document gives, content the service cannot act on.
    body = assert_problem(client.post("/api/projects/mindsdb/models", json={"query": "SELECT 1"}),
                          422, "create model")
    assert body["title"] == "Invalid CREATE SQL statement"


def test_payload_too_large_413(make_app):
    client = make_app(MAX_BODY_BYTES=100).test_client()
    assert_problem(client.post("/api/projects", json={"name": "x" * 200}), 413)


def test_store_down_is_503(make_app, tmp_path):
    down = [
        "postgresql+psycopg://postgres@127.0.0.1:1/quarry",  # nothing listens on port 1
        f"sqlite:///{tmp_path}/missing-dir/store.db",
    ]
    for url in down:
        client = make_app(DATABASE_URL=url).test_client()
        assert_problem(client.get("/api/projects"), 503, "store")
        assert_problem(client.post("/api/projects/mindsdb/skills", json=skill_body("s1")), 503)


def test_status_is_plain_json(client):
    response = client.get("/api/status")
    assert response.status_code == 200 and response.mimetype == "application/json"
    body = response.get_json()
    assert set(body) >= {"version", "auth"}
    assert body["auth"] == {"required": False, "signed_in": False}


def test_model_endpoint_down_502(client):
    # Port 9 (discard) listens nowhere here: the connection is refused at once.
    client.post("/api/projects/mindsdb/agents", json={"agent": {
        "name": "down", "model": {"base_url": "http://127.0.0.1:9/v1", "model_name": "m",
                                  "api_key": "sk-not-shown"}}})
    response = client.post("/api/projects/mindsdb/agents/down/completions",
                           json={"messages": [{"question": "Hi"}]})
    body = assert_problem(response, 502, "http://127.0.0.1:9/v1")
    assert "sk-not-shown" not in response.get_data(as_text=True)
    assert body["title"] == "Model endpoint failed"
