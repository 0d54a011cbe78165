"""Write-only values: secrets are stored but never returned in clear.

The one list of which names are secret (``is_secret_key``): every masking, every encryption
at rest (data sources' parameters, agents' settings) and the masking of statement texts ask
it. A name is read as words (``openai_api_key`` → openai, api, key; ``clientSecret`` →
client, secret): it is secret when one word is a secret word (password, secret, token …) or
two neighbouring words a secret pair (api key, private key …). Words, not substrings, so
that ``max_tokens`` is no secret and ``access_token`` is one.
"""

import json
import re
from functools import lru_cache
from typing import Any

from sqlglot.dialects.mysql import MySQL
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

MASK = "********"
SECRET_WORDS = frozenset({"password", "passwd", "pwd", "passphrase", "secret", "token",
                          "apikey", "credential", "credentials"})
SECRET_PAIRS = frozenset({("api", "key"), ("private", "key"), ("access", "key"),
                          ("secret", "key"), ("account", "key"), ("auth", "key"),
                          ("master", "key"), ("session", "key"),
                          ("service", "account")})  # a cloud service account's JSON key
# Lower-case substrings one of which every secret name holds: a text without any of them
# holds no secret name (a fast test before decoding or parsing it).
SECRET_MARKERS = ("pass", "pwd", "secret", "token", "key", "credential")

_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_WORD = re.compile(r"[a-z0-9]+")


@lru_cache(maxsize=4096)
def is_secret_key(key: str) -> bool:
    """Whether values under the name ``key`` are secrets (cached: this runs for every key of
    every listed object)."""
    words = _WORD.findall(_CAMEL.sub(r"\1_\2", key).lower())
    return any(word in SECRET_WORDS for word in words) or any(
        pair in SECRET_PAIRS for pair in zip(words, words[1:], strict=False))


def may_name_secret(text: str) -> bool:
    """False when ``text`` cannot hold a secret name (no marker in it); True otherwise."""
    lowered = text.lower()
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
    if not may_name_secret(text):  # no marker anywhere in the text: no secret in it
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



# --- secrets kept apart (encrypted at rest) ----------------------------------------------------

def take_secrets(value: Any, path: tuple = ()) -> tuple[Any, list[list[Any]]]:
    """``value`` with every secret (a value under a secret name, at any depth, but None, ""
    or the mask) replaced by the mask, and the secrets taken out as [path, value] pairs.

    The masked copy is what the store keeps in clear (so every read shows the mask without
    decrypting anything); the pairs are what it keeps encrypted."""
    taken: list[list[Any]] = []
    if isinstance(value, dict):
        copy = {}
        for key, item in value.items():
            if is_secret_key(str(key)) and item not in (None, "", MASK):
                copy[key] = MASK
                taken.append([[*path, key], item])
            else:
                copy[key], more = take_secrets(item, (*path, key))
                taken.extend(more)
        return copy, taken
    if isinstance(value, list):
        items = []
        for index, item in enumerate(value):
            masked, more = take_secrets(item, (*path, index))
            items.append(masked)
            taken.extend(more)
        return items, taken
    return value, taken


def put_secrets(value: Any, taken: list[list[Any]]) -> Any:
    """``value`` (masked by ``take_secrets``) with its secrets put back (a copy); a secret
    whose place is gone (its key removed since) is dropped."""
    value = json.loads(json.dumps(value))
    for path, secret in taken:
        holder = value
        for step in path[:-1]:
            try:
                holder = holder[step]
            except (KeyError, IndexError, TypeError):
                holder = None
                break
        last = path[-1] if path else None
        if isinstance(holder, dict) and holder.get(last) == MASK \
                or isinstance(holder, list) and isinstance(last, int) \
                and 0 <= last < len(holder) and holder[last] == MASK:
            holder[last] = secret
    return value

# --- statement texts ---------------------------------------------------------------------------

_SEPARATORS = frozenset({TokenType.COLON, TokenType.EQ, TokenType.FARROW})
_OPENERS = {TokenType.L_BRACE: TokenType.R_BRACE, TokenType.L_BRACKET: TokenType.R_BRACKET,
            TokenType.L_PAREN: TokenType.R_PAREN}
_NOT_VALUES = frozenset({TokenType.COMMA, TokenType.SEMICOLON, TokenType.R_BRACE,
                         TokenType.R_BRACKET, TokenType.R_PAREN, *_SEPARATORS})
_TOKENIZER = MySQL.tokenizer_class  # MindsDB's SQL quotes as MySQL: '…', "…" strings, `…` names


def mask_text_lexically(text: str) -> tuple[str, list[str]]:
    """``text`` with the value after each secret name masked, and the values masked.

    For statements the parser cannot read (the parser's tree is masked otherwise): after a
    token naming a secret and a separator (``:``, ``=``, ``=>``), the next token is masked,
    or every token of the bracketed value (``{…}``, ``[…]``, ``(…)``) that follows. A text
    that cannot even be split into tokens (an unclosed quote) is cut after the first secret
    name: what follows is masked whole.
    """
    if not may_name_secret(text):
        return text, []
    try:
        tokens = _TOKENIZER().tokenize(text)
    except TokenError:
        return _cut_at_first_secret(text)
    spans: list[tuple[int, int, str]] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if token.token_type in _NOT_VALUES or not is_secret_key(token.text):
            continue
        start = index
        while index < len(tokens) and tokens[index].token_type in _SEPARATORS:
            index += 1
        if index == start or index >= len(tokens):
            continue
        value = tokens[index]
        closer = _OPENERS.get(value.token_type)
        if closer is None:
            if value.token_type not in _NOT_VALUES:
                spans.append((value.start, value.end, value.text))
                index += 1
            continue
        depth = 0
        for index in range(index, len(tokens)):  # noqa: B020 - resumes after the value
            kind = tokens[index].token_type
            if kind in _OPENERS:
                depth += 1
            elif kind in _OPENERS.values():
                depth -= 1
                if depth == 0:
                    break
            elif kind not in _NOT_VALUES:
                spans.append((tokens[index].start, tokens[index].end, tokens[index].text))
        index += 1
    return _replace_spans(text, spans)


def _replace_spans(text: str, spans: list[tuple[int, int, str]]) -> tuple[str, list[str]]:
    parts, secrets, at = [], [], 0
    for start, end, value in spans:
        raw = text[start:end + 1]
        quote = raw[0] if raw[0] in "'\"`" and len(raw) > 1 and raw[-1] == raw[0] else ""
        # As written (escapes and all) and as read: a message may quote either.
        secrets.extend((raw[1:-1] if quote else raw, value))
        parts.extend((text[at:start], quote + MASK + quote))
        at = end + 1
    parts.append(text[at:])
    return "".join(parts), secrets


_PIECE = re.compile(r"[^\s'\"`{}\[\](),:=;]+")


def _cut_at_first_secret(text: str) -> tuple[str, list[str]]:
    for word in re.finditer(r"[A-Za-z0-9_]+", text):
        if is_secret_key(word.group()):
            rest = text[word.end():]
            # Each piece of what follows, as a message may quote any of them.
            return text[:word.end()] + " " + MASK, [rest, *_PIECE.findall(rest)]
    return text, []


def scrub(text: str, secrets: list[str]) -> str:
    """``text`` (an error message, a log line) with each of ``secrets`` replaced by the mask."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text
