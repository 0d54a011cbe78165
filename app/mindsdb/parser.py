"""mindsdb_sql_parser, the MindsDB dialect's own parser: loaded here, used by the adapter only.

Its syntax errors are worded as the data path's are (``app/sql/syntax.py``): line, column,
the token, and what was expected. Services never see its tree: ``plain`` turns the values a
statement carries (USING options, skill and agent parameters) into plain Python values.
"""

from __future__ import annotations

import itertools
import pickle
import re
import warnings
from typing import Any

from mindsdb_sql_parser import parse_sql
from mindsdb_sql_parser.ast import Constant, Identifier
from mindsdb_sql_parser.ast.mindsdb import AlterView, CreateView
from sly.lex import LexError

from ..lru import LruCache
from ..sql.errors import ErrorCode, SqlError
from ..sql.syntax import STATEMENT_WORDS, did_you_mean, near_token, syntax_error, unclosed

with warnings.catch_warnings():
    # sly, the parser's generator, opens its LR-table file without closing it when the
    # parser class is built (on first import): load it here, where that is not reported.
    warnings.simplefilter("ignore", ResourceWarning)
    from mindsdb_sql_parser import ErrorHandling
    from mindsdb_sql_parser.lexer import MindsDBLexer
    from mindsdb_sql_parser.parser import MindsDBParser

__all__ = ["mindsdb_leading_tokens", "parse_mindsdb", "parse_sql", "parse_sql_cached", "plain"]

# Query text -> its tree, pickled (b"": the parser refused it). The MindsDB parser is pure
# Python: every statement is read by it first (is it about the service's own objects?), and
# a TPC-H query took it 3-10 ms, a tenth of the statement through Quarry. Unpickling a tree
# takes about 0.05 ms and gives a fresh copy, which the handlers may change at will.
_PARSED: LruCache[str, bytes] = LruCache(512)
_REFUSED = b""


class NotParsed(Exception):
    """``parse_sql_cached``: the MindsDB parser cannot read the query (its error is not
    kept; ``parse_mindsdb`` words it)."""


def parse_sql_cached(query: str) -> Any:
    """``parse_sql(query)``, from this process's cache of recent texts; NotParsed when the
    parser refuses it."""
    known = _PARSED.get(query)
    if known == _REFUSED:
        raise NotParsed
    if known is not None:
        return pickle.loads(known)
    try:
        tree = parse_sql(query)
    except Exception:  # noqa: BLE001 - the parser raises assorted types
        tree = _or_replace_view(query)
        if tree is None:
            _PARSED.put(query, _REFUSED)
            raise NotParsed from None
    try:
        _PARSED.put(query, pickle.dumps(tree, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:  # noqa: BLE001 - a tree that cannot be pickled is just not kept
        pass
    return tree


def _or_replace_view(query: str) -> Any:
    """``CREATE OR REPLACE VIEW p.v [FROM db] AS (…)``, which the MindsDB parser does not
    know, as the ALTER VIEW it knows (which creates the view when there is none, and replaces
    it otherwise); None for any other text, INVALID_STATEMENT with IF NOT EXISTS. The words
    are found by the parser's own lexer, and the rest is read by the parser as CREATE VIEW."""
    try:
        words = list(itertools.islice(MindsDBLexer().tokenize(query), 4))
    except LexError:
        return None
    if [w.type for w in words] != ["CREATE", "OR", "REPLACE", "VIEW"]:
        return None
    try:
        tree = parse_sql(query[:words[1].index] + query[words[3].index:])
    except Exception:  # noqa: BLE001 - the parser raises assorted types
        return None
    if not isinstance(tree, CreateView):
        return None
    if tree.if_not_exists:  # says two things at once: which one was meant is not for us to pick
        raise SqlError(ErrorCode.INVALID_STATEMENT,
                       "CREATE OR REPLACE VIEW replaces a view that exists, IF NOT EXISTS keeps "
                       "it: give one of the two")
    return AlterView(name=tree.name, query_str=tree.query_str, from_table=tree.from_table)


def plain(value: Any) -> Any:
    """A parsed value as plain Python: ``USING engine = sklearn`` (a bare word) → "sklearn"."""
    if isinstance(value, Identifier):
        return ".".join(str(part) for part in value.parts)
    if isinstance(value, Constant):
        return value.value
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


# --- syntax errors in SQL words -------------------------------------------------------------

def parse_mindsdb(query: str) -> Any:
    """The MindsDB statement (mindsdb_sql_parser); SYNTAX in SQL words when it cannot be."""
    text = re.sub(r"[\s;]+$", "", query)  # as parse_sql does: a final ; is not a statement
    lexer, parser = MindsDBLexer(), MindsDBParser()
    try:
        tree = parser.parse(lexer.tokenize(text))
    except LexError as exc:
        raise _lex_error(query, exc) from None
    except RecursionError:
        raise SqlError(ErrorCode.SYNTAX, "The statement is nested too deeply to be read") \
            from None
    except Exception as exc:  # noqa: BLE001 - grammar actions raise their own errors
        raise SqlError(ErrorCode.SYNTAX, f"Syntax error: {exc}") from None
    if tree is not None:
        return tree
    info = getattr(parser, "error_info", None) or {}
    bad = info.get("bad_token")
    reason = _mindsdb_reason(lexer, parser, info)
    if bad is None:
        raise syntax_error(query, None, None, reason)
    raise syntax_error(query, bad.index, str(bad.value), reason)


def _lex_error(query: str, exc: LexError) -> SqlError:
    offset = exc.error_index
    char = query[offset] if offset < len(query) else ""
    if char in "'\"`" and (found := unclosed(query)) is not None:
        offset, why = found
        return syntax_error(query, offset, query[offset:], why)
    return syntax_error(query, offset, char, f"the character '{char}' cannot appear here")


def _mindsdb_reason(lexer: Any, parser: Any, info: dict[str, Any]) -> str:
    bad = info.get("bad_token")
    suggestions: list[str] = []
    try:
        helper = ErrorHandling(lexer, parser)
        helper.tokens = [t for t in info.get("tokens") or [] if t is not None]
        helper.bad_token = bad
        helper.expected_tokens = info.get("expected_tokens") or []
        suggestions = helper.make_suggestion()
    except Exception:  # noqa: BLE001 - a suggestion is a nicety; the position is what counts
        suggestions = []
    words = [_mindsdb_word(s) for s in suggestions]
    if bad is None:
        reason = "the statement ends too early"
    else:
        reason = f"'{near_token(str(bad.value))}' does not fit here"
        if bad.index == 0 and (guess := did_you_mean(str(bad.value), STATEMENT_WORDS)):
            return f"a statement cannot start with '{bad.value}'; did you mean {guess}?"
        guess = did_you_mean(str(bad.value), [w for w in words if w.isupper()])
        if guess is not None:
            return f"{reason}; did you mean {guess}?"
    if len(words) == 1:
        reason += f"; expected {words[0]}"
    elif 1 < len(words) <= 8:
        reason += f"; expected one of: {', '.join(words)}"
    return reason


def _mindsdb_word(suggestion: str) -> str:
    return {"[identifier]": "a name", "[number]": "a number",
            "[string]": "a quoted string"}.get(suggestion, suggestion)


def mindsdb_leading_tokens(query: str, count: int = 4) -> list[str]:
    """The types of the first ``count`` tokens (CREATE, OR, REPLACE, MODEL …) as the MindsDB
    lexer reads them, up to the first character it cannot read."""
    types: list[str] = []
    try:
        for token in MindsDBLexer().tokenize(query):
            types.append(str(token.type))
            if len(types) >= count:
                break
    except LexError:
        pass
    return types
