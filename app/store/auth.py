"""Users, their sign-in sessions and API tokens, and the failed sign-in ledger.

Secrets are never stored: passwords as scrypt hashes (werkzeug), tokens as the sha256 of
their random verifier part next to a public ``selector`` used to find the row, so the check
itself is a constant-time comparison of two hashes (see ``app/services/auth.py``).
"""

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from ..extensions import db
from .types import UTCDateTime, utcnow


class User(db.Model):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(63))
    # Lower-cased name: "Alice" and "alice" are one user, even in a race.
    name_key: Mapped[str] = mapped_column(String(63), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    tokens: Mapped[list["ApiToken"]] = relationship(
        back_populates="user", cascade="all, delete-orphan", passive_deletes=True)
    sessions: Mapped[list["UserSession"]] = relationship(
        back_populates="user", cascade="all, delete-orphan", passive_deletes=True)


class ApiToken(db.Model):
    """A long-lived token for programs, made from the command line."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    label: Mapped[str] = mapped_column(String(255))
    selector: Mapped[str] = mapped_column(String(32), unique=True)
    token_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    revoked: Mapped[bool] = mapped_column(default=False)

    user: Mapped[User] = relationship(back_populates="tokens")


class UserSession(db.Model):
    """A sign-in through POST /api/login: its token is the cookie and the Bearer token."""

    __tablename__ = "user_sessions"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    selector: Mapped[str] = mapped_column(String(32), unique=True)
    token_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    revoked: Mapped[bool] = mapped_column(default=False)

    user: Mapped[User] = relationship(back_populates="sessions")


class LoginFailure(db.Model):
    """One failed sign-in, counted against a user name from a client address and against
    the address alone (two rows per attempt).

    Kept in the store (not in process memory) so that every gunicorn worker, on every host,
    sees the same count. ``key`` is a sha256 of "user-addr:<name>\n<ip>" or "addr:<ip>", so a
    password typed into the user name field is not kept in clear.
    """

    __tablename__ = "login_failures"
    __table_args__ = (Index("ix_login_failures_key_failed_at", "key", "failed_at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(64))
    failed_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
