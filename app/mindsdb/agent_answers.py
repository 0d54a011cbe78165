"""``SELECT answer FROM p.agent WHERE question = '…'``: an agent's completion, in SQL.

The completion loop lives in ``app/mcp`` (it runs its statements through this package), so
this module reaches it through the function the factory registers on ``app.extensions``
(``ANSWER_KEY``) rather than an import, which would close a circle.
"""

from __future__ import annotations

import json
from typing import Any

from flask import current_app
from mindsdb_sql_parser.ast import Select

from ..errors import AgentNotFound
from ..services import agents as agent_service
from ..sql.errors import ErrorCode, SqlError
from .context import Context
from .errors import service_errors
from .relation import Relation, run_select
from .statements import Body, equality_row, table_body

ANSWER_KEY = "quarry.agent_answer"
COLUMNS = ["question", "answer", "statements"]


def answer_statement(statement: Select, project: str, name: str, alias: str | None,
                     ctx: Context) -> Body | None:
    """The agent's answer as a one-row table (question, answer, statements as JSON text), or
    None when ``name`` is no agent of ``project``."""
    answer = current_app.extensions[ANSWER_KEY]  # set by create_app (init_completions)
    try:
        agent = agent_service.get_agent(project, name)
    except AgentNotFound:
        return None
    question = equality_row(statement.where).get("question")
    if not isinstance(question, str) or not question.strip():
        raise SqlError(ErrorCode.INVALID_STATEMENT,
                       f"Ask agent {agent['name']} with WHERE question = '<your question>'")
    with service_errors():
        done: Any = answer(project, agent["name"], [{"question": question, "answer": None}])
    relation = Relation.of(COLUMNS, [(question, done.answer, json.dumps(done.statements))],
                           alias or agent["name"])
    columns, rows = run_select(statement, relation, where=False)
    return table_body(columns, rows, ctx)
