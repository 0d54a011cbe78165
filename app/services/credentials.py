"""Encryption of stored credentials: Fernet tokens under the keys of QUARRY_ENCRYPTION_KEY.

Several keys may be given, newest first: tokens are written with the first and read with
any, so a new key can be put in front, ``flask databases rotate-key`` run, and the old key
removed afterwards.
"""

from __future__ import annotations

from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from flask import Flask, current_app

EXTENSION_KEY = "quarry.keyring"

__all__ = ["InvalidToken", "Keyring", "current_keyring", "init_keyring"]


class Keyring:
    """Encrypts with the newest key, decrypts with any of them."""

    def __init__(self, keys: list[str]) -> None:
        self._fernet = MultiFernet([Fernet(k.encode("ascii")) for k in keys])

    def encrypt(self, text: str) -> str:
        return self._fernet.encrypt(text.encode("utf-8")).decode("ascii")

    def decrypt(self, token: str) -> str:
        """The text of ``token``; InvalidToken when no key opens it."""
        return self._fernet.decrypt(token.encode("ascii")).decode("utf-8")

    def rotate(self, token: str) -> str:
        """``token`` encrypted again with the newest key."""
        return self._fernet.rotate(token.encode("ascii")).decode("ascii")


def keyring_from(setting: Any) -> Keyring | None:
    """The keyring of an ENCRYPTION_KEY setting; None when unset. A bad key stops the start."""
    keys = [k.strip() for k in str(setting or "").split(",") if k.strip()]
    if not keys:
        return None
    for position, key in enumerate(keys, 1):
        try:
            Fernet(key.encode("ascii"))
        except (ValueError, UnicodeEncodeError):
            raise RuntimeError(f"QUARRY_ENCRYPTION_KEY: key {position} is not a Fernet key "
                               "(32 bytes, url-safe base64); make one with Fernet."
                               "generate_key()") from None
    return Keyring(keys)


def init_keyring(app: Flask) -> Keyring | None:
    keyring = keyring_from(app.config.get("ENCRYPTION_KEY"))
    app.extensions[EXTENSION_KEY] = keyring
    return keyring


def current_keyring() -> Keyring | None:
    return current_app.extensions.get(EXTENSION_KEY)
