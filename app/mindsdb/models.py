"""CREATE MODEL read into the plain ``TrainingSpec`` the training service takes.

REST sends the statement's text (POST /api/projects/<p>/models {"query": …}); SQL sends the
statement itself. Both end in ``services.training.create_model`` with the same spec.
"""

from __future__ import annotations

from typing import Any

from mindsdb_sql_parser.ast import Constant, Identifier
from mindsdb_sql_parser.ast.mindsdb import CreatePredictor

from ..errors import Unprocessable
from ..rules.names import name_key
from ..services.training import TrainingSpec
from ..sql.errors import SqlError
from .parser import parse_mindsdb, plain

# The largest WINDOW and HORIZON accepted: beyond, a forecast is no forecast any more (and
# the lag features of training would outgrow the rows).
MAX_STEPS = 10_000


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
        if_not_exists=bool(statement.if_not_exists), replace=bool(statement.is_replace),
        timeseries=_timeseries(statement))


def _timeseries(statement: CreatePredictor) -> dict[str, Any] | None:
    """ORDER BY, GROUP BY, WINDOW and HORIZON as plain values (None: a tabular model)."""
    order, group = statement.order_by or [], statement.group_by or []
    window, horizon = statement.window, statement.horizon
    if not order:
        if group or window is not None or horizon is not None:
            raise Unprocessable("GROUP BY, WINDOW and HORIZON make a forecasting model, which "
                                "needs ORDER BY <time column>", title="ORDER BY required")
        return None
    if len(order) != 1 or not isinstance(order[0].field, Identifier):
        raise Unprocessable("ORDER BY of a forecasting model names one column (the time)",
                            title="Invalid ORDER BY")
    names = []
    for item in group:
        if not isinstance(item, Identifier):
            raise Unprocessable(f"GROUP BY of a forecasting model names columns, not "
                                f"{item.to_string()}", title="Invalid GROUP BY")
        names.append(str(item.parts[-1]))
    return {"order": str(order[0].field.parts[-1]), "group": names,
            "window": _steps("WINDOW", window), "horizon": _steps("HORIZON", horizon) or 1}


def _steps(clause: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, Constant):
        value = value.value
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_STEPS:
        raise Unprocessable(f"{clause} must be a whole number of steps from 1 to {MAX_STEPS}, "
                            f"not {value!r}", title=f"Invalid {clause}")
    return value
