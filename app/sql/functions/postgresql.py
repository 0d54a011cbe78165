"""The function policy of PostgreSQL data sources (see ``__init__.py``)."""

from __future__ import annotations

from .base import FunctionPolicy

_PG_DENIED = frozenset({
    "set_config", "pg_terminate_backend", "pg_cancel_backend", "pg_reload_conf",
    "pg_rotate_logfile", "pg_promote", "pg_switch_wal", "pg_create_restore_point",
    "pg_backup_start", "pg_backup_stop", "pg_start_backup", "pg_stop_backup",
    "pg_read_file", "pg_read_binary_file", "pg_stat_file", "pg_file_write", "pg_file_rename",
    "pg_file_unlink", "pg_file_sync", "pg_notify", "pg_logical_emit_message",
    "pg_export_snapshot", "pg_import_system_collations", "pg_log_backend_memory_contexts",
    "pg_drop_replication_slot", "pg_copy_physical_replication_slot",
    "pg_copy_logical_replication_slot", "pg_wal_replay_pause", "pg_wal_replay_resume",
    "nextval", "setval", "txid_current", "pg_current_xact_id",
    "query_to_xml", "query_to_xmlschema", "query_to_xml_and_xmlschema",
    "cursor_to_xml", "cursor_to_xmlschema", "loread", "lowrite",
})


class PostgresPolicy(FunctionPolicy):
    denied = _PG_DENIED
    denied_prefixes = ("pg_advisory_", "pg_try_advisory_", "lo_", "dblink", "pg_ls_",
                       "pg_stat_reset", "pg_create_", "pg_replication_origin_")
