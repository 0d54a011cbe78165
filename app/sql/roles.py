"""The role check: does a data source's account hold more than it needs to read?

Quarry keeps every statement read-only on its own, but an account that may read server
files, run programs, stop other sessions or write tables turns any hole into a disaster.
At start, Quarry asks each PostgreSQL and MariaDB source what its account may do, logs a
warning for every privilege beyond reading, and shows them in ``GET /api/status``. A source
with ``"privileged_role": "refuse"`` makes that a start error (or, when the source was down
at start and is checked at first use, refuses its statements). A source that cannot be
reached at start does not stop Quarry: it is checked on its first statement.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from typing import Any

from .errors import ErrorCode, SqlError

log = logging.getLogger(__name__)

PRIVILEGED_ROLE_MODES = ("warn", "refuse")

# Predefined PostgreSQL roles that reach beyond the database's tables.
PG_ROLES = {
    "pg_read_server_files": "reads any file the server may read (pg_read_server_files)",
    "pg_write_server_files": "writes files on the server (pg_write_server_files)",
    "pg_execute_server_program": "runs programs on the server (pg_execute_server_program)",
    "pg_signal_backend": "cancels and stops other sessions (pg_signal_backend)",
    "pg_write_all_data": "may write every table (pg_write_all_data)",
}

_PG_ROLE_SQL = """
SELECT r.rolsuper,
       ARRAY(SELECT b.rolname FROM pg_roles b
             WHERE b.rolname = ANY(%(roles)s) AND pg_has_role(r.oid, b.oid, 'MEMBER')
             ORDER BY b.rolname) AS member_of,
       (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
          AND n.nspname NOT IN ('pg_catalog', 'information_schema')
          AND n.nspname NOT LIKE 'pg\\_toast%%' AND n.nspname NOT LIKE 'pg\\_temp%%'
          AND (pg_has_role(r.oid, c.relowner, 'USAGE')
               OR has_table_privilege(r.oid, c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE'))
       ) AS writable
FROM pg_roles r WHERE r.rolname = current_user
"""

# MariaDB privileges that only read; anything else on any object is reported.
MARIADB_READ_PRIVILEGES = frozenset({"USAGE", "SELECT", "SHOW VIEW", "SHOW DATABASES"})
_GRANT = re.compile(r"^GRANT (?P<privs>.+?) ON (?P<on>.+?) TO ", re.IGNORECASE)


@dataclass(frozen=True)
class RoleReport:
    """What a source's account may do beyond reading (no warnings: SELECT-only)."""

    warnings: tuple[str, ...]

    @property
    def privileged(self) -> bool:
        return bool(self.warnings)


def inspect_postgresql(pg: Any) -> RoleReport:
    """The privileges of the current user of a psycopg connection, beyond reading."""
    superuser, member_of, writable = pg.execute(
        _PG_ROLE_SQL, {"roles": list(PG_ROLES)}).fetchone()
    if superuser:  # a superuser is a member of every role and may write every table
        return RoleReport(("connects as a superuser (may do anything: read and write server "
                           "files, run programs, stop other sessions, write every table)",))
    warnings = [f"is a member of {name}: it {PG_ROLES[name].split(' (')[0]}"
                for name in member_of]
    if writable:
        warnings.append(f"may write (or owns) {writable} table(s) or view(s)")
    return RoleReport(tuple(warnings))


def inspect_mariadb(my: Any) -> RoleReport:
    """The privileges of the current user of a PyMySQL connection beyond reading, with those
    of every role granted to it (it could switch to them; a user may see a role's grants only
    while it is active, so each is switched on in turn, and the current one restored)."""
    with my.cursor() as cursor:
        cursor.execute("SELECT CURRENT_ROLE()")
        (current,) = cursor.fetchone()
        cursor.execute("SELECT ROLE_NAME FROM information_schema.APPLICABLE_ROLES")
        roles = sorted({row[0] for row in cursor.fetchall()})
        lines = _grant_lines(cursor)
        try:
            for role in roles:
                cursor.execute(f"SET ROLE {_backticks(role)}")
                lines += _grant_lines(cursor)
        finally:
            if roles:
                cursor.execute(f"SET ROLE {_backticks(current) if current else 'NONE'}")
    found: dict[str, set[str]] = {}
    for line in lines:
        match = _GRANT.match(line)
        if match is None:  # GRANT role TO user, SET DEFAULT ROLE …: roles are read above
            continue
        privileges = _privileges(match["privs"])
        if re.search(r"WITH GRANT OPTION\s*$", line, re.IGNORECASE):
            privileges.add("GRANT OPTION")
        for privilege in privileges - MARIADB_READ_PRIVILEGES:
            found.setdefault(privilege, set()).add(match["on"].strip())
    return RoleReport(tuple(f"holds {privilege} on {', '.join(sorted(on))}"
                            for privilege, on in sorted(found.items())))


def _grant_lines(cursor: Any) -> list[str]:
    cursor.execute("SHOW GRANTS")
    return [row[0] for row in cursor.fetchall()]


def _backticks(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _privileges(text: str) -> set[str]:
    """``SELECT (a, b), INSERT`` → {"SELECT", "INSERT"} (column lists dropped)."""
    text = re.sub(r"\([^)]*\)", "", text)
    return {" ".join(p.split()).upper() for p in text.split(",") if p.strip()}


def inspect(dialect: str, dbapi_connection: Any) -> RoleReport | None:
    """The report for a raw driver connection of ``dialect``; None for SQLite (no roles)."""
    if dialect == "postgresql":
        return inspect_postgresql(dbapi_connection)
    if dialect == "mysql":
        return inspect_mariadb(dbapi_connection)
    return None


def role_state(source: Any) -> str:
    """``passed`` | ``privileged`` | ``unknown`` (not checked yet) | ``not_applicable``."""
    if source.dialect in ("sqlite", "files"):  # no account: a file, or uploaded files
        return "not_applicable"
    if source.role is None:
        return "unknown"
    return "privileged" if source.role.privileged else "passed"


def _record(source: Any, report: RoleReport) -> None:
    source.role = report
    if report.privileged:
        log.warning("Data source '%s' %s. Quarry keeps its statements read-only, but give it "
                    "a SELECT-only account (docs/sql.md, 'The account')", source.name,
                    "; ".join(report.warnings))


def _refusal_message(source: Any) -> str:
    return (f"Data source '{source.name}' connects with an account that "
            f"{'; '.join(source.role.warnings)}, and its option privileged_role is "
            f"'refuse'; give it a SELECT-only account (docs/sql.md)")


def check_account(source: Any, dbapi_connection: Any) -> None:
    """Check a server source's account over an open driver connection (at start), and log
    a warning if it is privileged."""
    _record(source, inspect(source.dialect, dbapi_connection))


def refuse_at_start(source: Any) -> None:
    """RuntimeError if the source's account is privileged and its option says refuse."""
    if source.role is not None and source.role.privileged \
            and source.privileged_role == "refuse":
        raise RuntimeError(f"QUARRY_DATA_SOURCES: {_refusal_message(source)}")


_lazy_lock = threading.Lock()


def check_on_use(source: Any, conn: Any) -> None:
    """Before a statement runs: check a source that was down at start (once), and refuse
    its statements when its account is privileged and its option says refuse."""
    if source.dialect == "sqlite":
        return
    if source.role is None:
        with _lazy_lock:
            if source.role is None:
                try:
                    _record(source, inspect(source.dialect, conn.driver_connection))
                except Exception as exc:
                    if source.privileged_role == "refuse":
                        raise SqlError(ErrorCode.PERMISSION_DENIED,
                                       f"Data source '{source.name}': its account cannot be "
                                       f"checked ({exc}), and its option privileged_role is "
                                       f"'refuse'") from None
                    return
    if source.role.privileged and source.privileged_role == "refuse":
        raise SqlError(ErrorCode.PERMISSION_DENIED, _refusal_message(source))
