"""The function policy of SQLite data sources: an allow-list of built-ins.

The same list is enforced twice: by the gate (a clear ``FORBIDDEN_FUNCTION`` naming the
function before anything runs) and by the connection's authorizer (``sources.py``), which
SQLite asks about every function a statement calls — also those the parser cannot see, such
as ``like()`` behind ``LIKE``. Everything else is refused: ``load_extension``,
``fts3_tokenizer`` (takes a pointer), the CLI's ``readfile``/``writefile``/``edit``,
``sqlite_log`` (writes to the error log), the FTS/R-Tree internals, and any function an
application registered on the connection. Table-valued functions (``json_each``,
``pragma_table_info``) are not available either: their virtual tables need more than the
read-only authorizer allows.

``randomblob``, ``zeroblob``, ``printf`` and ``replace`` could build huge values; the
connection's ``SQLITE_LIMIT_LENGTH`` (the response size limit) stops them inside SQLite.
"""

from __future__ import annotations

from .allowlist import AllowListPolicy

# From PRAGMA function_list of SQLite 3.40 (with the math functions), plus the built-ins that
# later versions added (concat, unhex, string_agg, jsonb_*, …) so an upgrade keeps them.
_CORE = """
abs changes char coalesce concat concat_ws format glob hex if ifnull iif instr
last_insert_rowid length like likelihood likely lower ltrim max min nullif octet_length
printf quote random randomblob replace round rtrim sign soundex sqlite_compileoption_get
sqlite_compileoption_used sqlite_source_id sqlite_version substr substring subtype
total_changes trim typeof unhex unicode unistr unistr_quote unlikely upper zeroblob
"""
_MATH = """
acos acosh asin asinh atan atan2 atanh ceil ceiling cos cosh degrees exp floor ln log log10
log2 mod pi pow power radians sin sinh sqrt tan tanh trunc
"""
_DATETIME = """
date time datetime julianday unixepoch strftime timediff current_date current_time
current_timestamp
"""
_AGGREGATE_WINDOW = """
avg count group_concat string_agg sum total median percentile percentile_cont
percentile_disc
row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value
nth_value
"""
_JSON = """
-> ->> json json_array json_array_length json_error_position json_extract json_insert
json_object json_patch json_pretty json_quote json_remove json_replace json_set json_type
json_valid json_group_array json_group_object json_array_insert
jsonb jsonb_array jsonb_extract jsonb_insert jsonb_object jsonb_patch jsonb_remove
jsonb_replace jsonb_set jsonb_group_array jsonb_group_object jsonb_array_insert
"""

SQLITE_FUNCTIONS: frozenset[str] = frozenset(
    " ".join([_CORE, _MATH, _DATETIME, _AGGREGATE_WINDOW, _JSON]).split())

# What the gate also lets through: calls the parser sees that SQLite runs as syntax rather
# than as a function call (the authorizer never hears of them).
_SYNTAX = frozenset({"cast", "exists", "any", "all"})

_REASONS = {
    "load_extension": "it loads native code into the server process",
    "fts3_tokenizer": "it registers native code",
    "readfile": "it reads files", "writefile": "it writes files", "edit": "it runs an editor",
    "sqlite_log": "it writes to the error log",
    "json_each": "table-valued functions are not available on read-only SQLite sources",
    "json_tree": "table-valued functions are not available on read-only SQLite sources",
}


class SqlitePolicy(AllowListPolicy):
    dialect = "sqlite"
    engine = "SQLite"
    allowed = SQLITE_FUNCTIONS | _SYNTAX
    reasons = _REASONS
