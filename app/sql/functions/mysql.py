"""The function policy of MySQL/MariaDB data sources (see ``__init__.py``)."""

from __future__ import annotations

from .base import FunctionPolicy

_MYSQL_DENIED = frozenset({
    "load_file", "get_lock", "release_lock", "release_all_locks", "is_used_lock",
    "master_pos_wait", "source_pos_wait", "master_gtid_wait", "sys_exec", "sys_eval",
    "lastval",
})


class MysqlPolicy(FunctionPolicy):
    denied = _MYSQL_DENIED
