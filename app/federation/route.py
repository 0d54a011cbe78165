"""Where a statement runs: the one entrance to the data path.

Every caller that reads rows — ``POST /api/sql/query`` (``mindsdb/dispatch.py``), a
prediction JOIN, a training query, a view's check, MCP — asks ``route`` once. It parses and
gates the statement (``sql/gate.py``, cached per text) and answers where it runs:

- ``ONE_SOURCE``: one database runs the gated statement as it is, on its read-only
  connection;
- ``ENGINE``: the federation engine runs it (``run.py``): it reads several data sources, or
  a source that has no connection of its own (``DataSource.engine_only``: uploaded files),
  each table a leg.

A statement without a table is ``ONE_SOURCE`` on the registry's constants source.
Nothing else decides this: no caller tests a source's dialect, or catches the gate's
CROSS_SOURCE, to choose the path (tests/test_layers.py keeps it so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..sql.errors import ErrorCode, SqlError
from ..sql.gate import GatedStatement, gate
from ..sql.sources import DataSource, SourceRegistry

ONE_SOURCE = "one source"
ENGINE = "engine"


@dataclass(frozen=True)
class Route:
    path: Literal["one source", "engine"]
    # ONE_SOURCE: the gated statement and the source it runs on (None: no table, the
    # constants source). ENGINE: the one source it names when it names one (files).
    gated: GatedStatement | None
    source: DataSource | None

    @property
    def engine(self) -> bool:
        return self.path == ENGINE


def route(query: str, registry: SourceRegistry, context_db: str | None) -> Route:
    """Where ``query`` runs; SqlError as the gate raises it (a write, a missing source …)."""
    try:
        gated = gate(query, registry, context_db)
    except SqlError as exc:
        if exc.code != ErrorCode.CROSS_SOURCE:
            raise
        return Route(ENGINE, None, None)
    if gated.source is not None and gated.source.engine_only:
        return Route(ENGINE, gated, gated.source)
    return Route(ONE_SOURCE, gated, gated.source)
