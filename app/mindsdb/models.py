"""CREATE MODEL read into the plain ``TrainingSpec`` the training service takes.

REST sends the statement's text (POST /api/projects/<p>/models {"query": …}); SQL sends the
statement itself. Both end in ``services.training.create_model`` with the same spec.
"""

from __future__ import annotations

from mindsdb_sql_parser.ast.mindsdb import CreatePredictor

from ..errors import Unprocessable
from ..rules.names import name_key
from ..services.training import TrainingSpec
from ..sql.errors import SqlError
from .parser import parse_mindsdb, plain

_TIME_SERIES_CLAUSES = ("order_by", "group_by", "window", "horizon")


def parse_create_model(query: str, project: str) -> TrainingSpec:
    """The spec of a CREATE MODEL statement's text, for ``project`` (REST's path).

    Text that is not a CREATE MODEL the service can train is 422, not 400: the request has
    the documented shape (a string that is not blank); its content is what is refused."""
    if not isinstance(query, str) or not query.strip():
        raise Unprocessable('Missing "query": a CREATE MODEL statement', title="Query required")
    try:
        statement = parse_mindsdb(query)
    except SqlError as exc:  # a syntax error in SQL words: line, column, token
        raise Unprocessable(f"The CREATE MODEL statement cannot be read: {exc.message}",
                            title="Invalid query string") from None
    if not isinstance(statement, CreatePredictor):
        raise Unprocessable(f"SQL statement is not a CREATE MODEL statement: {query}",
                            title="Invalid CREATE SQL statement")
    return training_spec(statement, project)


def training_spec(statement: CreatePredictor, project: str) -> TrainingSpec:
    """The spec of a parsed CREATE MODEL; a bare model name goes into ``project``. The SQL
    endpoint reports its refusals (Unprocessable) as INVALID_STATEMENT."""
    parts = [str(p) for p in statement.name.parts]
    if len(parts) > 2:
        raise Unprocessable(f"Model name '{'.'.join(parts)}' has too many parts: use "
                            "project.model or model", title="Invalid model name")
    if len(parts) == 2 and name_key(parts[0]) != name_key(project):
        raise Unprocessable(f"The statement creates a model in project '{parts[0]}' but the "
                            f"request is for project '{project}'", title="Project mismatch")
    targets = statement.targets or []
    if len(targets) != 1:
        raise Unprocessable("PREDICT must name exactly one column", title="Invalid PREDICT")
    if any(getattr(statement, clause, None) for clause in _TIME_SERIES_CLAUSES):
        raise Unprocessable("Time-series models (ORDER BY, GROUP BY, WINDOW, HORIZON) are not "
                            "supported", title="Unsupported CREATE MODEL clause")
    if not statement.query_str:
        raise Unprocessable("CREATE MODEL needs the training data: "
                            "CREATE MODEL p.m FROM <data source> (SELECT …) PREDICT <column>",
                            title="Training data missing")
    source = statement.integration_name
    return TrainingSpec(
        project=parts[0] if len(parts) == 2 else project, name=parts[-1],
        target=str(targets[0].parts[-1]), query=statement.query_str,
        source=str(source.parts[-1]) if source is not None else None,
        using={str(k).lower(): plain(v) for k, v in (statement.using or {}).items()},
        if_not_exists=bool(statement.if_not_exists), replace=bool(statement.is_replace))
