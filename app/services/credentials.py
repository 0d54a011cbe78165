"""Encryption of stored credentials: Fernet tokens under the keys of QUARRY_ENCRYPTION_KEY.

Several keys may be given, newest first: tokens are written with the first and read with
any, so a new key can be put in front, ``flask databases rotate-key`` run, and the old key
removed afterwards.

The cryptography package is imported when a credential is first encrypted or decrypted, not
at start-up: a server that never opens a stored data source (most of them: predictions, SQL
on configured sources) does not map it. Callers catch this module's ``InvalidToken``.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from typing import Any

from flask import Flask, current_app

from ..errors import BadRequest, Unprocessable
from ..rules.secrets import put_secrets, take_secrets

EXTENSION_KEY = "quarry.keyring"

__all__ = ["InvalidToken", "Keyring", "current_keyring", "init_keyring", "instance_key",
           "opened_fields", "rotate_tokens", "seal", "seal_fields", "unseal"]

# The key the embedded default (the SQLite store in the instance folder) makes for itself.
INSTANCE_KEY_FILE = "encryption.key"


class InvalidToken(Exception):  # noqa: N818 - the name cryptography gives the same failure
    """No key of the keyring opens the token (or it is not a token)."""


class Keyring:
    """Encrypts with the newest key, decrypts with any of them."""

    def __init__(self, keys: list[str]) -> None:
        self._keys = list(keys)
        self._multi: Any = None

    def _fernet(self) -> Any:
        if self._multi is None:  # two threads may both build it: the same keys, no harm
            from cryptography.fernet import Fernet, MultiFernet

            self._multi = MultiFernet([Fernet(k.encode("ascii")) for k in self._keys])
        return self._multi

    def encrypt(self, text: str) -> str:
        return self._fernet().encrypt(text.encode("utf-8")).decode("ascii")

    def decrypt(self, token: str) -> str:
        """The text of ``token``; InvalidToken when no key opens it."""
        fernet = self._fernet()
        from cryptography.fernet import InvalidToken as FernetInvalidToken

        try:
            return fernet.decrypt(token.encode("ascii")).decode("utf-8")
        except FernetInvalidToken:
            raise InvalidToken("no key opens this token") from None

    def rotate(self, token: str) -> str:
        """``token`` encrypted again with the newest key; InvalidToken when no key opens it."""
        fernet = self._fernet()
        from cryptography.fernet import InvalidToken as FernetInvalidToken

        try:
            return fernet.rotate(token.encode("ascii")).decode("ascii")
        except FernetInvalidToken:
            raise InvalidToken("no key opens this token") from None


def _is_fernet_key(key: str) -> bool:
    """Fernet's own test of a key (32 bytes in url-safe base64), without importing it."""
    try:
        return len(base64.urlsafe_b64decode(key.encode("ascii"))) == 32
    except (ValueError, UnicodeEncodeError, binascii.Error):
        return False


def keyring_from(setting: Any) -> Keyring | None:
    """The keyring of an ENCRYPTION_KEY setting; None when unset. A bad key stops the start."""
    keys = [k.strip() for k in str(setting or "").split(",") if k.strip()]
    if not keys:
        return None
    for position, key in enumerate(keys, 1):
        if not _is_fernet_key(key):
            raise RuntimeError(f"QUARRY_ENCRYPTION_KEY: key {position} is not a Fernet key "
                               "(32 bytes, url-safe base64); make one with Fernet."
                               "generate_key()")
    return Keyring(keys)


def instance_key(folder: str) -> str:
    """The key kept in ``folder`` (``encryption.key``, mode 0600), made on first use.

    Several workers may start at once: each writes a key of its own to a private file and
    links it to the name, which only the first link gets; every one then reads the file,
    so all use the winner's key. The file appears whole or not at all.
    """
    path = os.path.join(folder, INSTANCE_KEY_FILE)
    if not os.path.exists(path):
        # A Fernet key: 32 random bytes in url-safe base64 (no need to import cryptography).
        key = base64.urlsafe_b64encode(os.urandom(32))
        draft = f"{path}.{os.getpid()}.{os.urandom(4).hex()}"
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, key + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(draft, path)
        except FileExistsError:
            pass  # another worker's key won
        finally:
            os.unlink(draft)
    with open(path, encoding="ascii") as file:
        return file.read().strip()


def init_keyring(app: Flask) -> Keyring | None:
    keyring = keyring_from(app.config.get("ENCRYPTION_KEY"))
    app.extensions[EXTENSION_KEY] = keyring
    return keyring


def current_keyring() -> Keyring | None:
    return current_app.extensions.get(EXTENSION_KEY)


def seal(secret: Any, holder: str, names: list[str]) -> str:
    """``secret`` (JSON) encrypted with the newest key; 422 when no key is configured.

    ``holder`` and ``names`` word the refusal: "The database has secret parameters
    (password) but …"."""
    keyring = current_keyring()
    if keyring is None:
        raise Unprocessable(f"{holder} has secret parameters ({', '.join(sorted(names))}) but "
                            "QUARRY_ENCRYPTION_KEY is not set, so they could not be stored "
                            "encrypted; the administrator must set QUARRY_ENCRYPTION_KEY (see "
                            "the README)", title="Encryption key not configured")
    return keyring.encrypt(json.dumps(secret))


def unseal(keyring: Keyring | None, token: str | None) -> Any:
    """What ``seal`` encrypted (None without a token); 400 when no key opens it."""
    if not token:
        return None
    if keyring is None:
        raise BadRequest("The stored credentials cannot be decrypted: QUARRY_ENCRYPTION_KEY "
                         "is not set", title="Encryption key not configured")
    try:
        return json.loads(keyring.decrypt(token))
    except InvalidToken:
        raise BadRequest("The stored credentials cannot be decrypted with any key of "
                         "QUARRY_ENCRYPTION_KEY (was the key that encrypted them removed?)",
                         title="Encryption key not configured") from None


# --- records keeping their secrets apart (agents, skills) -------------------------------------
# Their JSON fields hold the mask where a secret was (every read shows it, nothing to
# decrypt); the record's ``secrets`` column is a token of {field: [[path, value], …]}.

def seal_fields(record: Any, clear: dict[str, Any], holder: str) -> None:
    """Set ``clear``'s fields on ``record`` with their secrets masked, and ``record.secrets``
    to the token of those secrets (None when there are none; 422 when there are and no key
    is configured).

    A mask left in ``clear`` where the record kept a secret (a client sending back what it
    read, at any depth) keeps that secret."""
    kept = unseal(current_keyring(), record.secrets) or {} if record.secrets else {}
    taken = {}
    for field, value in clear.items():
        if field in kept:
            value = put_secrets(value, kept[field])
        masked, found = take_secrets(value)
        setattr(record, field, masked)
        if found:
            taken[field] = found
    names = sorted({str(path[-1]) for found in taken.values() for path, _ in found})
    record.secrets = seal(taken, holder, names) if taken else None


def opened_fields(values: dict[str, Any], token: str | None) -> dict[str, Any]:
    """``values`` (fields as stored, masked) with the secrets of ``token`` put back."""
    taken = unseal(current_keyring(), token) or {}
    return {field: put_secrets(value, taken[field]) if field in taken else value
            for field, value in values.items()}


def rotate_tokens(records: list[Any], label: str) -> int:
    """Encrypt each record's ``secrets`` again with the newest key (the caller commits); how
    many. 400 when no key is set, or when a token opens with none (nothing changed then)."""
    keyring = current_keyring()
    if keyring is None:
        raise BadRequest("QUARRY_ENCRYPTION_KEY is not set: there is no key to rotate to",
                         title="Encryption key not configured")
    rotated = []
    for record in records:
        try:
            rotated.append(keyring.rotate(record.secrets))
        except InvalidToken:
            name = getattr(record, "name", None)
            raise BadRequest(f"The secrets of {label}{f' {name!r}' if name else ''} cannot "
                             "be decrypted with any key of QUARRY_ENCRYPTION_KEY; nothing was "
                             "changed",
                             title="Encryption key not configured") from None
    for record, token in zip(records, rotated, strict=True):
        record.secrets = token
    return len(records)
