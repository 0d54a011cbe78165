"""One statement of POST /api/sql/query, run with its query id: a single answer, or a stream.

The statement is registered with the running statements (``services/queries.py``) while it
runs, so that it can be listed and cancelled from any worker; ``SELECT query_cancel('<id>')``
(MindsDB's function) cancels one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import NotFound
from ..rules.names import DEFAULT_PROJECT
from ..services.queries import cancel_query, new_query_id, running
from ..sql.errors import ErrorCode, SqlError
from ..sql.formats import arrow_stream, csv_stream, jsonlines, sse
from ..sql.running import Statement
from ..sql.stream import TableStream
from .dispatch import account_stream, error_body, execute_sql, record_stream_start
from .masking import mask_statement

# SELECT query_cancel('<id>') (MindsDB's function), alone in its statement.
_CANCEL_CALL = re.compile(r"\s*select\s+query_cancel\s*\(\s*(['\"]?)([A-Za-z0-9_-]{1,64})\1"
                          r"\s*\)\s*;?\s*", re.IGNORECASE)



class Answer:
    """What POST /api/sql/query answers: a single body, or an open stream."""

    def __init__(self, statement: Statement, body: dict[str, Any] | None = None,
                 stream: TableStream | None = None, context: dict[str, Any] | None = None,
                 query: str = "", record_id: int | None = None) -> None:
        self.statement = statement
        self.record_id = record_id  # a stream's audit record, completed as it ends
        self.query = query  # as the caller wrote it, masked (the statement keeps the gated text)
        self.body = body
        self.stream = stream
        self.context = context or {}

    @property
    def query_id(self) -> str:
        return self.statement.id


def run_query(query: str, context_db: str | None, params: dict[str, Any] | None, *,
              timeout_s: float | None, response_format: str, user: str | None,
              client_gone: Callable[[], bool] | None = None) -> Answer:
    """Run one statement; a streamed format gets an open stream for a table result."""
    masked = mask_statement(query)  # what is kept and shown of it: never a secret in clear
    statement = Statement(new_query_id(), sql=masked.text, response_format=response_format,
                          user=user, streamed=response_format != "json")
    statement.client_gone = client_gone
    if (call := _CANCEL_CALL.fullmatch(query)) is not None:
        return Answer(statement, _cancel_statement(call.group(2), context_db, user))
    registry = running()
    registry.begin(statement)
    streamed = False
    try:
        result = execute_sql(query, context_db, params, timeout_s=timeout_s,
                             statement=statement, stream=statement.streamed, masked=masked)
        if isinstance(result, TableStream):
            try:
                record_id = record_stream_start(masked.text, result)
            except BaseException:
                result.close()  # no record, no stream
                raise
            registry.register(statement)
            streamed = True
            return Answer(statement, stream=result,
                          context={"db": result.source.name or context_db or DEFAULT_PROJECT,
                                   **result.context},
                          query=masked.text, record_id=record_id)
        return Answer(statement, result)
    finally:
        if not streamed:
            registry.end(statement)


def _cancel_statement(query_id: str, context_db: str | None, user: str | None
                      ) -> dict[str, Any]:
    db_name = context_db or DEFAULT_PROJECT
    try:
        cancel_query(query_id, user)
    except NotFound as exc:
        return error_body(SqlError(ErrorCode.NOT_FOUND, exc.detail), db_name)
    return {"type": "ok", "column_names": [], "context": {"db": db_name}}


def context_headers(answer: Answer) -> dict[str, str]:
    """A streamed answer's context beside its database, as HTTP headers (the only place
    CSV has for it): ``X-Quarry-Engine``, ``X-Quarry-Engine-Note``. Header values are
    Latin-1 on one line; a character beyond is sent as ``?``."""
    headers = {}
    for key, header in (("engine", "X-Quarry-Engine"), ("engine_note", "X-Quarry-Engine-Note")):
        value = answer.context.get(key)
        if value:
            text = " ".join(str(value).split())
            headers[header] = text.encode("latin-1", "replace").decode("latin-1")
    return headers


def stream_body(answer: Answer) -> Iterator[bytes]:
    """The bytes of a streamed answer; the statement ends (and is forgotten) with it, also
    when the client goes away and the server closes this iterator."""
    stream = answer.stream
    assert stream is not None
    fmt = answer.statement.response_format
    header = {"type": "table", "column_names": stream.columns, "context": answer.context,
              "query_id": answer.query_id}
    try:
        if fmt == "jsonlines":
            yield from jsonlines(stream, header)
        elif fmt == "sse":
            yield from sse(stream, header)
        elif fmt == "csv":
            yield from csv_stream(stream)
        else:  # the schema's metadata holds what the context says beside the database
            yield from arrow_stream(stream, {"query_id": answer.query_id, **stream.context})
    finally:
        try:
            stream.close()
        finally:
            running().end(answer.statement)
            assert answer.record_id is not None
            account_stream(answer.query, stream, answer.context.get("db"), answer.record_id)
