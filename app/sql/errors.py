"""The typed error of the data path and its stable error codes (documented in docs/sql.md)."""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    """Stable ``error_code`` values of ``type: error`` answers; never renumber them."""

    SYNTAX = 1               # the text cannot be parsed, or is empty
    MULTIPLE_STATEMENTS = 2  # more than one statement in one request
    READ_ONLY = 3            # not a read statement, or the read-only connection refused it
    FORBIDDEN_FUNCTION = 4   # not on the source's function allow-list (ts_stat, pg_read_file…)
    UNKNOWN_SOURCE = 5       # the statement names a data source that is not configured
    UNKNOWN_TABLE = 6        # the table does not exist in the data source
    CROSS_SOURCE = 7         # one statement reaches tables of two or more data sources
    MISSING_PARAMETER = 8    # a :name placeholder has no value in params (or params is unusable)
    TIME_LIMIT = 9           # the statement ran past its time limit and was cancelled
    SOURCE_DOWN = 10         # the data source cannot be reached
    BUSY = 11                # no free connection to the data source within SQL_POOL_TIMEOUT_S
    TOO_MANY_ROWS = 12       # more rows than a caller allowed (fetch_rows for training)
    RESPONSE_TOO_LARGE = 13  # the encoded answer is over SQL_MAX_RESPONSE_BYTES
    PERMISSION_DENIED = 14   # the data source's account may not do this
    QUERY_FAILED = 15        # any other error the database reported (unknown column, 1/0 …)
    UNSUPPORTED = 16         # a statement this service does not run (yet)
    # Statements about the service's own objects (docs/mindsdb-sql.md):
    NOT_FOUND = 17           # the project, model, skill or agent does not exist
    CONFLICT = 18            # name taken, project not empty or the default, model not trained
    INVALID_STATEMENT = 19   # a value the REST route would refuse with 400 (name, USING …)
    SERVICE_FAILED = 20      # any other error of the service (e.g. the store is down)
    OUT_OF_RANGE = 21        # a number too large for the database (LIMIT 1e25, bigint overflow)
    CANCELLED = 22           # stopped by DELETE /api/sql/queries/<id> or query_cancel(<id>)
    # 23: kept for a later code.
    ACCESS_DENIED = 24       # the caller holds no grant for this (role, project or data source)


class SqlError(Exception):
    """A SQL statement failed; ``code`` is an ``ErrorCode``, ``message`` a human sentence."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message

    def __repr__(self) -> str:
        return f"SqlError({self.code}, {self.message!r})"


def changed_shape(source: str) -> SqlError:
    """A result read otherwise than its kept shape said (``stream.Shape``): its tables
    changed since it was described."""
    return SqlError(ErrorCode.QUERY_FAILED, f"The columns of a statement on {source} "
                                            "changed since it was last described; run it again")


class NativeError(Exception):
    """A failure reported by ADBC, with PostgreSQL's SQLSTATE when it can be told."""

    def __init__(self, sqlstate: str | None, message: str) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
