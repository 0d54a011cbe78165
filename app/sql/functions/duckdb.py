"""The function policy of the federation engine (DuckDB): an allow-list of built-ins.

The engine runs the part of a federated statement that no single source runs (joins across
sources, aggregates, functions), and every statement over uploaded files. Its external
access is off and its configuration locked (``federation/engine.py``), but a statement could
still read what the engine knows about itself: ``current_setting('temp_directory')`` answered
the spill directory's path, and ``version()``, ``getenv``, ``duckdb_settings()``,
``pragma_*``, ``read_text``/``glob`` (files), ``query()`` (SQL text of its own) are there too.
So only the plain scalar, aggregate and window functions below may be called; any other name
— a function nobody listed, one a later DuckDB adds — is refused before anything runs.
"""

from __future__ import annotations

from .allowlist import AllowListPolicy

_TEXT = """
ascii bar base64 bit_length char_length character_length chr concat concat_ws contains
damerau_levenshtein ends_with format format_bytes from_base64 from_hex hamming hex ilike_escape
instr jaccard jaro_similarity jaro_winkler_similarity lcase left len length levenshtein
like_escape lower lpad ltrim md5 mismatches nfc_normalize not_ilike_escape not_like_escape
octet_length ord position prefix printf regexp_escape regexp_extract regexp_extract_all
regexp_full_match regexp_matches regexp_replace regexp_split_to_array repeat replace reverse
right rpad rtrim sha1 sha256 split split_part starts_with str_split str_split_regex strip_accents
string_split string_split_regex string_to_array strlen strpos substr substring suffix to_base64
to_hex translate trim ucase unhex unicode upper url_decode url_encode editdist3 hash
"""
_NUMBERS = """
abs acos acosh asin asinh atan atan2 atanh bit_count cbrt ceil ceiling cos cosh cot degrees
divide even exp factorial fdiv floor fmod gamma gcd greatest greatest_common_divisor isfinite
isinf isnan lcm least least_common_multiple lgamma ln log log10 log2 mod multiply nextafter pi
pow power radians random round round_even roundbankers sign signbit sin sinh sqrt subtract tan
tanh trunc xor add gen_random_uuid uuid uuidv4 uuidv7
"""
_TIME = """
age century current_date current_localtime current_localtimestamp current_time
current_timestamp date_add date_diff date_part date_sub date_trunc datediff datepart datesub
datetrunc day dayname dayofmonth dayofweek dayofyear days_in_month decade epoch epoch_ms
epoch_ns epoch_us era extract get_current_time get_current_timestamp hour isodow isoyear
julian last_day make_date make_time make_timestamp make_timestamp_ms make_timestamp_ns
make_timestamptz microsecond millennium millisecond minute month monthname nanosecond now
normalized_interval quarter second strftime strptime time_bucket timezone timezone_hour
timezone_minute to_centuries to_days to_decades to_hours to_microseconds to_millennia
to_milliseconds to_minutes to_months to_quarters to_seconds to_timestamp to_weeks to_years
today try_strptime week weekday weekofyear year yearweek
"""
_CONDITIONS = "coalesce ifnull nullif if iff cast try_cast typeof exists any all"
_AGGREGATES = """
any_value approx_count_distinct approx_quantile arbitrary arg_max arg_min argmax argmin
array_agg avg bit_and bit_or bit_xor bool_and bool_or corr count count_if count_star countif
covar_pop covar_samp entropy favg first fsum geomean geometric_mean group_concat histogram
kahan_sum kurtosis kurtosis_pop last list listagg mad max max_by mean median min min_by mode
product quantile quantile_cont quantile_disc percentile_cont percentile_disc regr_avgx
regr_avgy regr_count regr_intercept regr_r2 regr_slope regr_sxx regr_sxy regr_syy sem
skewness stddev stddev_pop stddev_samp string_agg sum sumkahan var_pop var_samp variance
weighted_avg wavg
"""
_WINDOWS = """
row_number rank dense_rank rank_dense percent_rank cume_dist ntile lag lead first_value
last_value nth_value
"""
_LISTS_JSON = """
array_contains array_extract array_length array_slice array_to_string cardinality
element_at flatten len list_aggregate list_concat list_contains list_distinct list_element
list_extract list_has list_position list_reverse list_slice list_sort list_unique list_value
map map_extract map_keys map_values row struct_extract struct_pack unnest
json json_array json_array_length json_contains json_exists json_extract
json_extract_path json_extract_path_text json_extract_string json_group_array
json_group_object json_keys json_object json_quote json_type json_valid json_value to_json
"""

DUCKDB_FUNCTIONS: frozenset[str] = frozenset(
    " ".join([_TEXT, _NUMBERS, _TIME, _CONDITIONS, _AGGREGATES, _WINDOWS, _LISTS_JSON]).split())

_SETTINGS = "it reads the federation engine's settings"
_FILES = "it reads files"
_ENGINE = "it reads the federation engine's own state"
_SQL = "it runs SQL of its own, which the gate cannot check"
_REASONS = {
    "current_setting": _SETTINGS, "getvariable": _SETTINGS, "duckdb_settings": _SETTINGS,
    "getenv": "it reads the server's environment",
    "version": _ENGINE, "pragma_version": _ENGINE, "pragma_platform": _ENGINE,
    "pragma_user_agent": _ENGINE, "pragma_database_size": _ENGINE,
    "pragma_storage_info": _ENGINE, "pragma_metadata_info": _ENGINE,
    "pragma_table_info": _ENGINE, "pragma_show": _ENGINE, "pragma_collations": _ENGINE,
    "duckdb_extensions": _ENGINE, "duckdb_temporary_files": _ENGINE,
    "duckdb_databases": _ENGINE, "duckdb_memory": _ENGINE, "duckdb_secrets": _ENGINE,
    "duckdb_functions": _ENGINE, "duckdb_tables": _ENGINE, "duckdb_columns": _ENGINE,
    "current_database": _ENGINE, "current_schema": _ENGINE, "current_schemas": _ENGINE,
    "current_catalog": _ENGINE, "current_query": _ENGINE, "stats": _ENGINE,
    "read_text": _FILES, "read_blob": _FILES, "read_csv": _FILES, "read_csv_auto": _FILES,
    "read_json": _FILES, "read_json_auto": _FILES, "read_parquet": _FILES,
    "parquet_scan": _FILES, "read_ndjson": _FILES, "sniff_csv": _FILES,
    "glob": "it lists files",
    "query": _SQL, "query_table": _SQL, "json_execute_serialized_sql": _SQL,
    "setseed": "it changes the engine's state", "nextval": "it changes a sequence",
    "write_log": "it writes to the engine's log",
}


class DuckDbPolicy(AllowListPolicy):
    dialect = "duckdb"
    engine = "the federation engine"
    allowed = DUCKDB_FUNCTIONS
    reasons = _REASONS
    docs = "docs/federation.md"

    @property
    def scope(self) -> str:
        return "the federation engine (statements over several data sources or files)"
