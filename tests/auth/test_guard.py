"""With sign-in required, every route but status, login and the liveness probe refuses
anonymous callers.

The routes are read from ``app.url_map``, so a route added later is covered without
touching this file.
"""

from __future__ import annotations

import pytest

from app.services import auth as auth_service
from tests.helpers import assert_problem

from .conftest import SECRET_KEY, add_token, sign_in

# The only (path, method) pairs open to an anonymous caller. Readiness and /metrics, when
# they come, are open only to QUARRY_METRICS_ALLOW, not to everyone: not in this set.
PUBLIC = {("/api/status", "GET"), ("/api/login", "POST"), ("/api/util/ping", "GET")}
ARGUMENT_VALUES = {"int": 1, "float": 1.0}


def _every_route(app) -> list[tuple[str, str]]:
    """Every concrete (path, method) the app serves, with placeholder arguments."""
    routes = []
    for rule in app.url_map.iter_rules():
        values = {name: ARGUMENT_VALUES.get(type(conv).__name__.removesuffix("Converter")
                                            .lower(), "x1")
                  for name, conv in rule._converters.items()}
        _domain, path = rule.build(values)
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            routes.append((path, method))
    return routes


def test_every_route_but_status_login_and_ping_refuses_anonymous(auth_app, auth_client):
    routes = _every_route(auth_app)
    assert {("/api/projects", "GET"), ("/api/logout", "POST")} <= set(routes)
    assert PUBLIC <= set(routes)
    refused = set()
    for path, method in routes:
        response = auth_client.open(path, method=method, json={})
        if (path, method) in PUBLIC:
            assert response.status_code != 401, (path, method)
            continue
        body = assert_problem(response, 401, "authorization is required")
        assert response.headers["X-Request-ID"]
        assert body["title"] == "Unauthorized"
        refused.add((path, method))
    assert refused == set(routes) - PUBLIC


def test_every_route_lets_a_signed_in_caller_through(auth_app, auth_client, alice):
    token = add_token(auth_app)
    for path, method in _every_route(auth_app):
        response = auth_client.open(path, method=method, json={},
                                    headers={"X-Api-Key": token})
        assert response.status_code != 401, (path, method, response.get_json())


def test_liveness_probe_needs_no_credentials_and_reveals_nothing(auth_client, alice,
                                                                  auth_app):
    anonymous = auth_client.get("/api/util/ping")
    assert anonymous.status_code == 200 and anonymous.mimetype == "application/json"
    assert anonymous.get_json() == {"status": "ok"}
    assert "Set-Cookie" not in anonymous.headers
    # A signed-in caller learns nothing more from it either.
    token = add_token(auth_app)
    signed_in = auth_client.get("/api/util/ping", headers={"X-Api-Key": token})
    assert signed_in.get_data() == anonymous.get_data()
    # Only GET is open: other methods are not routes at all.
    assert_problem(auth_client.post("/api/util/ping", json={}), 405)


def test_liveness_probe_answers_while_the_store_is_down(make_auth_app, tmp_path):
    app = make_auth_app(DATABASE_URL=f"sqlite:///{tmp_path}/missing-dir/store.db")
    client = app.test_client()
    assert client.get("/api/util/ping").get_json() == {"status": "ok"}
    assert_problem(client.get("/api/projects", headers={"X-Api-Key": "qt_" + "0" * 59}), 503)


def test_openapi_document_is_guarded_too(auth_client, alice, auth_app):
    assert_problem(auth_client.get("/api/openapi.json"), 401)
    token = add_token(auth_app)
    response = auth_client.get("/api/openapi.json", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200
    assert "/api/login" in response.get_json()["paths"]


def test_unknown_path_answers_404_not_401(auth_client):
    # mindsdb_sdk tries /cloud/login first and falls back to /api/login only on 404/405.
    assert_problem(auth_client.post("/cloud/login", json={}), 404)
    assert_problem(auth_client.get("/api/login"), 405)


@pytest.mark.parametrize("headers", [
    {"Authorization": "Bearer nope"},
    {"Authorization": "Bearer qt_0123456789abcdef" + "A" * 43},
    {"Authorization": "Basic YWxpY2U6cHc="},
    {"X-Api-Key": "qs_0123456789abcdef" + "A" * 43},
    {"Cookie": "session=qs_0123456789abcdef" + "A" * 43 + ".forgedsignature"},
])
def test_wrong_credentials_are_anonymous(auth_client, alice, headers):
    assert_problem(auth_client.get("/api/projects", headers=headers), 401)
    assert auth_client.get("/api/status", headers=headers).get_json()["auth"] == {
        "required": True, "signed_in": False}


def test_token_with_a_tampered_verifier_is_refused(auth_client, auth_app, alice):
    token = add_token(auth_app)
    assert auth_client.get("/api/projects", headers={"X-Api-Key": token}).status_code == 200
    tampered = token[:-1] + ("A" if token[-1] != "A" else "B")
    assert_problem(auth_client.get("/api/projects", headers={"X-Api-Key": tampered}), 401)


def test_cookie_must_carry_our_signature(auth_client, auth_app, alice):
    token = sign_in(auth_client).get_json()["token"]
    other = auth_app.test_client()
    # The bare token as a cookie (no signature), and one signed with another key.
    other.set_cookie("session", token)
    assert_problem(other.get("/api/projects"), 401)
    from itsdangerous import Signer
    forged = Signer("another-key", salt="quarry.session-cookie").sign(token).decode()
    other.set_cookie("session", forged)
    assert_problem(other.get("/api/projects"), 401)
    good = Signer(SECRET_KEY, salt="quarry.session-cookie").sign(token).decode()
    other.set_cookie("session", good)
    assert other.get("/api/projects").status_code == 200


def test_auth_off_by_default_leaves_everything_open(client):
    assert client.get("/api/status").get_json()["auth"] == {"required": False,
                                                            "signed_in": False}
    assert client.get("/api/projects").status_code == 200


def test_auth_off_still_reports_a_signed_in_caller(make_app):
    app = make_app(AUTH_REQUIRED=False)
    with app.app_context():
        auth_service.create_user("bob", "a long password")
    client = app.test_client()
    assert sign_in(client, "bob", "a long password").status_code == 200
    assert client.get("/api/status").get_json()["auth"] == {"required": False,
                                                            "signed_in": True}


def test_a_route_added_later_is_guarded_without_doing_anything(make_auth_app):
    app = make_auth_app()

    def added_later():
        return {"secret": "data"}

    app.add_url_rule("/api/added-later", view_func=added_later)
    client = app.test_client()
    assert_problem(client.get("/api/added-later"), 401)
    assert ("/api/added-later", "GET") in _every_route(app)
