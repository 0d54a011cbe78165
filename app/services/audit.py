"""The audit log: every change (with before and after, secrets masked) and every SQL statement.

A change's record is added to the session of the change itself, before the service commits:
the two land together or not at all. A statement's record is written after it ran, in a
transaction of its own (a read changes nothing in the store to share one with).
Old records are pruned by age (AUDIT_RETENTION_DAYS): ``flask audit prune``, and at most
once an hour by the process that writes a record.
"""

from __future__ import annotations

import base64
import time
from datetime import datetime, timedelta
from typing import Any

from flask import current_app, g, has_request_context
from sqlalchemy import delete, select

from ..errors import BadRequest
from ..extensions import db
from ..rules.secrets import mask
from ..store import AuditRecord
from ..store.types import utcnow

KINDS = ("sql", "project", "model", "skill", "agent", "database", "user", "token", "grant")
_PRUNE_EVERY_S = 3600.0
MAX_LIMIT = 1000


def _who() -> str | None:
    # Set by the entry guard (the signed-in user's name); the command line is "(cli)".
    if not has_request_context():
        return "(cli)"
    actor = g.get("quarry_actor")
    return actor.user_name if actor is not None else g.get("quarry_user_name")


def record_change(kind: str, action: str, target: str, before: Any, after: Any) -> None:
    """Add the record of a change to the current session; the caller's commit writes it."""
    db.session.add(AuditRecord(at=utcnow(), user_name=_who(), kind=kind, action=action,
                               target=target[:255], before=mask(before), after=mask(after)))


def record_statement(statement: str, source: str | None, row_count: int | None,
                     duration_ms: float, outcome: str, error_code: str | None) -> None:
    """Write the record of one SQL statement (its own transaction)."""
    db.session.add(AuditRecord(at=utcnow(), user_name=_who(), kind="sql", action="query",
                               source=source, statement=statement, row_count=row_count,
                               duration_ms=round(duration_ms, 3), outcome=outcome,
                               error_code=error_code))
    db.session.commit()
    _maybe_prune()


def _maybe_prune() -> None:
    state = current_app.extensions.setdefault("quarry.audit", {"pruned_at": 0.0})
    now = time.monotonic()
    if now - state["pruned_at"] >= _PRUNE_EVERY_S:
        state["pruned_at"] = now
        prune()


def prune(days: int | None = None) -> int:
    """Delete records older than the retention; how many went."""
    days = current_app.config["AUDIT_RETENTION_DAYS"] if days is None else days
    cutoff = utcnow() - timedelta(days=days)
    deleted = db.session.execute(delete(AuditRecord).where(AuditRecord.at < cutoff)).rowcount
    db.session.commit()
    return deleted


def encode_cursor(record_id: int) -> str:
    return base64.urlsafe_b64encode(f"a{record_id}".encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        if not text.startswith("a"):
            raise ValueError(text)
        return int(text[1:])
    except (ValueError, UnicodeDecodeError):
        raise BadRequest(f"Invalid cursor {cursor!r}: pass the next_cursor of a previous page",
                         title="Invalid cursor", errors={"after": ["Not a valid cursor."]}
                         ) from None


def list_records(*, user: str | None = None, since: datetime | None = None,
                 kind: str | None = None, after: str | None = None, limit: int = 100
                 ) -> tuple[list[AuditRecord], str | None]:
    """Newest first, ``limit`` a page; the cursor of the next page (keyset on id) or None."""
    query = select(AuditRecord)
    if user is not None:
        query = query.where(AuditRecord.user_name == user)
    if since is not None:
        query = query.where(AuditRecord.at >= since)
    if kind is not None:
        query = query.where(AuditRecord.kind == kind)
    if after is not None:
        query = query.where(AuditRecord.id < _decode_cursor(after))
    rows = list(db.session.scalars(query.order_by(AuditRecord.id.desc()).limit(limit + 1)))
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, encode_cursor(rows[-1].id) if more else None


COLUMNS = ("id", "at", "user_name", "kind", "action", "target", "before", "after", "source",
           "statement", "row_count", "duration_ms", "outcome", "error_code")


def rows_for_sql(limit: int) -> list[tuple[Any, ...]]:
    """The newest ``limit`` records as rows of ``quarry.audit`` (newest first)."""
    records = db.session.scalars(select(AuditRecord).order_by(AuditRecord.id.desc())
                                 .limit(limit))
    return [tuple(getattr(r, c) for c in COLUMNS) for r in records]
