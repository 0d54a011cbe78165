"""Assertions shared by the HTTP tests."""

from collections.abc import Callable
from typing import Any

from app.services import auth as auth_service

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


def sql_runner(client) -> Callable[..., dict]:
    """``run(sql, db=None, **body)``: the statement through POST /api/sql/query (``db`` as
    its context), asserting HTTP 200 and a JSON answer; the answer's body."""

    def run(sql: str, db: str | None = None, **extra: Any) -> dict:
        body: dict[str, Any] = {"query": sql, **extra}
        if db is not None:
            body["context"] = {"db": db}
        response = client.post("/api/sql/query", json=body)
        assert response.status_code == 200, response.get_data(as_text=True)
        assert response.mimetype == "application/json"
        return response.get_json()

    return run


def root_and_bob(app) -> Callable[[str, str], dict]:
    """An admin ``root`` and a user ``bob`` with an API token each (the app has
    AUTH_REQUIRED); ``sql(who, query)``: the statement's answer, run as that user."""
    with app.app_context():
        auth_service.create_user("root", "a long password 1", admin=True)
        auth_service.create_user("bob", "a long password 2")
        tokens = {who: auth_service.create_token(who, "t")[1] for who in ("root", "bob")}
    client = app.test_client()

    def sql(who: str, query: str) -> dict:
        return client.post("/api/sql/query", json={"query": query}, headers={
            "Authorization": f"Bearer {tokens[who]}"}).get_json()

    return sql
