"""MindsDB objects Quarry does not have, and the one sentence that says so.

Without this table, ``mindsdb_sdk``'s ``ml_engines.list()`` (``SHOW ML_ENGINES``) fell
through to the data path and answered with a data source's error. Every
statement and table about one of these objects answers UNSUPPORTED (16), with the sentence
of ``message``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mindsdb_sql_parser.ast import Show
from mindsdb_sql_parser.ast.mindsdb import (
    CreateChatBot,
    CreateMLEngine,
    CreateTrigger,
    DropChatBot,
    DropMLEngine,
    DropTrigger,
    UpdateChatBot,
)

from ..sql.errors import ErrorCode, SqlError


@dataclass(frozen=True)
class Missing:
    word: str                          # MindsDB's plural keyword: SHOW <word>
    keyword: str                       # the singular token of CREATE/DROP <keyword>
    tables: tuple[str, ...]            # p.<table> and information_schema.<table>
    statements: tuple[type, ...]       # mindsdb_sql_parser classes of its statements
    instead: str                       # what to do instead, in one clause


MISSING = (
    Missing("ML_ENGINES", "ML_ENGINE", ("ml_engines",), (CreateMLEngine, DropMLEngine),
            "models are trained with scikit-learn (CREATE MODEL … USING engine = 'sklearn')"),
    Missing("TRIGGERS", "TRIGGER", ("triggers",), (CreateTrigger, DropTrigger),
            "Quarry only reads data sources and does not watch them for changes"),
    Missing("CHATBOTS", "CHATBOT", ("chatbots",), (CreateChatBot, UpdateChatBot, DropChatBot),
            "Quarry keeps agents' settings but runs no chat integrations"),
)
_BY_SHOW = {m.word: m for m in MISSING}
_BY_KEYWORD = {m.keyword: m for m in MISSING}
_BY_TABLE = {t: m for m in MISSING for t in m.tables}
_BY_STATEMENT = {kind: m for m in MISSING for kind in m.statements}
# Leading words of a statement about an object (CREATE OR REPLACE JOB …).
_VERBS = {"CREATE", "DROP", "ALTER", "UPDATE", "EVALUATE"}


def message(missing: Missing) -> str:
    return f"{missing.word} are not supported by Quarry: {missing.instead}"


def _refuse(missing: Missing | None) -> None:
    if missing is not None:
        raise SqlError(ErrorCode.UNSUPPORTED, message(missing))


def refuse_statement(statement: Any) -> None:
    """UNSUPPORTED for CREATE JOB, DROP VIEW, SHOW ML_ENGINES … (a parsed statement)."""
    if isinstance(statement, Show):
        category = " ".join((statement.category or "").upper().split()).replace(" ", "_")
        _refuse(_BY_SHOW.get(category))
    _refuse(_BY_STATEMENT.get(type(statement)))


def refuse_leading(token_types: list[str]) -> None:
    """UNSUPPORTED for a statement the parser could not read but whose first words say what
    it is about (``CREATE JOB j EVERY`` with a typo is still about jobs)."""
    words = [t for t in token_types if t not in ("OR", "REPLACE")]
    if len(words) >= 2 and words[0] in _VERBS:
        _refuse(_BY_KEYWORD.get(words[1]))


def refuse_table(name: str) -> None:
    """UNSUPPORTED for ``p.jobs``, ``information_schema.ml_engines`` …"""
    _refuse(_BY_TABLE.get(name.lower()))


def refusal_for(word: str) -> str:
    """The sentence for one object, e.g. for the REST routes of knowledge bases."""
    return message(_BY_SHOW[word])
