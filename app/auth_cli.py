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
from .services import access
from .services import audit as audit_service
from .services import auth as service
from .store.types import utcnow

users_cli = AppGroup("users", help="Manage the users who may sign in.")
tokens_cli = AppGroup("tokens", help="Manage API tokens for programs.")


audit_cli = AppGroup("audit", help="The audit log.")


def register_auth_cli(app: Flask) -> None:
    app.cli.add_command(users_cli)
    app.cli.add_command(tokens_cli)
    app.cli.add_command(audit_cli)


@audit_cli.command("prune")
@click.option("--days", type=int, default=None,
              help="Keep this many days (default: QUARRY_AUDIT_RETENTION_DAYS).")
def prune_audit(days: int | None) -> None:
    """Delete audit records older than the retention."""
    click.echo(f"{audit_service.prune(days)} audit record(s) deleted", err=True)


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
@click.option("--admin", is_flag=True, help="Make the user an admin (default: member).")
def create_user(name: str, admin: bool) -> None:
    """Create user NAME; the password comes from a prompt or stdin."""
    with _as_click_errors():
        user = service.create_user(name, _read_password(), admin=admin)
    click.echo(f"user {user.name} created ({user.role})", err=True)


@users_cli.command("set-role")
@click.argument("name")
@click.argument("role", type=click.Choice(access.ROLES))
def set_role(name: str, role: str) -> None:
    """Make user NAME an admin or a member (the last admin stays one)."""
    with _as_click_errors():
        access.set_role(name, role)
    click.echo(f"user {name} is now {role}", err=True)


@users_cli.command("list")
def list_users() -> None:
    """List users: name, created, active sessions, live tokens."""
    now = utcnow()
    for user in service.list_users():
        sessions = sum(1 for s in user.sessions if not s.revoked and s.expires_at > now)
        tokens = sum(1 for t in user.tokens if not t.revoked)
        click.echo(f"{user.name}\t{user.role}\tcreated {_when(user.created_at)}\t"
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
@click.argument("owner", required=False)
@click.option("--user", "user_name", default=None, help="Owner of the token.")
@click.option("--label", default=None, help="What the token is for (default: cli).")
@click.option("--project", default=None,
              help="Narrow the token to this one project (it never sees others).")
@click.option("--read-only", is_flag=True,
              help="Narrow the token to reading (list, describe, predict, SELECT).")
def create_token(owner: str | None, user_name: str | None, label: str | None,
                 project: str | None, read_only: bool) -> None:
    """Create an API token for OWNER (or --user) and print it, once, on stdout. It carries
    its owner's rights, narrowed by --project and --read-only."""
    user_name = user_name or owner
    if user_name is None:
        raise click.UsageError("name the token's owner: flask tokens create NAME")
    with _as_click_errors():
        row, token = service.create_token(user_name, label or "cli", project=project,
                                          read_only=read_only)
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

