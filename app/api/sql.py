"""SQL: POST /api/sql/query, and the running statements (list, cancel)."""

import select
import socket
from collections.abc import Callable

from flask import Response, request, stream_with_context

from ..mindsdb import queries as statements
from ..schemas.sql import CancelledQueryOut, RunningQueryOut, SqlQueryIn, SqlResultOut
from ..security import current_principal
from ..services import queries as service
from ..sql.encode import dumps, sql_response
from ..sql.formats import ACCEPTED, MEDIA_TYPES, sse_single
from .base import Blueprint

blp = Blueprint("sql", __name__, url_prefix="/api/sql", description="Run SQL statements")


@blp.route("/query", methods=["POST"])
@blp.arguments(SqlQueryIn)
@blp.response(200, SqlResultOut)
def run_query(body):
    """Run one SQL statement; the outcome (table, ok or error) is in the body's type."""
    fmt = body["response_format"] or _accepted_format()
    answer = statements.run_query(body["query"], (body["context"] or {}).get("db"),
                                  body["params"], timeout_s=body["timeout_s"],
                                  response_format=fmt, user=_user(),
                                  client_gone=_client_gone())
    if answer.stream is not None:
        return _streamed(answer, fmt)
    return _single(answer, fmt)


@blp.route("/queries", methods=["GET"])
@blp.response(200, RunningQueryOut(many=True))
def list_queries():
    """The statements running now, in every worker and instance."""
    return service.list_queries(_user())


@blp.route("/queries/<query_id:query_id>", methods=["DELETE"])
@blp.response(200, CancelledQueryOut)
@blp.problems(403, 404)
def cancel_query(query_id):
    """Stop a running statement, whichever worker runs it."""
    return service.cancel_query(query_id, _user())


def _user() -> str | None:
    principal = current_principal()
    return principal.user_name if principal is not None else None


def _accepted_format() -> str:
    """The format the Accept header asks for first; json when it names none we have."""
    for value, _quality in request.accept_mimetypes:  # best first
        if value in ACCEPTED:
            return ACCEPTED[value]
    return "json"


def _single(answer: statements.Answer, fmt: str) -> Response:
    """A statement without a table to stream (ok, error, a MindsDB answer): one object,
    as one line or event in a streamed format (JSON for CSV and Arrow, which hold no
    error)."""
    body = {**answer.body, "query_id": answer.query_id}
    if fmt in ("jsonlines", "sse"):
        payload = dumps(body)
        response = Response(sse_single(payload) if fmt == "sse" else payload + b"\n",
                            mimetype=MEDIA_TYPES[fmt])
    else:
        response = sql_response(body)
    response.headers["X-Query-Id"] = answer.query_id
    return response


def _streamed(answer: statements.Answer, fmt: str) -> Response:
    response = Response(stream_with_context(statements.stream_body(answer)),
                        mimetype=MEDIA_TYPES[fmt])
    response.headers["X-Query-Id"] = answer.query_id
    response.headers.update(statements.context_headers(answer))
    # A proxy must pass each batch on as it comes (nginx reads this header).
    response.headers["X-Accel-Buffering"] = "no"
    response.headers["Cache-Control"] = "no-cache"
    return response


def _client_gone() -> Callable[[], bool] | None:
    """Under gunicorn: whether the client has closed its connection (the watcher asks it
    while a stream waits on the database, so a slow statement stops too)."""
    sock = request.environ.get("gunicorn.socket")
    if not isinstance(sock, socket.socket):
        return None

    def gone() -> bool:
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    return gone
