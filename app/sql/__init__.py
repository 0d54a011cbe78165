"""SQL over HTTP: data-source registry, parser gate, read-only execution, result encoding."""

from .dispatch import execute_sql
from .errors import ErrorCode, SqlError
from .execute import fetch_rows
from .sources import data_source_names, init_sources

__all__ = ["ErrorCode", "SqlError", "data_source_names", "execute_sql", "fetch_rows",
           "init_sources"]
