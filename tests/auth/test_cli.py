"""flask users … and flask tokens …: the command line that manages sign-in."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from app.extensions import db
from app.store import ApiToken, User
from tests.helpers import assert_problem

from .conftest import PASSWORD, sign_in

# Nothing here depends on the store's engine (the guard, login and abuse tests run on
# both): SQLite only, to keep the suite quick.
pytestmark = pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)


@pytest.fixture
def cli(auth_app):
    runner = auth_app.test_cli_runner()

    def run(*args, input=None):
        return runner.invoke(args=list(args), input=input)

    return run


def _create_token(cli, user="alice", label="etl") -> str:
    result = cli("tokens", "create", "--user", user, "--label", label)
    assert result.exit_code == 0, result.output
    return result.stdout.strip()


def test_users_create_reads_the_password_from_stdin(cli, auth_app):
    result = cli("users", "create", "alice", input=PASSWORD + "\n")
    assert result.exit_code == 0, result.output
    assert PASSWORD not in result.output
    assert sign_in(auth_app.test_client()).status_code == 200
    with auth_app.app_context():
        user = db.session.scalar(select(User))
        # The method of the app's PASSWORD_HASH (the tests' cheap one), named in the hash.
        assert user.name == "alice" and user.password_hash.startswith(
            auth_app.config["PASSWORD_HASH"] + "$")


def test_users_create_takes_no_password_argument(cli):
    result = cli("users", "create", "alice", PASSWORD)
    assert result.exit_code == 2  # usage error: there is no such argument


def test_users_create_refuses_taken_names_any_case_short_passwords_and_bad_names(cli):
    assert cli("users", "create", "alice", input=PASSWORD + "\n").exit_code == 0
    taken = cli("users", "create", "Alice", input=PASSWORD + "\n")
    assert taken.exit_code == 1 and "already exists" in taken.output
    short = cli("users", "create", "bob", input="short\n")
    assert short.exit_code == 1 and "at least 8" in short.output
    empty = cli("users", "create", "bob", input="")
    assert empty.exit_code == 1 and "no password" in empty.output
    bad = cli("users", "create", "bob smith", input=PASSWORD + "\n")
    assert bad.exit_code == 1 and "not a valid user name" in bad.output


def test_users_list_and_delete(cli, auth_app):
    cli("users", "create", "alice", input=PASSWORD + "\n")
    cli("users", "create", "bob", input=PASSWORD + "\n")
    token = _create_token(cli, "bob")
    listed = cli("users", "list")
    assert [line.split("\t")[0] for line in listed.output.splitlines()] == ["alice", "bob"]
    assert "tokens 1" in listed.output.splitlines()[1]
    client = auth_app.test_client()
    assert client.get("/api/projects", headers={"X-Api-Key": token}).status_code == 200
    assert cli("users", "delete", "bob").exit_code == 0
    assert [line.split("\t")[0] for line in cli("users", "list").output.splitlines()] == [
        "alice"]
    # Deleting a user takes its tokens along.
    assert_problem(client.get("/api/projects", headers={"X-Api-Key": token}), 401)
    missing = cli("users", "delete", "bob")
    assert missing.exit_code == 1 and "does not exist" in missing.output


def test_set_password_changes_it_and_ends_sessions(cli, auth_app):
    cli("users", "create", "alice", input=PASSWORD + "\n")
    client = auth_app.test_client()
    sign_in(client)
    assert client.get("/api/projects").status_code == 200
    result = cli("users", "set-password", "alice", input="a brand new password\n")
    assert result.exit_code == 0, result.output
    assert_problem(client.get("/api/projects"), 401)
    assert_problem(sign_in(auth_app.test_client()), 401)
    assert sign_in(auth_app.test_client(), "alice", "a brand new password").status_code == 200
    missing = cli("users", "set-password", "nobody", input="a brand new password\n")
    assert missing.exit_code == 1 and "does not exist" in missing.output


def test_tokens_create_list_use_revoke(cli, auth_app):
    cli("users", "create", "alice", input=PASSWORD + "\n")
    token = _create_token(cli, label="nightly etl")
    assert re.fullmatch(r"qt_[0-9a-f]{16}[A-Za-z0-9_-]{43}", token)
    client = auth_app.test_client()
    listed = cli("tokens", "list").output
    assert "nightly etl" in listed and "last used -" in listed and token not in listed
    for headers in ({"X-Api-Key": token}, {"Authorization": f"Bearer {token}"}):
        assert client.get("/api/projects", headers=headers).status_code == 200
    listed = cli("tokens", "list", "--user", "alice").output
    assert "last used -" not in listed and "active" in listed
    token_id = listed.split("\t")[0]
    assert cli("tokens", "revoke", token_id).exit_code == 0
    assert "revoked" in cli("tokens", "list").output
    assert_problem(client.get("/api/projects", headers={"X-Api-Key": token}), 401)
    assert cli("tokens", "revoke", "999").exit_code == 1
    assert cli("tokens", "create", "--user", "nobody", "--label", "x").exit_code == 1


def test_tokens_are_stored_only_as_hashes(cli, auth_app):
    cli("users", "create", "alice", input=PASSWORD + "\n")
    token = _create_token(cli)
    with auth_app.app_context():
        row = db.session.scalar(select(ApiToken))
        stored = " ".join(str(v) for v in (row.selector, row.token_hash, row.label))
    verifier = token[3 + 16:]
    assert verifier not in stored and token not in stored
    assert len(row.token_hash) == 64


def test_logout_leaves_api_tokens_alone(cli, auth_app):
    cli("users", "create", "alice", input=PASSWORD + "\n")
    token = _create_token(cli)
    client = auth_app.test_client()
    assert client.post("/api/logout", headers={"X-Api-Key": token}).status_code == 200
    assert client.get("/api/projects", headers={"X-Api-Key": token}).status_code == 200
