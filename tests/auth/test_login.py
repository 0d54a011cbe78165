"""POST /api/login, POST /api/logout, sessions, the cookie and GET /api/status."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, update

from app.config import SETTINGS
from app.extensions import db
from app.store import UserSession
from app.store.types import utcnow
from tests.helpers import assert_problem

from .conftest import PASSWORD, add_user, sign_in


def _cookie_attributes(response) -> dict[str, str]:
    [header] = [h for h in response.headers.getlist("Set-Cookie") if h.startswith("session=")]
    attributes = {}
    for part in header.split(";")[1:]:
        key, _, value = part.strip().partition("=")
        attributes[key.lower()] = value
    return attributes


def test_login_answers_a_token_and_sets_a_hardened_cookie(make_auth_app):
    app = make_auth_app(SESSION_TTL_S=600)
    add_user(app)
    client = app.test_client()
    response = sign_in(client)
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    token = response.get_json()["token"]
    assert list(response.get_json()) == ["token"] and token.startswith("qs_")
    attributes = _cookie_attributes(response)
    assert "httponly" in attributes
    assert attributes["samesite"] == "Lax"
    assert attributes["path"] == "/"
    assert attributes["max-age"] == "600"
    assert "secure" not in attributes  # plain HTTP, no trusted proxy
    cookie = client.get_cookie("session")
    assert cookie.value != token and cookie.value.startswith(token + ".")  # signed


def test_cookie_bearer_and_api_key_each_sign_in(auth_app, auth_client, alice):
    token = sign_in(auth_client).get_json()["token"]
    assert auth_client.get("/api/projects").status_code == 200  # the cookie
    anonymous = auth_app.test_client()
    assert anonymous.get("/api/projects").status_code == 401
    for headers in ({"Authorization": f"Bearer {token}"}, {"X-Api-Key": token}):
        assert anonymous.get("/api/projects", headers=headers).status_code == 200
        status = anonymous.get("/api/status", headers=headers).get_json()
        assert status["auth"] == {"required": True, "signed_in": True}
    assert anonymous.get("/api/status").get_json()["auth"]["signed_in"] is False


def test_status_shape(auth_client, alice):
    body = auth_client.get("/api/status").get_json()
    assert set(body) == {"version", "auth"} and isinstance(body["version"], str)
    assert body["auth"] == {"required": True, "signed_in": False}
    sign_in(auth_client)
    assert auth_client.get("/api/status").get_json()["auth"] == {"required": True,
                                                                 "signed_in": True}


def test_logout_ends_the_session_and_revokes_its_token(auth_app, auth_client, alice):
    token = sign_in(auth_client).get_json()["token"]
    # By the cookie alone, as a program keeping a cookie jar does: no other header.
    response = auth_client.post("/api/logout")
    assert response.status_code == 200 and response.get_json() == ""
    assert "session=;" in response.headers["Set-Cookie"]  # the cookie is cleared
    assert auth_client.get("/api/projects").status_code == 401
    other = auth_app.test_client()
    assert_problem(other.get("/api/projects", headers={"Authorization": f"Bearer {token}"}),
                   401)


def test_logout_with_bearer_revokes_that_token(auth_app, alice):
    client = auth_app.test_client()
    token = sign_in(client).get_json()["token"]
    client.delete_cookie("session")
    headers = {"Authorization": f"Bearer {token}"}
    assert client.post("/api/logout", headers=headers).status_code == 200
    assert_problem(client.post("/api/logout", headers=headers), 401)


def test_two_sessions_are_independent(auth_app, alice):
    first, second = auth_app.test_client(), auth_app.test_client()
    sign_in(first)
    sign_in(second)
    assert first.post("/api/logout").status_code == 200
    assert first.get("/api/projects").status_code == 401
    assert second.get("/api/projects").status_code == 200


def test_a_session_expires(auth_app, auth_client, alice):
    token = sign_in(auth_client).get_json()["token"]
    assert auth_client.get("/api/projects").status_code == 200
    with auth_app.app_context():
        db.session.execute(update(UserSession).values(
            expires_at=utcnow() - timedelta(seconds=1)))
        db.session.commit()
    assert_problem(auth_client.get("/api/projects"), 401)
    assert_problem(auth_client.get("/api/projects",
                                   headers={"Authorization": f"Bearer {token}"}), 401)


def test_session_lifetime_follows_the_setting(make_auth_app):
    app = make_auth_app(SESSION_TTL_S=90)
    add_user(app)
    before = utcnow()
    sign_in(app.test_client())
    with app.app_context():
        session = db.session.scalar(select(UserSession))
        lifetime = (session.expires_at - before).total_seconds()
    assert 89 <= lifetime <= 95


def test_wrong_password_and_unknown_user_answer_the_same(auth_client, alice):
    wrong = sign_in(auth_client, "alice", "not the password")
    unknown = sign_in(auth_client, "mallory", "not the password")
    for response in (wrong, unknown):
        assert_problem(response, 401, "invalid username or password")
        assert "Set-Cookie" not in response.headers
    strip = {"timestamp"}
    assert ({k: v for k, v in wrong.get_json().items() if k not in strip}
            == {k: v for k, v in unknown.get_json().items() if k not in strip})


def test_user_names_are_case_insensitive(auth_client, alice):
    assert sign_in(auth_client, "ALICE", PASSWORD).status_code == 200


@pytest.mark.parametrize("body", [
    {},
    {"username": "alice"},
    {"password": PASSWORD},
    {"username": 1, "password": PASSWORD},
    {"username": "alice", "password": ["x"]},
    {"username": "alice", "password": ""},
    {"username": "", "password": PASSWORD},
    ["alice", PASSWORD],
])
def test_login_without_string_username_and_password_is_400(auth_client, alice, body):
    assert_problem(auth_client.post("/api/login", json=body), 400)


def test_login_with_a_body_that_is_not_json_is_400(auth_client, alice):
    assert_problem(auth_client.post("/api/login", data="username=alice",
                                    content_type="application/x-www-form-urlencoded"), 400)


def test_login_ignores_extra_fields(auth_client, alice):
    body = {"username": "alice", "password": PASSWORD, "email": "alice"}
    assert auth_client.post("/api/login", json=body).status_code == 200


def test_secure_cookie_when_the_trusted_proxy_says_https(make_auth_app):
    app = make_auth_app(PROXY_HOPS=1)
    add_user(app)
    response = sign_in(app.test_client(), headers={"X-Forwarded-Proto": "https",
                                                   "X-Forwarded-For": "203.0.113.9"})
    assert "secure" in _cookie_attributes(response)
    assert "secure" not in _cookie_attributes(sign_in(app.test_client()))


def test_forged_forwarded_proto_is_ignored_without_a_proxy(auth_app, alice):
    response = sign_in(auth_app.test_client(), headers={"X-Forwarded-Proto": "https"})
    assert response.status_code == 200
    assert "secure" not in _cookie_attributes(response)


@pytest.mark.parametrize("method, stored", [(None, "scrypt:32768:8:1$"),
                                            ("pbkdf2:sha512:1000", "pbkdf2:sha512:1000$")])
def test_store_keeps_only_hashes(make_auth_app, method, stored):
    # The default (None: the tests' apps otherwise get a cheap method) and a chosen one.
    auth_app = make_auth_app(**({"PASSWORD_HASH": method} if method else {
        "PASSWORD_HASH": next(s.default for s in SETTINGS if s.name == "PASSWORD_HASH")}))
    add_user(auth_app)
    auth_client = auth_app.test_client()
    token = sign_in(auth_client).get_json()["token"]
    with auth_app.app_context():
        rows = db.session.execute(db.text(
            "SELECT u.password_hash, s.selector, s.token_hash FROM users u "
            "JOIN user_sessions s ON s.user_id = u.id")).all()
    [(password_hash, selector, token_hash)] = rows
    assert password_hash.startswith(stored) and PASSWORD not in password_hash
    assert token_hash not in token and token.removeprefix("qs_")[16:] not in token_hash
    assert selector == token[3:19]


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("method", ["scrypt", "scrypt:1000:8:1", "scrypt:16384:0:1",
                                    "pbkdf2:md5:1000", "pbkdf2:sha256:0", "plain", ""])
def test_a_password_hash_werkzeug_cannot_make_stops_the_start(make_app, method):
    with pytest.raises(RuntimeError, match="QUARRY_PASSWORD_HASH is not valid"):
        make_app(PASSWORD_HASH=method)


def test_a_password_hashed_by_another_method_still_signs_in(make_auth_app):
    # An operator who changes PASSWORD_HASH keeps the users made before: the stored hash
    # names its method.
    add_user(make_auth_app(PASSWORD_HASH="pbkdf2:sha256:1000"))
    app = make_auth_app(PASSWORD_HASH="scrypt:16384:8:1")
    assert sign_in(app.test_client()).status_code == 200
