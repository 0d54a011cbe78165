"""Request ids, safe logs, and refusing to start without a secret key."""

from __future__ import annotations

import logging
import re

import pytest

from app import create_app
from app.ops import redact
from tests.helpers import assert_problem

from .conftest import PASSWORD, SECRET_KEY, add_token, sign_in

# Nothing here depends on the store's engine (the guard, login and abuse tests run on
# both): SQLite only, to keep the suite quick.
SQLITE_ONLY = pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)


def test_auth_on_without_secret_key_refuses_to_start(monkeypatch, tmp_path):
    monkeypatch.setenv("QUARRY_AUTH_REQUIRED", "true")
    monkeypatch.delenv("QUARRY_SECRET_KEY", raising=False)
    with pytest.raises(RuntimeError, match="SECRET_KEY"):
        create_app({"DATABASE_URL": f"sqlite:///{tmp_path}/s.db",
                    "INSTANCE_PATH": str(tmp_path)})


@SQLITE_ONLY
def test_a_request_id_is_on_every_response(auth_client):
    ids = set()
    for response in (auth_client.get("/api/status"), auth_client.get("/api/projects"),
                     auth_client.get("/no/such/path"), auth_client.post("/api/login", json={})):
        request_id = response.headers["X-Request-ID"]
        assert re.fullmatch(r"[0-9a-f]{32}", request_id)
        ids.add(request_id)
    assert len(ids) == 4


@SQLITE_ONLY
def test_a_sane_request_id_is_kept_and_an_odd_one_replaced(auth_client):
    kept = auth_client.get("/api/projects", headers={"X-Request-ID": "nginx-4f2a.9:1"})
    assert kept.headers["X-Request-ID"] == "nginx-4f2a.9:1"
    for odd in ("has space", "x" * 200, "semi;colon", "new\\nline"):
        response = auth_client.get("/api/status", headers={"X-Request-ID": odd})
        assert re.fullmatch(r"[0-9a-f]{32}", response.headers["X-Request-ID"]), odd


@SQLITE_ONLY
def test_log_lines_carry_the_request_id(auth_client, alice, capfd):
    capfd.readouterr()
    sign_in(auth_client, "alice", "wrong password", headers={"X-Request-ID": "req-abc-123"})
    sign_in(auth_client, headers={"X-Request-ID": "req-def-456"})
    err = capfd.readouterr().err
    failed = [line for line in err.splitlines() if "sign-in failed" in line]
    signed = [line for line in err.splitlines() if "signed in" in line]
    assert failed and all("[req-abc-123]" in line for line in failed)
    assert signed and all("[req-def-456]" in line for line in signed)


@SQLITE_ONLY
def test_secrets_of_a_sign_in_never_reach_the_logs(make_auth_app, caplog, capfd):
    # Everything at DEBUG, including the SQL the store runs and its parameters.
    app = make_auth_app(LOG_LEVEL="DEBUG")
    from .conftest import add_user
    add_user(app)
    api_token = add_token(app)
    sql_logger = logging.getLogger("sqlalchemy.engine")
    old_level = sql_logger.level
    sql_logger.setLevel(logging.DEBUG)
    caplog.set_level(logging.DEBUG)
    capfd.readouterr()
    try:
        client = app.test_client()
        sign_in(client, "alice", "wrong " + PASSWORD)
        sign_in(client, "nobody", PASSWORD + " typo")
        session_token = sign_in(client).get_json()["token"]
        cookie = client.get_cookie("session").value
        client.get("/api/projects")
        client.get("/api/projects", headers={"Authorization": f"Bearer {session_token}"})
        client.get("/api/projects", headers={"X-Api-Key": api_token})
        client.get("/api/projects", headers={"X-Api-Key": api_token + "x"})  # a bad one
        client.post("/api/logout")
    finally:
        sql_logger.setLevel(old_level)
    captured = capfd.readouterr()
    logged = caplog.text + captured.out + captured.err
    assert "sign-in failed" in logged and "SELECT" in logged  # the logs were captured
    secrets = [PASSWORD, "wrong " + PASSWORD, PASSWORD + " typo", session_token,
               session_token[3 + 16:], api_token, api_token[3 + 16:], cookie,
               cookie.rsplit(".", 1)[1], SECRET_KEY]
    for secret in secrets:
        assert secret not in logged, secret


def test_redact_masks_what_looks_like_a_secret():
    token = "qs_0123456789abcdef" + "Ab-_" * 10 + "xyz"
    lines = {
        f"using {token} now": token,
        "Authorization: Bearer abc.def-ghi": "abc.def-ghi",
        '{"password": "hunter22", "user": "bob"}': "hunter22",
        "X-Api-Key=sekrit-value": "sekrit-value",
        "Cookie: session=qs_abc.sig": "qs_abc.sig",
        "postgresql://quarry:pa55word@db/quarry": "pa55word",
    }
    for line, secret in lines.items():
        masked = redact(line)
        assert secret not in masked and "****" in masked, masked
    assert redact("user bob signed in from 10.0.0.1") == "user bob signed in from 10.0.0.1"


@SQLITE_ONLY
def test_guard_refusal_is_a_problem_document(auth_client):
    body = assert_problem(auth_client.post("/api/logout"), 401, "authorization is required")
    assert set(body) >= {"title", "detail", "status", "timestamp"}
