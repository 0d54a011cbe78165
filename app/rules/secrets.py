"""Write-only values: secrets are stored but never returned in clear."""

import json
from typing import Any

MASK = "********"
SECRET_MARKERS = ("api_key", "password", "secret", "token")


def is_secret_key(key: str) -> bool:
    # Plain substring tests on the lower-cased key: several times faster than one
    # case-insensitive regex, and this runs for every key of every listed object.
    lowered = key.lower()
    return any(marker in lowered for marker in SECRET_MARKERS)


def mask(value: Any) -> Any:
    """``value`` with every secret-looking key's value replaced by the mask (copied if so)."""
    if isinstance(value, dict):
        return {k: (MASK if v is not None and is_secret_key(str(k)) else mask(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [mask(v) for v in value]
    return value


def mask_json_text(text: str | None) -> str:
    """Stored JSON text with its secrets masked; decoded only when a secret key may be in it.

    Most params hold no secret: their text is returned as stored, without decoding and
    encoding it again (the SQL tables p.skills / p.agents show params as JSON text).
    """
    if text is None:
        return "{}"
    if not is_secret_key(text):  # no marker anywhere in the text: no secret in it
        return text
    return json.dumps(mask(json.loads(text)))


def merge(current: dict[str, Any] | None, changes: dict[str, Any]) -> dict[str, Any]:
    """Merge ``changes`` into ``current`` key by key; a None value deletes the key.

    A secret sent back as the mask (a client echoing what it read) keeps the stored value,
    so a read-modify-write round trip never overwrites a secret with asterisks.
    """
    merged = dict(current or {})
    for key, value in changes.items():
        if value is None:
            merged.pop(key, None)
        elif value == MASK and is_secret_key(key) and key in merged:
            continue
        else:
            merged[key] = value
    return merged


def keep_masked(current: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """A replacement dict where masked secrets keep their stored values."""
    current = current or {}
    return {k: (current[k] if v == MASK and is_secret_key(k) and k in current else v)
            for k, v in new.items()}
