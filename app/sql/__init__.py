"""The data path: data-source registry, parser gate, read-only execution, result encoding.

It imports nothing above it (services may use it; the MindsDB adapter, ``app/mindsdb``,
sends it the statements that read data sources).
"""

from .errors import ErrorCode, SqlError
from .execute import fetch_rows
from .sources import data_source_names, init_sources

__all__ = ["ErrorCode", "SqlError", "data_source_names", "fetch_rows", "init_sources"]
