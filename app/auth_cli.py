"""``flask users …`` and ``flask tokens …``: managing sign-in from the command line.

Passwords are read from a hidden prompt, or from the first line of stdin when stdin is not a
terminal (``printf '%s\\n' "$PW" | flask --app wsgi users create alice``); never from an
argument, which would leave them in shell history and in the process list.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import click
from flask import Flask
from flask.cli import AppGroup

from .errors import QuarryError
from .services import auth as service
from .store.types import utcnow

users_cli = AppGroup("users", help="Manage the users who may sign in.")
tokens_cli = AppGroup("tokens", help="Manage API tokens for programs.")


def register_auth_cli(app: Flask) -> None:
    app.cli.add_command(users_cli)
    app.cli.add_command(tokens_cli)


@contextmanager
def _as_click_errors() -> Iterator[None]:
    try:
        yield
    except QuarryError as error:
        raise click.ClickException(error.detail) from None


def _read_password() -> str:
    stdin = sys.stdin  # CliRunner replaces it too, so tests feed the password here
    if stdin.isatty():
        return click.prompt("Password", hide_input=True, confirmation_prompt=True)
    line = stdin.readline()
    password = line[:-1] if line.endswith("\n") else line
    if not password:
        raise click.ClickException("no password on stdin")
    return password


def _when(value) -> str:
    return value.isoformat(timespec="seconds") if value is not None else "-"


@users_cli.command("create")
@click.argument("name")
def create_user(name: str) -> None:
    """Create user NAME; the password comes from a prompt or stdin."""
    with _as_click_errors():
        user = service.create_user(name, _read_password())
    click.echo(f"user {user.name} created", err=True)


@users_cli.command("list")
def list_users() -> None:
    """List users: name, created, active sessions, live tokens."""
    now = utcnow()
    for user in service.list_users():
        sessions = sum(1 for s in user.sessions if not s.revoked and s.expires_at > now)
        tokens = sum(1 for t in user.tokens if not t.revoked)
        click.echo(f"{user.name}\tcreated {_when(user.created_at)}\t"
                   f"sessions {sessions}\ttokens {tokens}")


@users_cli.command("delete")
@click.argument("name")
def delete_user(name: str) -> None:
    """Delete user NAME with its sessions and tokens."""
    with _as_click_errors():
        service.delete_user(name)
    click.echo(f"user {name} deleted", err=True)


@users_cli.command("set-password")
@click.argument("name")
def set_password(name: str) -> None:
    """Set the password of NAME (from a prompt or stdin); ends its sessions."""
    with _as_click_errors():
        service.get_user(name)  # an unknown name fails before asking for a password
        service.set_password(name, _read_password())
    click.echo(f"password of {name} changed; its sessions are ended", err=True)


@tokens_cli.command("create")
@click.option("--user", "user_name", required=True, help="Owner of the token.")
@click.option("--label", required=True, help="What the token is for.")
def create_token(user_name: str, label: str) -> None:
    """Create an API token and print it, once, on stdout."""
    with _as_click_errors():
        row, token = service.create_token(user_name, label)
    click.echo(f"token {row.id} for {user_name} ({row.label}); it is shown only now:", err=True)
    click.echo(token)


@tokens_cli.command("list")
@click.option("--user", "user_name", default=None, help="Only this user's tokens.")
def list_tokens(user_name: str | None) -> None:
    """List tokens (never their value): id, user, label, created, last used, state."""
    with _as_click_errors():
        rows = service.list_tokens(user_name)
    for row in rows:
        state = "revoked" if row.revoked else "active"
        click.echo(f"{row.id}\t{row.user.name}\t{row.label}\tcreated {_when(row.created_at)}\t"
                   f"last used {_when(row.last_used_at)}\t{state}")


@tokens_cli.command("revoke")
@click.argument("token_id", type=int)
def revoke_token(token_id: int) -> None:
    """Revoke token TOKEN_ID (see `flask tokens list`)."""
    with _as_click_errors():
        service.revoke_token(token_id)
    click.echo(f"token {token_id} revoked", err=True)

