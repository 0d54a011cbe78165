"""Assertions shared by the HTTP tests."""

PROBLEM = "application/problem+json"


def assert_problem(response, status: int, *words: str) -> dict:
    """The response is a problem+json document with this status whose text names ``words``."""
    assert response.status_code == status, (response.status_code, response.get_data(as_text=True))
    assert response.mimetype == PROBLEM, response.mimetype
    body = response.get_json()
    assert body["status"] == status
    assert body["title"] and body["detail"]
    text = (body["title"] + " " + body["detail"] + " " + str(body.get("errors", ""))).lower()
    for word in words:
        assert word.lower() in text, (word, body)
    return body


def skill_body(name: str, type_: str = "retrieval", **params) -> dict:
    return {"skill": {"name": name, "type": type_, "params": params or {"source": "kb"}}}
