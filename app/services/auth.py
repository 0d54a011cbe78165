"""Users, sign-in sessions, API tokens and the sign-in abuse limits.

Tokens (session and API) look like ``qs_<selector><verifier>`` / ``qt_<selector><verifier>``:
the selector (16 hex characters) finds the row, the verifier (32 random bytes) is stored only
as its sha256 and checked with ``hmac.compare_digest``. The prefixes also let the log filter
recognise a token anywhere and mask it.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from flask import current_app
from psycopg.rows import namedtuple_row
from sqlalchemy import Connection, bindparam, delete, func, select, update
from sqlalchemy.exc import IntegrityError
from werkzeug.security import check_password_hash, generate_password_hash

from ..errors import BadRequest, Conflict, NotFound, TooManyRequests, Unauthorized
from ..extensions import db
from ..store import Project
from ..store.access import SourceGrant
from ..store.auth import ApiToken, LoginFailure, User, UserSession
from ..store.types import utcnow
from ..telemetry import current_metrics
from . import audit
from .common import server_autocommit

log = logging.getLogger(__name__)

SESSION_PREFIX = "qs_"
API_TOKEN_PREFIX = "qt_"
TOKEN_PATTERN = re.compile(r"q[st]_[0-9a-f]{16}[A-Za-z0-9_-]{43}")
_SELECTOR_LEN = 16
USER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,62}")
MIN_PASSWORD_LEN = 8
# Touching last_used_at on every request would be a write per request; once a minute is
# precise enough to tell a live token from a dead one.
_LAST_USED_EVERY = timedelta(seconds=60)


@dataclass(frozen=True)
class Principal:
    """Who made the request, and with which credential."""

    user_id: int
    user_name: str
    kind: str  # "session" or "token"
    credential_id: int
    role: str = "member"              # the user's role, read with the credential
    project_key: str | None = None    # a token narrowed to one project
    read_only: bool = False           # a token narrowed to reading
    sources: frozenset[str] = frozenset()  # name keys of the sources granted to the user


@dataclass(frozen=True)
class Grant:
    """A successful sign-in: the session token (shown once) and when it expires."""

    token: str
    expires_at: datetime
    user_name: str


# ---------------------------------------------------------------------------- tokens


def _new_token(prefix: str) -> tuple[str, str, str]:
    """A fresh token, its selector, and the hash of its verifier."""
    selector = secrets.token_hex(_SELECTOR_LEN // 2)
    verifier = secrets.token_urlsafe(32)
    return prefix + selector + verifier, selector, _digest(verifier)


def _digest(verifier: str) -> str:
    # A plain sha256 suffices: the verifier has 256 bits of entropy, nothing to brute-force.
    return hashlib.sha256(verifier.encode()).hexdigest()


def _split(token: str, prefix: str) -> tuple[str, str] | None:
    if not token.startswith(prefix) or not TOKEN_PATTERN.fullmatch(token):
        return None
    body = token[len(prefix):]
    return body[:_SELECTOR_LEN], body[_SELECTOR_LEN:]


def _matches(stored_hash: str, verifier: str) -> bool:
    return hmac.compare_digest(stored_hash.encode(), _digest(verifier).encode())


# ----------------------------------------------------------------------------- users


def _user_key(name: str) -> str:
    return name.strip().lower()


def _check_password(password: str) -> None:
    if len(password) < MIN_PASSWORD_LEN:
        raise BadRequest(f"A password needs at least {MIN_PASSWORD_LEN} characters",
                         title="Password too short")


def get_user(name: str) -> User:
    user = db.session.scalar(select(User).where(User.name_key == _user_key(name)))
    if user is None:
        raise NotFound(f"User '{name}' does not exist", title="User not found")
    return user


def list_users() -> list[User]:
    return list(db.session.scalars(select(User).order_by(User.name_key)))


def create_user(name: str, password: str, *, admin: bool = False) -> User:
    if not USER_NAME.fullmatch(name):
        raise BadRequest(f"'{name}' is not a valid user name: 1-63 letters, digits or _ . @ -, "
                         "not starting with . @ or -", title="Invalid user name")
    _check_password(password)
    role = "admin" if admin else "member"
    user = User(name=name, name_key=_user_key(name), role=role,
                password_hash=_hash(password))
    db.session.add(user)
    audit.record_change("user", "create", name, None, {"name": name, "role": role})
    try:
        db.session.commit()
    except IntegrityError:
        db.session.rollback()
        raise Conflict(f"User '{name}' already exists", title="User exists") from None
    return user


def delete_user(name: str) -> None:
    """Delete a user; its sessions and tokens go with it (ON DELETE CASCADE)."""
    user = get_user(name)
    audit.record_change("user", "delete", user.name, {"name": user.name, "role": user.role},
                        None)
    db.session.delete(user)
    db.session.commit()


def set_password(name: str, password: str) -> None:
    """Change a password and end the user's sessions, so an old sign-in cannot outlive it."""
    _check_password(password)
    user = get_user(name)
    user.password_hash = _hash(password)
    for session in user.sessions:
        session.revoked = True
    audit.record_change("user", "update", user.name, {"password": "********"},
                        {"password": "********"})
    db.session.commit()


# ------------------------------------------------------------------------ api tokens


def create_token(user_name: str, label: str, *, project: str | None = None,
                 read_only: bool = False) -> tuple[ApiToken, str]:
    """A new API token for a user, optionally narrowed to one project and to reading; the
    clear token is returned here and nowhere else."""
    label = label.strip()
    if not label or len(label) > 255:
        raise BadRequest("A token label must be 1-255 characters", title="Invalid label")
    user = get_user(user_name)
    project_key = None
    if project is not None:
        project_key = project.strip().lower()
        if db.session.scalar(select(Project.id).where(Project.name_key == project_key)) is None:
            raise NotFound(f"Project '{project}' does not exist", title="Project not found")
    token, selector, token_hash = _new_token(API_TOKEN_PREFIX)
    row = ApiToken(user=user, label=label, selector=selector, token_hash=token_hash,
                   project_key=project_key, read_only=read_only)
    db.session.add(row)
    audit.record_change("token", "create", f"{user.name}: {label}", None,
                        {"label": label, "project": project_key, "read_only": read_only})
    db.session.commit()
    return row, token


def list_tokens(user_name: str | None = None) -> list[ApiToken]:
    query = select(ApiToken).join(ApiToken.user).order_by(ApiToken.id)
    if user_name is not None:
        query = query.where(User.id == get_user(user_name).id)
    return list(db.session.scalars(query))


def revoke_token(token_id: int) -> ApiToken:
    row = db.session.get(ApiToken, token_id)
    if row is None:
        raise NotFound(f"Token {token_id} does not exist", title="Token not found")
    row.revoked = True
    audit.record_change("token", "revoke", f"{row.user.name}: {row.label}",
                        {"revoked": False}, {"revoked": True})
    db.session.commit()
    return row


# scrypt:N:r:p (werkzeug's default is scrypt:32768:8:1) or pbkdf2:hash:iterations; the
# method is named in what is stored, so a change of method leaves old passwords valid.
_HASH_METHOD = re.compile(r"scrypt:(?P<n>[0-9]{1,9}):(?P<r>[0-9]{1,3}):(?P<p>[0-9]{1,3})"
                          r"|pbkdf2:(?:sha256|sha512):(?P<iterations>[0-9]{1,9})")


def check_hash_method(method: str) -> None:
    """Refuse, at start, a PASSWORD_HASH that werkzeug would refuse at the first sign-up."""
    match = _HASH_METHOD.fullmatch(method)
    numbers = {k: int(v) for k, v in match.groupdict().items() if v} if match else {}
    n = numbers.get("n", 2)
    if match is None or min(numbers.values()) < 1 or n < 2 or n & (n - 1):
        raise RuntimeError(f"QUARRY_PASSWORD_HASH is not valid: {method!r}; use "
                           "scrypt:N:r:p (N a power of two, r and p at least 1) or "
                           "pbkdf2:sha256:iterations (or sha512)")


def _hash(password: str) -> str:
    return generate_password_hash(password, method=current_app.config["PASSWORD_HASH"])


# -------------------------------------------------------------------------- sign-in


def _dummy_hash() -> str:
    # Hashed once per app, with the same method and cost as real passwords, so that an
    # unknown user costs the same scrypt run as a wrong password.
    cached = current_app.extensions.get("quarry.auth_dummy_hash")
    if cached is None:
        cached = _hash(secrets.token_hex(16))
        current_app.extensions["quarry.auth_dummy_hash"] = cached
    return cached


def _ledger_key(kind: str, value: str) -> str:
    return hashlib.sha256(f"{kind}:{value}".encode()).hexdigest()


def _seconds_until_allowed(key: str, limit: int, counted: int, attempt_ids: list[int],
                           now: datetime, window: timedelta) -> int:
    """Whole seconds until ``key`` has fewer than ``limit`` failures in the window, so that
    an attempt then is allowed: the failures that must expire first are the oldest."""
    earlier = counted - 1  # the count includes the attempt being made
    must_expire = earlier - limit + 1
    expiring = db.session.scalar(
        select(LoginFailure.failed_at)
        .where(LoginFailure.key == key, LoginFailure.failed_at > now - window,
               LoginFailure.id.not_in(attempt_ids))
        .order_by(LoginFailure.failed_at, LoginFailure.id)
        .offset(max(must_expire - 1, 0)).limit(1))
    if expiring is None:  # expired meanwhile (a slow request): retry at once
        return 1
    return max(1, math.ceil((expiring + window - now).total_seconds()))


def _refuse_when_over_limit(limits: dict[str, int], attempt_ids: list[int],
                            now: datetime) -> None:
    # The counts include the attempt being made (see sign_in): more than the limit refuses.
    window = timedelta(seconds=current_app.config["LOGIN_WINDOW_S"])
    rows = db.session.execute(
        select(LoginFailure.key, func.count())
        .where(LoginFailure.key.in_(limits), LoginFailure.failed_at > now - window)
        .group_by(LoginFailure.key)).all()
    waits = [_seconds_until_allowed(key, limits[key], count, attempt_ids, now, window)
             for key, count in rows if count > limits[key]]
    if waits:
        retry_after = max(waits)  # every limit must allow the next attempt
        log.warning("sign-in refused: too many failures for this user from this address, "
                    "or from this address")
        raise TooManyRequests("Too many failed sign-ins for this user from this address, or "
                              f"from this address; try again in {retry_after} s",
                              title="Too many sign-in attempts", retry_after=retry_after)


def sign_in(username: str, password: str, client_addr: str | None) -> Grant:
    """Check a user name and password and open a session.

    The answer and the work done are the same for an unknown user and a wrong password.
    Failures are counted per (user name, client address) — LOGIN_MAX_FAILURES — so that one
    person's typos lock out nobody else behind the same proxy or NAT, and per client address
    whatever the user name — LOGIN_MAX_FAILURES_PER_ADDRESS, much higher — so that one
    address cannot try many user names.
    """
    now = utcnow()
    addr = client_addr or "unknown"
    pair_key = _ledger_key("user-addr", f"{_user_key(username)}\n{addr}")
    addr_key = _ledger_key("addr", addr)
    limits = {pair_key: current_app.config["LOGIN_MAX_FAILURES"],
              addr_key: current_app.config["LOGIN_MAX_FAILURES_PER_ADDRESS"]}
    # The attempt is recorded as a failure *before* the limit is checked and the password
    # hashed: checking first let every request of a parallel burst pass the check before any
    # of them had counted (16 guesses with 2 workers x 8 threads, not LOGIN_MAX_FAILURES).
    # Committed first, each attempt sees those before it, so at most the limit get through.
    attempt = [LoginFailure(key=key, failed_at=now) for key in limits]
    db.session.add_all(attempt)
    db.session.commit()
    attempt_ids = [row.id for row in attempt]
    try:
        _refuse_when_over_limit(limits, attempt_ids, now)
    except TooManyRequests:
        # A refused attempt is not a failed password check: it must not prolong the lock.
        db.session.execute(delete(LoginFailure).where(LoginFailure.id.in_(attempt_ids)))
        db.session.commit()
        raise

    user = db.session.scalar(select(User).where(User.name_key == _user_key(username)))
    stored = user.password_hash if user is not None else _dummy_hash()
    valid = check_password_hash(stored, password) and user is not None
    if not valid:
        window = timedelta(seconds=current_app.config["LOGIN_WINDOW_S"])
        db.session.execute(delete(LoginFailure).where(LoginFailure.failed_at <= now - window))
        db.session.commit()
        log.info("sign-in failed (%s) from %s",
                 "wrong password" if user is not None else "unknown user", client_addr)
        current_metrics().sign_in_failures.inc()
        raise Unauthorized("Invalid username or password", title="Unauthorized")

    token, selector, token_hash = _new_token(SESSION_PREFIX)
    expires_at = now + timedelta(seconds=current_app.config["SESSION_TTL_S"])
    # The user's failures from this address are forgiven; the address keeps its count (one
    # valid account must not reset the count of an address that tries many names).
    db.session.execute(delete(LoginFailure).where(
        (LoginFailure.key == pair_key) | LoginFailure.id.in_(attempt_ids)))
    db.session.execute(delete(UserSession).where(UserSession.user_id == user.id,
                                                 UserSession.expires_at < now))
    db.session.add(UserSession(user=user, selector=selector, token_hash=token_hash,
                               created_at=now, expires_at=expires_at))
    db.session.commit()
    log.info("user %s signed in from %s", user.name, client_addr)
    return Grant(token=token, expires_at=expires_at, user_name=user.name)


def sign_out(principal: Principal | None) -> None:
    """End the caller's session. A long-lived API token is left alone: it is revoked from
    the command line, not by a program signing out."""
    if principal is None or principal.kind != "session":
        return
    session = db.session.get(UserSession, principal.credential_id)
    if session is not None:
        session.revoked = True
        db.session.commit()
        log.info("user %s signed out", principal.user_name)


# Built once: a statement object made per request costs more Python than its round trip.
# The user's data-source grants come with it (one row per grant): the access checks of the
# request need no query of their own.
_SESSION_LOOKUP = (
    select(UserSession.id, UserSession.user_id, UserSession.token_hash, UserSession.revoked,
           UserSession.expires_at, User.name, User.role, SourceGrant.source_key)
    .join(User, User.id == UserSession.user_id)
    .outerjoin(SourceGrant, SourceGrant.user_id == User.id)
    .where(UserSession.selector == bindparam("selector")))
_TOKEN_LOOKUP = (
    select(ApiToken.id, ApiToken.user_id, ApiToken.token_hash, ApiToken.revoked,
           ApiToken.last_used_at, ApiToken.project_key, ApiToken.read_only, User.name,
           User.role, SourceGrant.source_key)
    .join(User, User.id == ApiToken.user_id)
    .outerjoin(SourceGrant, SourceGrant.user_id == User.id)
    .where(ApiToken.selector == bindparam("selector")))


def _grants(rows: list[Any]) -> frozenset[str]:
    return frozenset(r.source_key for r in rows if r.source_key is not None)


def authenticate(token: str) -> Principal | None:
    """The principal a session or API token stands for, or None when it is not valid now.

    This runs on every signed-in request, so it costs one round trip to the store: the
    credential joined with its user, read outside the request's transaction (autocommit: no
    BEGIN and ROLLBACK around it). On a busy host every round trip also waits for the
    store's process and then this one to be scheduled again, a millisecond or more each; the
    earlier lookup (a pre-ping, BEGIN, the credential, its user loaded lazily, ROLLBACK) cost
    five. The rights are still read fresh on every request.
    """
    now = utcnow()
    if (parts := _split(token, SESSION_PREFIX)) is not None:
        rows = _lookup(_SESSION_LOOKUP, parts[0])
        found = rows[0] if rows else None
        if found is None or not _matches(found.token_hash, parts[1]):
            return None
        if found.revoked or found.expires_at <= now:
            return None
        return Principal(found.user_id, found.name, "session", found.id, found.role,
                         sources=_grants(rows))
    if (parts := _split(token, API_TOKEN_PREFIX)) is not None:
        rows = _lookup(_TOKEN_LOOKUP, parts[0])
        found = rows[0] if rows else None
        if found is None or not _matches(found.token_hash, parts[1]) or found.revoked:
            return None
        if found.last_used_at is None or now - found.last_used_at > _LAST_USED_EVERY:
            with _autocommit() as conn:
                conn.execute(update(ApiToken).where(ApiToken.id == found.id)
                             .values(last_used_at=now))
                conn.commit()  # a no-op in autocommit (PostgreSQL); SQLite's own commit
        return Principal(found.user_id, found.name, "token", found.id, found.role,
                         found.project_key, found.read_only, _grants(rows))
    return None


_DRIVER_SQL: dict[int, str] = {}


def _lookup(query: Any, selector: str) -> list[Any]:
    """The rows of a credential lookup. On PostgreSQL straight through psycopg (one round
    trip, the statement compiled once: see ``server_autocommit``); rows by column name."""
    if db.engine.dialect.name != "postgresql":
        with _autocommit() as conn:
            return conn.execute(query, {"selector": selector}).all()
    sql = _DRIVER_SQL.get(id(query))
    if sql is None:
        # pyformat, as psycopg takes it: the one parameter is the selector.
        sql = _DRIVER_SQL[id(query)] = str(query.compile(dialect=db.engine.dialect))
    with server_autocommit() as conn, conn.cursor(row_factory=namedtuple_row) as cursor:
        return cursor.execute(sql, {"selector": selector}).fetchall()


def _autocommit() -> Connection:
    """A store connection for one read: on a server, in autocommit (no BEGIN and ROLLBACK
    round trips). SQLite's driver opens no transaction for a read anyway, and switching its
    isolation level costs a PRAGMA each way: its connection is taken as it is."""
    conn = db.engine.connect()
    if conn.dialect.name == "sqlite":
        return conn
    return conn.execution_options(isolation_level="AUTOCOMMIT")
