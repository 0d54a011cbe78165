"""The function policy of MariaDB/MySQL data sources: an allow-list of built-ins.

Everything not listed is refused before the statement reaches the server: user-defined
functions (``sys_exec``), stored functions (``fn()``, ``db.fn()``), and the built-ins that
do more than compute a value — locks (``GET_LOCK``, ``RELEASE_LOCK``, ``IS_USED_LOCK``…),
server files (``LOAD_FILE``), replication waits (``MASTER_POS_WAIT``), session values
(``LAST_INSERT_ID(x)``), sequences (``NEXTVAL``, ``SETVAL``, ``LASTVAL``).

``SLEEP`` and ``BENCHMARK`` are allowed: they only spend time, and the statement's time limit
cuts them like any slow query (``execute.py`` makes sure a cut statement is reported as
``TIME_LIMIT``, never as a result).

Names are as sqlglot writes them for MySQL (``allowlist.py``); a few are its spellings
rather than the caller's (``REGEXP_LIKE`` for ``a REGEXP b``).
"""

from __future__ import annotations

from .allowlist import AllowListPolicy

_STRING = """
ascii bin bit_length char char_length character_length chr concat concat_ws elt export_set
field find_in_set format from_base64 hex insert instr lcase left length lengthb locate lower
lpad ltrim make_set mid natural_sort_key octet_length ord position quote regexp_instr
regexp_like regexp_replace regexp_substr repeat replace reverse right rpad rtrim sformat
soundex space strcmp substr substring substring_index to_base64 to_char trim ucase unhex upper
weight_string match extractvalue updatexml
"""
_NUMERIC = """
abs acos asin atan atan2 bit_count ceil ceiling conv cos cot crc32 crc32c degrees exp floor
greatest least ln log log10 log2 mod oct pi pow power radians rand round sign sin sqrt tan
truncate
"""
_DATETIME = """
adddate addtime add_months convert_tz curdate current_date current_time current_timestamp
curtime date date_add date_format date_sub datediff day dayname dayofmonth dayofweek dayofyear
extract from_days from_unixtime get_format hour last_day localtime localtimestamp makedate
maketime microsecond minute month monthname now period_add period_diff quarter sec_to_time
second str_to_date subdate subtime sysdate time time_format time_to_sec timediff timestamp
timestampadd timestampdiff to_days to_seconds unix_timestamp utc_date utc_time utc_timestamp
week weekday weekofyear year yearweek
"""
_JSON = """
json_array json_array_append json_array_insert json_arrayagg json_compact json_contains
json_contains_path json_depth json_detailed json_equals json_exists json_extract json_insert
json_keys json_length json_loose json_merge json_merge_patch json_merge_preserve
json_normalize json_object json_objectagg json_overlaps json_pretty json_query json_quote
json_remove json_replace json_search json_set json_table json_type json_unquote json_valid
json_value
"""
_AGGREGATE_WINDOW = """
avg bit_and bit_or bit_xor count group_concat max min std stddev stddev_pop stddev_samp sum
variance var_pop var_samp
row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value
nth_value median percentile_cont percentile_disc
"""
_CONTROL_CAST = """
if ifnull nullif coalesce nvl nvl2 isnull decode interval exists any all some row cast
convert default
"""
# Hashes, compression, encodings: pure functions of their arguments.
_CRYPTO = """
aes_encrypt aes_decrypt compress uncompress uncompressed_length md5 sha sha1 sha2 encode
random_bytes
"""
# What the session is: harmless to read (the account, the server version, the counters of
# this connection) — plus the two that only spend time, cut by the time limit.
_INFO = """
charset coercibility collation connection_id current_role current_user database schema
found_rows row_count session_user system_user user version uuid uuid_short sys_guid
decode_histogram rownum benchmark sleep
"""
_NETWORK_DYNCOL_SPATIAL = """
inet_aton inet_ntoa inet6_aton inet6_ntoa is_ipv4 is_ipv4_compat is_ipv4_mapped is_ipv6
column_check column_create column_exists column_get column_json column_list
point linestring polygon multipoint multilinestring multipolygon geometrycollection
st_astext st_aswkt st_asbinary st_aswkb st_asgeojson st_geomfromgeojson st_geomfromtext
st_geomfromwkb st_pointfromtext st_x st_y st_srid st_distance st_distance_sphere st_contains
st_within st_intersects st_disjoint st_equals st_touches st_overlaps st_crosses st_area
st_length st_buffer st_centroid st_envelope st_geometrytype st_isvalid st_isempty
st_numpoints st_pointn st_startpoint st_endpoint
mbrcontains mbrwithin mbrintersects mbrdisjoint mbrequals mbroverlaps mbrtouches
"""

MYSQL_FUNCTIONS: frozenset[str] = frozenset(
    " ".join([_STRING, _NUMERIC, _DATETIME, _JSON, _AGGREGATE_WINDOW, _CONTROL_CAST, _CRYPTO,
              _INFO, _NETWORK_DYNCOL_SPATIAL]).split())

_LOCK = "it takes or inspects a user lock, which would outlive the statement"
_REASONS = {
    "get_lock": _LOCK, "release_lock": _LOCK, "release_all_locks": _LOCK,
    "is_free_lock": _LOCK, "is_used_lock": _LOCK,
    "load_file": "it reads files on the database server",
    "master_pos_wait": "it waits for replication", "master_gtid_wait": "it waits for replication",
    "source_pos_wait": "it waits for replication",
    "last_insert_id": "it sets a value of the session",
    "nextval": "it advances a sequence", "setval": "it changes a sequence",
    "lastval": "it reads the session's sequence state",
    "sys_exec": "it runs programs on the database server",
    "sys_eval": "it runs programs on the database server",
}


class MysqlPolicy(AllowListPolicy):
    dialect = "mysql"
    engine = "MariaDB/MySQL"
    allowed = MYSQL_FUNCTIONS
    reasons = _REASONS
