"""The naming rule shared by projects, models, skills and agents, and name-or-ID lookup."""

import re

from sqlalchemy import Select

from ..errors import BadRequest

# Letters, digits, _ and -; not starting with a digit, so an all-digit path segment is an ID.
NAME_PATTERN = re.compile(r"[A-Za-z_-][A-Za-z0-9_-]{0,62}")
NAME_RULE = ("1-63 characters of ASCII letters, digits, '_' and '-', not starting with a digit")


def name_error(name: object) -> str | None:
    """Why ``name`` is not a valid object name, or None when it is."""
    if not isinstance(name, str):
        return "Not a valid string."
    if not NAME_PATTERN.fullmatch(name):
        return f"Invalid name {shown(name)!r}: use {NAME_RULE}."
    return None


def shown(text: str, limit: int = 80) -> str:
    """``text`` as a message quotes it: cut short when long, so that a name of a megabyte
    does not come back in the answer."""
    return text if len(text) <= limit else text[:limit - 1] + "…"


def validate_name(kind: str, name: object) -> str:
    """Return ``name`` if valid, else raise BadRequest naming the field."""
    message = name_error(name)
    if message:
        raise BadRequest(f"Invalid {kind} name: {message}", errors={"name": [message]})
    return name  # type: ignore[return-value]


def name_key(name: str) -> str:
    """The unique key of a name: names are unique per project case-insensitively."""
    return name.lower()


def lookup_key(name: str) -> str:
    """The key to look ``name`` up by: its name key, or "" (no stored name has it) when
    ``name`` breaks the naming rule and so cannot exist. Such text never reaches the
    store: a NUL character in it would make PostgreSQL refuse the whole statement."""
    return name_key(name) if NAME_PATTERN.fullmatch(name) else ""


def where_ref(query: Select, entity, ref: str) -> Select:
    """Filter ``query`` to the object named ``ref``, or with ID ``ref`` when it is all digits."""
    return query.where((entity.id if is_id(ref) else entity.name_key) == ref_value(ref))


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
