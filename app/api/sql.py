"""SQL: POST /api/sql/query."""

from ..mindsdb.dispatch import execute_sql
from ..schemas.sql import SqlQueryIn, SqlResultOut
from ..sql.encode import sql_response
from .base import Blueprint

blp = Blueprint("sql", __name__, url_prefix="/api/sql", description="Run SQL statements")


@blp.route("/query", methods=["POST"])
@blp.arguments(SqlQueryIn)
@blp.response(200, SqlResultOut)
def run_query(body):
    """Run one SQL statement; the outcome (table, ok or error) is in the body's type."""
    context = body["context"] or {}
    return sql_response(execute_sql(body["query"], context.get("db"), body["params"],
                                    timeout_s=body["timeout_s"]))
