"""JSON in and out: the strict reader of request bodies, and the app's JSON provider.

Reading: bodies are decoded by the standard library (it keeps integers of any size, which
orjson would turn into floats), after two cheap checks that keep hostile input from
reaching it or the store:

- nesting: the decoder recurses once per level, so 100 000 nested ``[`` would exhaust the
  interpreter's stack (a RecursionError, a 500) and a few hundred levels would do the same
  later, in the schemas or when the answer is written. Depth is measured on the raw bytes,
  in C-speed passes, before decoding; a body nested deeper than the limit is refused.
- text the stores cannot hold: a NUL character (``\\u0000``; PostgreSQL refuses it in text
  and in jsonb) or a lone UTF-16 surrogate (``\\ud800``; not Unicode at all, so it cannot be
  encoded as UTF-8 for any store). Both can only arrive as ``\\u`` escapes, so a body
  without such an escape is not inspected further. Refused with 422, not 400: the body may
  well have its documented shape (the OpenAPI document states the rule as a pattern, but a
  client or a generator may not apply it to an object's keys); it holds a value the service
  cannot keep.

Writing: orjson for speed; encoding is most of the cost of a large answer (a list of 1 000
skills). orjson refuses integers beyond 64 bits, which a client may well have stored in a
skill's params; such a document falls back to the standard encoder, so nothing a client
stored fails to come back.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from array import array
from collections.abc import Iterable
from typing import Any

import orjson
from flask.json.provider import DefaultJSONProvider

from .errors import BadRequest, Unprocessable

_NOT_QUOTE_OR_BRACKET = bytes(b for b in range(256) if b not in b'"[]{}')
_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # +1 and -1 as signed bytes
_ESCAPE = re.compile(rb"\\.", re.DOTALL)  # a backslash and the byte it escapes
# The tokens that decide where a too-deep value sits: strings (keys), brackets and colons.
# A string token always matches where it starts (an unterminated one runs to the end), and
# possessively, so the walk is linear even on a body of unclosed quotes.
_TOKEN = re.compile(rb'"(?:[^"\\]++|\\(?:.|\Z))*+(?:"|\Z)|[\[\]{}:]', re.DOTALL)
_PATH_TOKENS = 200_000  # beyond, the refusal names no field rather than walk on
# An escape that may decode to NUL or to a surrogate (an escaped backslash before "u"
# matches too; it only costs the exact check of the decoded document).
_SUSPECT_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")
_BAD_CHARACTER = re.compile("[\x00\ud800-\udfff]")


def nests_deeper(body: bytes, max_depth: int) -> bool:
    """Whether the arrays and objects of the JSON text ``body`` nest deeper than ``max_depth``
    (``pieces_nest_deeper`` of the text in one piece)."""
    return pieces_nest_deeper((body,), max_depth)


def pieces_nest_deeper(pieces: Iterable[bytes], max_depth: int) -> bool:
    """Whether the JSON text read as ``pieces`` (a file of any size, read a block at a time)
    nests arrays and objects deeper than ``max_depth``.

    All in passes of C code over the bytes: escapes (a backslash and the byte after it) are
    dropped, so the quotes left delimit strings; everything but quotes and brackets is
    dropped; splitting at the quotes leaves the brackets outside strings at even places.
    Each bracket is then +1 or -1, and the depth is the largest running sum. From one piece
    to the next go the depth, whether a string is open, and whether a backslash ended the
    piece (it escapes the next piece's first byte). For text that is not JSON the figure may
    be wrong, but the decoder refuses such text anyway, before nesting as deep as the figure
    is off.
    """
    depth, in_string, escaping = 0, False, False
    for piece in pieces:
        if escaping:
            piece, escaping = piece[1:], False
        if b"\\" in piece:
            piece = _ESCAPE.sub(b"", piece)
            if piece.endswith(b"\\"):
                piece, escaping = piece[:-1], True
        parts = piece.translate(None, _NOT_QUOTE_OR_BRACKET).split(b'"')
        steps = b"".join(parts[1::2] if in_string else parts[::2]).translate(_STEP)
        in_string ^= len(parts) % 2 == 0
        opened = steps.count(b"\x01")
        if depth + opened > max_depth and (
                b"\x01" * (max_depth + 1) in steps  # the usual attack: a run of openings
                or max(itertools.accumulate(array("b", steps), initial=depth)) > max_depth):
            return True
        depth += 2 * opened - len(steps)
    return False


def parse_json_body(body: bytes, max_depth: int) -> Any:
    """The JSON document ``body`` as RFC 8259 has it, or an error saying what is wrong.

    Refused with ``json.JSONDecodeError`` (webargs answers "Invalid JSON body"): invalid
    JSON, invalid UTF-8, Python's NaN/Infinity extensions, numbers that overflow a float
    and integers beyond Python's digit limit (they would be stored, then answered as
    invalid JSON). Refused with ``BadRequest`` naming the field: nesting deeper than
    ``max_depth``, and strings holding NUL or a lone surrogate.
    """
    if nests_deeper(body, max_depth):
        raise _too_deep(body, max_depth)
    try:
        document = json.loads(body.decode("utf-8"), parse_constant=_refuse_constant,
                              parse_float=_finite_float)
    except json.JSONDecodeError:
        raise
    except RecursionError:  # only if the depth scan were ever wrong: still a 400
        raise _too_deep(body, max_depth) from None
    except ValueError as exc:  # UnicodeDecodeError, int digit limit
        # A non-empty doc: webargs reads an empty one as "no body" (missing), not as invalid.
        raise json.JSONDecodeError(str(exc), "body", 0) from None
    if _SUSPECT_ESCAPE.search(body):
        _check_text(document, [])
    return document


def _refuse_constant(token: str) -> Any:
    raise json.JSONDecodeError(f"{token} is not a JSON value", token, 0)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise json.JSONDecodeError(f"{text} is too large a number", text, 0)
    return value


def _too_deep(body: bytes, max_depth: int) -> BadRequest:
    path = _deep_path(body, max_depth)
    message = f"Nested more than {max_depth} levels deep (the limit is {max_depth})."
    where = f"{'.'.join(path)} holds" if path else "it holds"
    return BadRequest(f"The request body is nested too deep: {where} arrays or objects "
                      f"nested more than {max_depth} levels deep (the limit is {max_depth})",
                      title="Nested too deep", errors=_errors_at(path, message))


def _deep_path(body: bytes, max_depth: int) -> list[str]:
    """The field whose value first nests beyond ``max_depth``: the leading object keys on
    the way down (at most two, the depth of Quarry's request schemas), up to the first
    array. Only run on a refused body, so a plain token walk is fast enough (and it gives
    up, naming no field, on a body of very many tokens)."""
    opened: list[bytes | None] = []  # per open bracket: its key in the enclosing object
    last_string: bytes | None = None
    key: bytes | None = None  # the key of the value about to start (None in an array)
    for match in itertools.islice(_TOKEN.finditer(body), _PATH_TOKENS):
        token = match.group()
        if token == b":":
            key = last_string
        elif token in (b"[", b"{"):
            opened.append(key)
            key = None
            if len(opened) > max_depth:
                break
        elif token in (b"]", b"}"):
            if opened:
                opened.pop()
            key = None
        else:
            last_string = token
    else:
        return []  # gave up, or never deeper (a body the decoder's stack could not take)
    path: list[str] = []
    for token in opened[1:3]:
        name = _key_text(token)
        if name is None:
            break
        path.append(name)
    return path


def _key_text(token: bytes | None) -> str | None:
    if token is None:
        return None
    try:
        value = json.loads(token)
    except (ValueError, TypeError):
        return None
    return value if isinstance(value, str) and not _BAD_CHARACTER.search(value) else None


def _check_text(value: Any, path: list[str]) -> None:
    """Refuse a string (value or key) holding NUL or a lone surrogate, naming its field."""
    if isinstance(value, str):
        if _BAD_CHARACTER.search(value):
            raise _bad_text(value, path)
    elif isinstance(value, dict):
        for key, item in value.items():
            if _BAD_CHARACTER.search(key):
                raise _bad_text(key, path, in_key=True)
            _check_text(item, [*path, key])
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_text(item, [*path, str(index)])


def _bad_text(text: str, path: list[str], in_key: bool = False) -> Unprocessable:
    found = _BAD_CHARACTER.search(text).group()  # type: ignore[union-attr]
    what = ("a NUL character (\\u0000), which no store can hold in text" if found == "\x00"
            else f"a lone UTF-16 surrogate (\\u{ord(found):04x}), which is not Unicode text")
    field = ".".join(path) or "the request body"
    message = f"{'A key' if in_key else 'The text'} holds {what}."
    return Unprocessable(f"Invalid text in {field}: {message}", title="Invalid text",
                      errors=_errors_at(path, message))


def _errors_at(path: list[str], message: str) -> dict[str, Any] | None:
    """``{"a": {"b": [message]}}`` for the path a.b, like the schemas' per-field errors."""
    if not path:
        return None
    errors: Any = [message]
    for name in reversed(path):
        errors = {name: errors}
    return errors


class JSONProvider(DefaultJSONProvider):
    sort_keys = False
    ensure_ascii = False

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        if not kwargs:
            try:
                return orjson.dumps(obj, default=self.default).decode()
            except (TypeError, orjson.JSONEncodeError):
                pass  # e.g. an integer beyond 64 bits: the standard encoder handles it
        kwargs.setdefault("default", self.default)
        kwargs.setdefault("ensure_ascii", False)
        return json.dumps(obj, **kwargs)

    def response(self, *args: Any, **kwargs: Any):
        obj = self._prepare_response_obj(args, kwargs)
        return self._app.response_class(f"{self.dumps(obj)}\n", mimetype=self.mimetype)
