"""GRANT, REVOKE and SHOW GRANTS: rights in SQL, through the same services as REST.

MindsDB's parser has no such statements (its open-source edition has no roles), so they are
read here by a small grammar over sqlglot's tokens — quoting and comments handled by the
tokenizer, never patterns over the raw text:

    GRANT {owner | editor | viewer} ON PROJECT <project> TO <user>
    REVOKE [owner | editor | viewer] ON PROJECT <project> FROM <user>
    GRANT query ON DATABASE <data source> TO <user>
    REVOKE [query] ON DATABASE <data source> FROM <user>
    SHOW GRANTS [FOR <user>]
"""

from __future__ import annotations

from typing import Any

from sqlglot.dialects.mysql import MySQL
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from ..services import access
from ..sql.errors import ErrorCode, SqlError
from .context import Context
from .errors import service_errors
from .statements import ok_body, table_body

GRANT_COLUMNS = ["USER", "KIND", "OBJECT", "RIGHT"]
# Token types a name may come as: a bare word, a quoted identifier or string, or a word
# sqlglot happens to know as a keyword (a project called "data" or "order").
_NAME_TYPES = {TokenType.VAR, TokenType.IDENTIFIER, TokenType.STRING}


def _tokens(query: str) -> list[Token] | None:
    try:
        tokens = MySQL().tokenize(query)
    except TokenError:
        return None
    while tokens and tokens[-1].token_type == TokenType.SEMICOLON:
        tokens.pop()
    return tokens


def _word(token: Token) -> str:
    return token.text.upper() if token.token_type not in (TokenType.IDENTIFIER,
                                                          TokenType.STRING) else ""


def grant_statement(query: str, ctx: Context) -> dict[str, Any] | None:
    """The answer to GRANT / REVOKE / SHOW GRANTS, or None when ``query`` is none of them."""
    lowered = query.lower()
    if "grant" not in lowered and "revoke" not in lowered:
        # Not one of them, whatever its tokens: each needs one of these words. Tokenizing
        # every other statement cost ~0.1 ms of each SELECT's request.
        return None
    tokens = _tokens(query)
    if not tokens:
        return None
    first = _word(tokens[0])
    if first == "SHOW" and len(tokens) > 1 and _word(tokens[1]) == "GRANTS":
        return _show(tokens[2:], ctx)
    if first in ("GRANT", "REVOKE"):
        return _change(first, tokens[1:], ctx)
    return None


def _syntax(message: str) -> SqlError:
    return SqlError(ErrorCode.SYNTAX, message + " (GRANT {owner|editor|viewer} ON PROJECT p TO "
                    "user; GRANT query ON DATABASE d TO user; REVOKE … FROM user; SHOW GRANTS "
                    "[FOR user])")


def _name(token: Token, what: str) -> str:
    if token.token_type in _NAME_TYPES or token.text.isidentifier():
        return token.text
    raise _syntax(f"Expected {what}, found '{token.text}'")


def _show(rest: list[Token], ctx: Context) -> dict[str, Any]:
    user = None
    if rest:
        if len(rest) != 2 or _word(rest[0]) != "FOR":
            raise _syntax("SHOW GRANTS takes nothing or FOR <user>")
        user = _name(rest[1], "a user name")
    with service_errors():
        rows = access.list_grants(user)
    return table_body(GRANT_COLUMNS, rows, ctx)


def _change(verb: str, rest: list[Token], ctx: Context) -> dict[str, Any]:
    # [right] ON {PROJECT|DATABASE} name {TO|FROM} user
    right = None
    if rest and _word(rest[0]) != "ON":
        right, rest = rest[0].text.lower(), rest[1:]
    if verb == "GRANT" and right is None:
        raise _syntax("GRANT needs a right: owner, editor, viewer or query")
    if len(rest) != 5 or _word(rest[0]) != "ON":
        raise _syntax(f"Cannot read this {verb} statement")
    kind = _word(rest[1])
    target = _name(rest[2], "a project or data source name")
    preposition = "TO" if verb == "GRANT" else "FROM"
    if _word(rest[3]) != preposition:
        raise _syntax(f"{verb} … ON {kind} {target} is followed by {preposition} <user>")
    user = _name(rest[4], "a user name")
    with service_errors():
        if kind == "PROJECT":
            if verb == "GRANT":
                access.set_member(target, user, right or "")
            else:
                access.remove_member(target, user)
        elif kind == "DATABASE":
            if right not in (None, "query"):
                raise SqlError(ErrorCode.INVALID_STATEMENT,
                               f"A data source takes only the right 'query', not '{right}'")
            if verb == "GRANT":
                access.grant_source(target, user)
            else:
                access.revoke_source(target, user)
        else:
            raise _syntax(f"Rights are granted ON PROJECT or ON DATABASE, not ON {kind}")
    return ok_body(ctx)
