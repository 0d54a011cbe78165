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
        return f"Invalid name {name!r}: use {NAME_RULE}."
    return None


def validate_name(kind: str, name: object, *, error: type[BadRequest] = BadRequest) -> str:
    """Return ``name`` if valid, else raise ``error`` (BadRequest) naming the field."""
    message = name_error(name)
    if message:
        raise error(f"Invalid {kind} name: {message}", errors={"name": [message]})
    return name  # type: ignore[return-value]


def name_key(name: str) -> str:
    """The unique key of a name: names are unique per project case-insensitively."""
    return name.lower()


def where_ref(query: Select, entity, ref: str) -> Select:
    """Filter ``query`` to the object named ``ref``, or with ID ``ref`` when it is all digits."""
    return query.where((entity.id if is_id(ref) else entity.name_key) == ref_value(ref))


def ref_value(ref: str) -> int | str:
    """What a name-or-ID ref is compared with: the ID, or the name's key."""
    return id_value(ref) if is_id(ref) else name_key(ref)


# IDs and versions are INTEGER columns: 32 bits on PostgreSQL, which refuses to compare one
# with a larger number (a 500), as SQLite refuses to bind one beyond 64 bits.
MAX_ID = 2 ** 31 - 1


def id_value(ref: str) -> int:
    """The integer of an all-digit ref; one no row can have (beyond MAX_ID) is -1."""
    value = int(ref) if len(ref) <= 10 else -1
    return value if value <= MAX_ID else -1


def is_id(ref: str) -> bool:
    return ref.isascii() and ref.isdigit()
