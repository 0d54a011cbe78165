"""The naming rule shared by projects, models, skills and agents, and name-or-ID refs."""

import re

from ..errors import BadRequest, NameReserved, shown

# Letters, digits, _ and -; not starting with a digit, so an all-digit path segment is an ID.
NAME_PATTERN = re.compile(r"[A-Za-z_-][A-Za-z0-9_-]{0,62}")
NAME_RULE = ("1-63 characters of ASCII letters, digits, '_' and '-', not starting with a digit")

# The project that always exists, and the database SQL's catalogue tables live in. Projects
# and data sources are both "databases" in MindsDB SQL: one name space, these two included.
DEFAULT_PROJECT = "mindsdb"
SYSTEM_DATABASE = "information_schema"
# The tables every project has in SQL (p.models …); its models are tables beside them.
PROJECT_TABLES = ("models", "skills", "agents", "jobs", "jobs_history")
# The audit log as SQL reads it (admins): SELECT … FROM quarry.audit.
AUDIT_TABLE = ("quarry", "audit")


def name_error(name: object) -> str | None:
    """Why ``name`` is not a valid object name, or None when it is."""
    if not isinstance(name, str):
        return "Not a valid string."
    if not NAME_PATTERN.fullmatch(name):
        return f"Invalid name {shown(name)!r}: use {NAME_RULE}."
    return None


def validate_name(kind: str, name: object, *, error: type[BadRequest] = BadRequest) -> str:
    """Return ``name`` if valid, else raise ``error`` (BadRequest, or Unprocessable where the
    name comes from inside a request of the right shape, as a CREATE MODEL text) naming
    the field."""
    message = name_error(name)
    if message:
        raise error(f"Invalid {kind} name: {message}", errors={"name": [message]})
    return name  # type: ignore[return-value]


def validate_database_name(kind: str, name: object) -> str:
    """A project's or data source's name: the naming rule, and not ``information_schema``,
    the database SQL's catalogue tables live in (one name space with them, SHOW DATABASES).
    That one is a name of the right shape that is taken: 409, as another database's is."""
    validate_name(kind, name)
    if name_key(name) == SYSTEM_DATABASE:  # type: ignore[arg-type]
        raise NameReserved(f"'{name}' is the name of a system database", name=name)
    return name  # type: ignore[return-value]


def name_key(name: str) -> str:
    """The unique key of a name: names are unique per project case-insensitively."""
    return name.lower()


def lookup_key(name: str) -> str:
    """The key to look ``name`` up by: its name key, or "" (no stored name has it) when
    ``name`` breaks the naming rule and so cannot exist. Such text never reaches the
    store: a NUL character in it would make PostgreSQL refuse the whole statement."""
    return name_key(name) if NAME_PATTERN.fullmatch(name) else ""


def ref_value(ref: str) -> int | str:
    """What a name-or-ID ref is compared with: the ID, or the name's lookup key."""
    return id_value(ref) if is_id(ref) else lookup_key(ref)


# IDs and versions are 32-bit columns (INTEGER on PostgreSQL): a larger number matches no
# row, and binding it would make PostgreSQL refuse the statement (and SQLite, beyond 64 bits).
MAX_ID = 2**31 - 1


def id_value(ref: str) -> int:
    """The integer of an all-digit ref; -1 (no row) when no ID column could hold it.

    The length is checked before converting: int() of thousands of digits is slow, and
    beyond 4 300 it raises."""
    digits = ref.lstrip("0") or "0"
    value = int(digits) if len(digits) <= 10 else -1
    return value if value <= MAX_ID else -1


def is_id(ref: str) -> bool:
    return ref.isascii() and ref.isdigit()
