"""Syntax errors in SQL words: where a statement stopped making sense, and why.

Both parsers describe their failures in their own terms — sqlglot says "Required keyword:
'expression' missing for <class 'sqlglot.expressions.core.Mul'>", mindsdb_sql_parser draws
carets under the text. A newcomer can act on neither. Every syntax error Quarry reports,
from either parser, reads the same way instead:

    Syntax error at line 1, column 1 near 'SELEC': a statement cannot start with 'SELEC';
    did you mean SELECT?

Line and column count from 1 and point at the first character of the token named.
The MindsDB parser's errors are worded with these same helpers in ``app/mindsdb/parser.py``
(``mindsdb_sql_parser`` is the adapter's alone).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from typing import Any

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from .errors import ErrorCode, SqlError

# Words a statement may start with (for "did you mean"); what is refused later is refused
# with its own message, so a typo of CREATE is still worth pointing out.
STATEMENT_WORDS = ("SELECT", "WITH", "VALUES", "SHOW", "DESCRIBE", "CREATE", "DROP",
                    "RETRAIN", "FINETUNE", "EXPLAIN", "TABLE")
# Clause words a typo is most often of (FORM, WHRE, LIMT, ODER …).
_CLAUSE_WORDS = ("SELECT", "FROM", "WHERE", "GROUP", "ORDER", "HAVING", "LIMIT", "OFFSET",
                 "JOIN", "INNER", "LEFT", "RIGHT", "OUTER", "CROSS", "UNION", "EXCEPT",
                 "INTERSECT", "DISTINCT", "BETWEEN", "LIKE", "CASE", "WHEN", "THEN", "ELSE",
                 "END", "VALUES", "WITH", "EXISTS", "NULL", "CAST", "USING", "PREDICT")
# A comma followed by one of these (or by nothing) has no item after it. sqlglot drops
# such a comma silently; the databases refuse the statement, and so does the gate.
_AFTER_COMMA = {TokenType.COMMA, TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.SEMICOLON,
                TokenType.FROM, TokenType.WHERE, TokenType.GROUP_BY, TokenType.ORDER_BY,
                TokenType.HAVING, TokenType.LIMIT, TokenType.UNION, TokenType.EXCEPT,
                TokenType.INTERSECT}
# Words that need something after them, which sqlglot lets go when nothing follows:
# "JOIN u ON" became a cross join, "GROUP BY" at the end was sent as such.
_DANGLING = {TokenType.GROUP_BY: "GROUP BY needs at least one column after it",
             TokenType.ON: "ON needs a join condition after it",
             TokenType.USING: "USING needs a list of columns in parentheses after it"}
_CLAUSE_END = {TokenType.R_PAREN, TokenType.SEMICOLON, TokenType.WHERE, TokenType.GROUP_BY,
               TokenType.ORDER_BY, TokenType.HAVING, TokenType.LIMIT, TokenType.UNION,
               TokenType.EXCEPT, TokenType.INTERSECT, TokenType.JOIN}
# What a sqlglot node that lacks a part means, in SQL words.
_INCOMPLETE = {
    "Where": "WHERE needs a condition after it",
    "Having": "HAVING needs a condition after it",
    "Limit": "LIMIT needs a number after it",
    "Offset": "OFFSET needs a number after it",
    "Fetch": "FETCH needs a number of rows",
    "Between": "BETWEEN needs two values: BETWEEN low AND high",
    "Order": "ORDER BY needs at least one column",
    "Group": "GROUP BY needs at least one column",
    "Join": "JOIN needs a table after it",
    "From": "FROM needs a table after it",
    "Cast": "CAST needs a type: CAST(value AS type)",
    "Case": "CASE needs WHEN … THEN … and END",
    "In": "IN needs a list of values or a subquery in parentheses",
    "Alias": "AS needs a name after it",
}
_REQUIRED = re.compile(r"Required keyword: '\w+' missing for <class '[\w.]+\.(\w+)'>")
_EXPECTED = re.compile(r"Expect(?:ed|ing) (.+?)(?: but got .*)?$", re.S)
_INTERNALS = re.compile(r"<|sqlglot|expressions\.|Expecting|Token|\bNone\b")
_MAX_NEAR = 40


# --------------------------------------------------------------------------- wording


def _position(text: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of ``offset`` in ``text``."""
    offset = max(0, min(offset, len(text)))
    line = text.count("\n", 0, offset) + 1
    return line, offset - text.rfind("\n", 0, offset)


def near_token(token: str) -> str:
    token = token.splitlines()[0] if token.strip() else token
    if len(token) > _MAX_NEAR:
        token = token[:_MAX_NEAR] + "…"
    return token


def syntax_error(text: str, offset: int | None, token: str | None, reason: str) -> SqlError:
    """SYNTAX: "Syntax error at line L, column C near 'token': reason".

    ``offset`` None or past the text means the statement ended too early.
    """
    if offset is None or offset >= len(text.rstrip()):
        line, col = _position(text, len(text.rstrip()))
        where = f"at line {line}, column {col} (the end of the statement)"
    else:
        line, col = _position(text, offset)
        where = f"at line {line}, column {col}"
        if token:
            near = near_token(token)
            # A token that holds a ' (a string) reads better between double quotes.
            where += f' near "{near}"' if "'" in near else f" near '{near}'"
    return SqlError(ErrorCode.SYNTAX, f"Syntax error {where}: {reason}")


def did_you_mean(word: str, choices: Sequence[str]) -> str | None:
    if len(word) < 4 or not word.isalpha():
        return None
    match = difflib.get_close_matches(word.upper(), choices, n=1, cutoff=0.75)
    return match[0] if match and match[0] != word.upper() else None


# ---------------------------------------------------------------------------- sqlglot


def parse_sqlglot(query: str, dialect: str | None) -> list[exp.Expression]:
    """The statements of ``query`` (sqlglot); SYNTAX in SQL words when it cannot be read."""
    glot = Dialect.get_or_raise(dialect or None)
    try:
        tokens = glot.tokenize(query)
    except TokenError:
        raise _unreadable(query) from None
    try:
        statements = glot.parser().parse(tokens, query)
    except ParseError as exc:
        raise _parse_error(query, tokens, exc) from None
    except RecursionError:
        raise SqlError(ErrorCode.SYNTAX, "The statement is nested too deeply to be read") \
            from None
    statements = [s for s in statements if s is not None]
    if statements and _starts_with_a_name(tokens) and not isinstance(statements[0], exp.Command) \
            and did_you_mean(tokens[0].text, STATEMENT_WORDS) is not None:
        # "SELEC a" parses as an expression (a column and its alias), not as a statement.
        raise _bad_start(query, tokens[0])
    _check_dangling(query, tokens)
    return statements


def _starts_with_a_name(tokens: list[Token]) -> bool:
    return bool(tokens) and tokens[0].token_type == TokenType.VAR


def _bad_start(query: str, first: Token) -> SqlError:
    reason = f"a statement cannot start with '{first.text}'"
    if (guess := did_you_mean(first.text, STATEMENT_WORDS)) is not None:
        reason += f"; did you mean {guess}?"
    else:
        reason += " (statements start with SELECT, WITH, SHOW, DESCRIBE, CREATE, DROP …)"
    return syntax_error(query, first.start, first.text, reason)


def _check_dangling(query: str, tokens: list[Token]) -> None:
    """A trailing comma, or GROUP BY / ON / USING with nothing after them: refused where
    they are, as the databases would (sqlglot drops them and changes the statement)."""
    for i, token in enumerate(tokens):
        kind = token.token_type
        if kind != TokenType.COMMA and kind not in _DANGLING:
            continue
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        after = f"'{_text(query, following)}'" if following is not None else \
            "the end of the statement"
        if kind == TokenType.COMMA:
            if following is None or following.token_type in _AFTER_COMMA:
                raise syntax_error(query, token.start, ",",
                                   f"a comma needs an item after it, not {after}; remove "
                                   "the trailing comma")
        elif following is None or following.token_type in _CLAUSE_END:
            raise syntax_error(query, token.start, _text(query, token),
                               f"{_DANGLING[kind]}, not {after}")


def _text(query: str, token: Token) -> str:
    """The token as written (sqlglot's text drops the quotes of strings and names)."""
    return query[token.start:token.end + 1] or token.text


def _error_token(tokens: list[Token], error: dict[str, Any]) -> Token | None:
    """The token sqlglot stopped at: it reports the line and the token's last column."""
    line, col = error.get("line"), error.get("col")
    for token in tokens:
        if token.line == line and token.col == col:
            return token
    return None


def _parse_error(query: str, tokens: list[Token], exc: ParseError) -> SqlError:
    error = exc.errors[0] if exc.errors else {}
    if _starts_with_a_name(tokens):
        return _bad_start(query, tokens[0])
    token = _error_token(tokens, error)
    if token is None:  # no position: say what we can
        return SqlError(ErrorCode.SYNTAX,
                        f"Syntax error: {_reason(error.get('description') or '', None)}")
    index = tokens.index(token)
    reason = _reason(error.get("description") or "", _text(query, token))
    if reason.startswith("')' is missing") and (opened := _unclosed_paren(tokens[:index])):
        line, col = _position(query, opened.start)
        reason += f" (the '(' at line {line}, column {col} is never closed)"
    for earlier in reversed(tokens[max(0, index - 2):index + 1]):
        if earlier.token_type == TokenType.VAR and \
                (guess := did_you_mean(earlier.text, _CLAUSE_WORDS)) is not None:
            if earlier is token:
                reason += f"; did you mean {guess}?"
            else:
                line, col = _position(query, earlier.start)
                reason += (f"; did you mean {guess} instead of '{earlier.text}' "
                           f"(line {line}, column {col})?")
            break
    return syntax_error(query, token.start, _text(query, token), reason)


def _reason(description: str, token: str | None) -> str:
    if (match := _REQUIRED.match(description)) is not None:
        node = match.group(1)
        if node in _INCOMPLETE:
            return _INCOMPLETE[node]
        kind = getattr(exp, node, None)
        if isinstance(kind, type) and issubclass(kind, exp.Binary | exp.Unary):
            return "a value is missing next to an operator here"
        return "the statement is incomplete here"
    if description.startswith("Invalid expression") or description.startswith("Unexpected"):
        return f"'{near_token(token)}' does not fit here" if token is not None else \
            "unexpected text here"
    if (match := _EXPECTED.match(description)) is not None:
        wanted = match.group(1).strip()
        if len(wanted) == 1:
            return f"'{wanted}' is missing here"
        if not _INTERNALS.search(wanted):
            return f"expected {wanted} here"
    if description and not _INTERNALS.search(description):
        return description[0].lower() + description[1:]
    return "the statement stops making sense here"


def _unclosed_paren(tokens: list[Token]) -> Token | None:
    opened: list[Token] = []
    for token in tokens:
        if token.token_type == TokenType.L_PAREN:
            opened.append(token)
        elif token.token_type == TokenType.R_PAREN and opened:
            opened.pop()
    return opened[-1] if opened else None


def _unreadable(query: str) -> SqlError:
    """The tokenizer failed: almost always a quote or comment that is never closed."""
    found = unclosed(query)
    if found is None:
        return SqlError(ErrorCode.SYNTAX, "Syntax error: the statement contains text that "
                                          "cannot be read as SQL")
    offset, what = found
    return syntax_error(query, offset, query[offset:], what)


def unclosed(text: str) -> tuple[int, str] | None:
    """(offset, explanation) of the first string, quoted name or comment never closed."""
    i, size = 0, len(text)
    while i < size:
        char = text[i]
        if text.startswith("--", i):
            end = text.find("\n", i)
            i = size if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                return i, "this comment is never closed (*/ is missing)"
            i = end + 2
        elif char in "'\"`":
            j = i + 1
            while j < size:
                if text[j] == "\\" and char == "'":
                    j += 2
                    continue
                if text[j] == char:
                    if j + 1 < size and text[j + 1] == char:  # a doubled quote
                        j += 2
                        continue
                    break
                j += 1
            if j >= size:
                kind = "string" if char == "'" else "quoted name"
                return i, f"this {kind} is never closed (a closing {char} is missing)"
            i = j + 1
        elif char == "$" and (m := re.match(r"\$(\w*)\$", text[i:])):
            end = text.find(m.group(0), i + len(m.group(0)))
            if end < 0:
                return i, f"this dollar-quoted string is never closed ({m.group(0)} is missing)"
            i = end + len(m.group(0))
        else:
            i += 1
    return None
