"""Every setting, with its default and one line of meaning.

Settings are read from environment variables named ``QUARRY_<NAME>`` when the app is
created (never at import time), then overridden by the mapping given to ``create_app``.
The README's settings table is generated from the same list (``flask settings``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

VERSION = "0.1.0"  # app.__version__, and the version /api/status and the OpenAPI document show


@dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    kind: type | str
    doc: str


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError(f"not a boolean: {text!r}")


SETTINGS: list[Setting] = [
    Setting("DATABASE_URL", None, str,
            "SQLAlchemy URL of the metadata store; default: SQLite file quarry.db in the "
            "instance folder. PostgreSQL: postgresql+psycopg://user:pass@host/db"),
    Setting("SECRET_KEY", None, str,
            "Key that signs session cookies; required when AUTH_REQUIRED is on "
            "(default: a random key per process)"),
    Setting("MAX_BODY_BYTES", 1024 * 1024, int,
            "Largest request body accepted, in bytes, except on the data routes below; "
            "larger bodies get 413"),
    Setting("MAX_DATA_BODY_BYTES", 16 * 1024 * 1024, int,
            "Largest request body of the routes that carry data rows (POST /api/sql/query, "
            "POST …/models/<m>/predict), in bytes; larger bodies get 413"),
    Setting("PARAMS_MAX_BYTES", 64 * 1024, int,
            "Largest params of a skill or an agent, in bytes of its JSON encoding (UTF-8); "
            "larger params get 413"),
    Setting("MAX_JSON_DEPTH", 64, int,
            "Deepest nesting of arrays and objects accepted in a request body (1-256); "
            "deeper bodies get 400, deeper uploaded JSON files 422"),
    Setting("INSTANCE_PATH", None, str,
            "Folder for the SQLite store and the demo database (default: ./instance)"),
    Setting("DATA_SOURCES", {}, "json",
            'Data sources as JSON: {"name": "sqlalchemy-url"} or '
            '{"name": {"url": ..., "timeout_s": ..., "max_rows": ..., '
            '"privileged_role": "warn" or "refuse", "allow_functions": [...]}} (docs/sql.md)'),
    Setting("DEMO_SOURCE", True, bool,
            "Serve the embedded SQLite demo data source named demo"),
    Setting("DEMO_PATH", None, str,
            "File of the demo SQLite database (default: demo.db in the instance folder); "
            "built at start when missing"),
    Setting("ENCRYPTION_KEY", None, str,
            "Fernet keys (comma-separated, newest first) that encrypt the passwords of the "
            "databases created at run time and the API keys of agents and skills. Unset "
            "with the embedded store (no DATABASE_URL): a key made on first start and kept "
            "in the instance folder (encryption.key, mode 0600). Unset with another store: "
            "a database with a password, or an agent with an API key, is refused. Make one: "
            "python -c 'from cryptography.fernet import Fernet; "
            "print(Fernet.generate_key().decode())'"),
    Setting("SQLITE_ROOTS", None, str,
            "Folders (separated by ':') whose SQLite files CREATE DATABASE … ENGINE = "
            "'sqlite' may open (default: the instance folder only); the metadata store "
            "never"),
    Setting("SQL_TIMEOUT_S", 30.0, float,
            "Time limit of one SQL statement, in seconds (a request may lower it)"),
    Setting("SQL_MAX_ROWS", 100_000, int,
            "Most rows a query returns; beyond it the answer says truncated: true"),
    Setting("SQL_MAX_RESPONSE_BYTES", 64 * 1024 * 1024, int,
            "Largest encoded result of one query, in bytes"),
    Setting("SQL_STREAM_MAX_ROWS", 10_000_000, int,
            "Most rows a streamed answer (response_format jsonlines, sse, csv, arrow) "
            "sends; 0: no limit"),
    Setting("MCP_MAX_ROWS", 1000, int,
            "Most rows an MCP tool result (and an agent's tool call) carries; more are cut "
            "and flagged truncated"),
    Setting("LLM_BASE_URL", "", str,
            "OpenAI-compatible endpoint (…/v1) of agents that name none of their own, e.g. "
            "Ollama's http://localhost:11434/v1"),
    Setting("LLM_MODEL", "", str, "Model name sent to LLM_BASE_URL"),
    Setting("LLM_API_KEY", "", str, "Bearer key sent to LLM_BASE_URL (empty: none)"),
    Setting("AGENT_MAX_STEPS", 8, int,
            "Most model calls one agent completion makes (each may run tools)"),
    Setting("AGENT_TIMEOUT_S", 120.0, float,
            "Time limit of one agent completion, model calls and statements together"),
    Setting("SQL_STREAM_TIMEOUT_S", 600.0, float,
            "Time limit of a streamed statement, for the whole stream, in seconds (a request "
            "may lower it)"),
    Setting("FEDERATION_MEMORY", 1024 * 1024 * 1024, int,
            "Memory limit in bytes of the engine (DuckDB) that joins the rows of a statement "
            "over several data sources; beyond it the engine spills to FEDERATION_TEMP"),
    Setting("FEDERATION_TEMP", None, str,
            "Folder the federation engine spills to past its memory limit (default: "
            "federation-spill in the instance folder)"),
    Setting("FEDERATION_MAX_LEG_ROWS", 50_000_000, int,
            "Most rows one data source may send to a statement over several data sources; "
            "beyond it the statement fails (never a silently cut input)"),
    Setting("FEDERATION_DYNAMIC_KEYS", 50_000, int,
            "Most distinct join keys of a small leg sent to a larger leg's data source as "
            "a dynamic filter (key IN (…)); beyond them integer keys go as a range; 0: off"),
    Setting("FEDERATION_CATALOG_TTL_S", 10.0, float,
            "Seconds a process keeps what a data source said of a table (its columns) and of "
            "a leg (its row estimate) for the next statements over several data sources; "
            "0: ask every time"),
    Setting("FEDERATION_THREADS", 2, int,
            "Threads of the federation engine (DuckDB) per process"),
    Setting("FEDERATION_PRELOAD", True, bool,
            "gunicorn master loads the federation engine (DuckDB) before forking when "
            "there are two data sources or more, or an uploaded file: workers share it, "
            "and no first statement over several sources pays the load"),
    Setting("FEDERATION_ENGINE", "duckdb", str,
            "Engine that joins a statement over several data sources: duckdb (in the "
            "worker), spark (the Spark Connect server SPARK_REMOTE), or auto (spark when "
            "the legs' estimated rows reach SPARK_MIN_ROWS)"),
    Setting("SPARK_REMOTE", None, str,
            "Spark Connect address of the Spark cluster federated statements run on, "
            "e.g. sc://spark-host:15002 (needed for FEDERATION_ENGINE spark or auto)"),
    Setting("SPARK_MIN_ROWS", 5_000_000, int,
            "With FEDERATION_ENGINE auto: a statement goes to Spark when the rows its "
            "sources estimate for its legs add up to at least this many"),
    Setting("SPARK_LOCAL_MAX_BYTES", 256 * 1024 * 1024, int,
            "Most bytes (in Arrow) of the legs Spark cannot read itself (SQLite, uploaded "
            "files), read by Quarry and handed to the Spark session; beyond, the statement "
            "fails (TOO_MANY_ROWS)"),
    Setting("SPARK_CONNECT_TIMEOUT_S", 5.0, float,
            "Seconds to wait for the Spark Connect server before a statement answers 503"),
    Setting("SPARK_PARTITION_ROWS", 1_000_000, int,
            "A leg Spark reads over JDBC whose source estimates more rows than this is read "
            "in parallel, in ranges of its table's integer primary key of about this many "
            "rows each (0: never)"),
    Setting("SPARK_MAX_PARTITIONS", 16, int,
            "Most parallel JDBC reads (ranges) of one leg on Spark"),
    Setting("FILES_DIR", None, str,
            "Folder holding uploaded files as Parquet (default: files in the instance "
            "folder); share it between instances that share a store"),
    Setting("FILES_MAX_BYTES", 1024 * 1024 * 1024, int,
            "Largest file upload in bytes (PUT /api/files/<name>); beyond it 413"),
    Setting("FILES_TIMEOUT_S", 300.0, float,
            "Time limit of converting one uploaded file to Parquet, in seconds (after its "
            "body arrived); beyond it 413"),
    Setting("FILES_URL_ALLOW", "", str,
            "Comma-separated hosts an upload with source_type=url may name (default: none)"),
    Setting("KB_DIR", None, str,
            "Folder of the knowledge bases' index file, knowledge_bases.db, and of the "
            "embedded model's int8 copy, made at its first load (default: kb in the "
            "instance folder); share it between instances that share a store"),
    Setting("KB_MODEL_DIR", None, str,
            "Folder of the embedded model's int8 copy alone (default: KB_DIR); instances on "
            "one machine may share it, to make the copy once"),
    Setting("KB_INSERT_MAX_ROWS", 100_000, int,
            "Most rows one INSERT INTO a knowledge base (or PUT …/knowledge_bases/<kb>) "
            "may add; more rows given are refused, a SELECT that returns more stops there"),
    Setting("KB_VECTOR_CACHE", 8, int,
            "Knowledge bases whose vectors a worker keeps in memory for search (the least "
            "recently searched goes first; 100 000 chunks of 384 dimensions take 150-300 "
            "MB)"),
    Setting("KB_EXACT_CHUNKS", 20_000, int,
            "Up to this many chunks a search by meaning compares the question with every "
            "vector; beyond, one bit per dimension (faiss IndexLSH) picks "
            "KB_RERANK_CANDIDATES chunks ranked exactly"),
    Setting("KB_RERANK_CANDIDATES", 1000, int,
            "Chunks a search among more than KB_EXACT_CHUNKS picks by the Hamming distance "
            "of those bits and ranks exactly (more: better recall, slower)"),
    Setting("KB_INSERT_BATCH_ROWS", 64, int,
            "Rows of an insert into a knowledge base read, embedded and written at a time, "
            "each batch in its own transaction"),
    Setting("KB_INSERT_TIMEOUT_S", 3600.0, float,
            "Time limit of one INSERT … SELECT into a knowledge base, in seconds: its rows "
            "are read while they are embedded"),
    Setting("KB_STORES", {}, "json",
            'Vector stores a knowledge base may be kept in (storage = <name>), as JSON: '
            '{"name": "postgresql://user:pass@host/db"}, each a PostgreSQL with pgvector '
            "that Quarry owns; the name quarry also means Quarry's own store when it is "
            "PostgreSQL with pgvector (default: none, knowledge bases stay in KB_DIR)"),
    Setting("KB_STORE_CONNECT_TIMEOUT_S", 5.0, float,
            "Seconds to wait for a vector store (KB_STORES) before a request answers 503"),
    Setting("KB_STORE_EXACT_CHUNKS", 2000, int,
            "A search by meaning in a vector store (KB_STORES) whose filters at most this "
            "many chunks pass ranks them all exactly instead of walking the HNSW index "
            "(0: never)"),
    Setting("KB_HNSW_EF_SEARCH", 200, int,
            "Candidates a search by meaning in a vector store (KB_STORES) keeps while it "
            "walks the HNSW graph (pgvector's hnsw.ef_search; more: better recall, slower; "
            "at most 1000)"),
    Setting("EMBEDDING_ENDPOINTS", "", str,
            "Comma-separated base URLs of OpenAI-compatible embedding (and rerank) endpoints "
            "a knowledge base may name (embedding_model or reranking_model base_url, e.g. "
            "http://ollama:11434/v1), besides LLM_BASE_URL; any other is refused "
            "(default: none)"),
    Setting("EMBEDDING_TIMEOUT_S", 60.0, float,
            "Time limit of one request to an embedding or rerank endpoint, in seconds"),
    Setting("SQL_POOL_SIZE", 4, int,
            "Connections kept open per data source and process"),
    Setting("SQL_POOL_TIMEOUT_S", 5.0, float,
            "Longest wait for a free data-source connection before answering busy"),
    Setting("TRAINING_WORKERS", 1, int,
            "Models trained at the same time per process"),
    Setting("TRAINING_MAX_ROWS", 1_000_000, int,
            "Most rows read from the source query to train a model"),
    Setting("PRELOAD_ML", True, bool,
            "gunicorn master loads scikit-learn and the active models before forking (when "
            "the store holds one): workers share them, and no first predict pays the load"),
    Setting("TRAINING_MAX_ATTEMPTS", 3, int,
            "Tries of one training on Celery workers before the version is marked error"),
    Setting("CELERY_BROKER_URL", None, str,
            "Celery broker (redis://… or amqp://…); unset: models train in the web process"),
    Setting("CELERY_QUEUE", "quarry-training", str,
            "Celery queue the training tasks and the jobs' runs go to (workers: celery -A "
            "wsgi:celery worker -Q …)"),
    Setting("CELERY_VISIBILITY_TIMEOUT_S", 3600, int,
            "Redis broker: seconds before a task whose worker vanished is delivered again"),
    Setting("CELERY_JOIN_TIMEOUT_S", 3600.0, float,
            "Longest wait of USING join_learn_process = true for a Celery worker's training"),
    Setting("JOBS_SCHEDULER", True, bool,
            "Run the jobs' scheduler thread in this process (CREATE JOB); every web process "
            "may run one: each slot still runs once (a row per slot, unique in the store)"),
    Setting("JOBS_POLL_S", 2.0, float,
            "Seconds between two looks of the scheduler for due jobs; a slot starts within "
            "about this long of its time"),
    Setting("JOBS_THREADS", 4, int,
            "Jobs' runs at once per process without a Celery broker; a process claims no "
            "more due slots than it has free threads (the other processes take the rest)"),
    Setting("JOBS_RUN_STALE_S", 3600.0, float,
            "A job's run still unfinished after this many seconds (its process died) is "
            "marked error, and the job runs again at its next slot"),
    Setting("AUTH_REQUIRED", False, bool,
            "Require sign-in (session cookie, Bearer token or X-Api-Key) on every route "
            "but /api/status, /api/login and the liveness probe /api/util/ping"),
    Setting("SESSION_TTL_S", 12 * 3600, int,
            "Lifetime of a sign-in session, in seconds"),
    Setting("PASSWORD_HASH", "scrypt:32768:8:1", str,
            "How passwords are hashed: scrypt:N:r:p (N a power of two) or "
            "pbkdf2:sha256|sha512:iterations; a hash made with another method still checks"),
    Setting("LOGIN_MAX_FAILURES", 5, int,
            "Failed sign-ins allowed for one user name from one client address in "
            "LOGIN_WINDOW_S; further attempts of that user from that address get 429"),
    Setting("LOGIN_MAX_FAILURES_PER_ADDRESS", 100, int,
            "Failed sign-ins allowed from one client address, whatever the user names, in "
            "LOGIN_WINDOW_S; further attempts from that address get 429"),
    Setting("LOGIN_WINDOW_S", 300, int,
            "Window, in seconds, over which failed sign-ins are counted"),
    Setting("AUDIT_RETENTION_DAYS", 90, int,
            "Days the audit log keeps a record (pruned hourly and by flask audit prune)"),
    Setting("AUDIT_SYNC_COMMIT", False, bool,
            "Wait for the store's flush to disk of each SQL statement's audit record before "
            "answering (off: committed and visible before the answer, lost only if the "
            "store's own server crashes at once)"),
    Setting("METRICS_ALLOW", "127.0.0.1/8,::1", str,
            "Addresses or CIDRs (comma-separated) that may read /metrics and "
            "/api/util/readiness without signing in; others need an admin's sign-in"),
    Setting("TRUSTED_ORIGINS", "", str,
            "Origins (scheme://host[:port], comma-separated) whose pages may make changes "
            "(POST, PUT, PATCH, DELETE) across origins; others are refused with 403"),
    Setting("PROXY_HOPS", 0, int,
            "Reverse proxies in front of Quarry whose X-Forwarded-* headers are trusted"),
    Setting("LOG_LEVEL", "INFO", str,
            "Level of the application log (DEBUG, INFO, WARNING, ERROR)"),
    # Read by gunicorn.conf.py (listed here so that the README documents them too).
    Setting("BIND", "127.0.0.1:47334", str, "Address gunicorn listens on (gunicorn.conf.py)"),
    Setting("WORKERS", None, int,
            "gunicorn worker processes (gunicorn.conf.py; default: CPU count + 1)"),
    Setting("THREADS", 8, int, "Threads per gunicorn worker (gunicorn.conf.py)"),
]


def _convert(setting: Setting, raw: str) -> Any:
    if setting.kind is bool:
        return _bool(raw)
    if setting.kind == "json":
        return json.loads(raw)
    return setting.kind(raw)


def load_settings(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """Settings from the environment, each converted to its kind, with defaults filled in."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for setting in SETTINGS:
        raw = environ.get(f"QUARRY_{setting.name}")
        if raw is None:
            values[setting.name] = setting.default
            continue
        try:
            values[setting.name] = _convert(setting, raw)
        except ValueError as exc:
            raise RuntimeError(f"QUARRY_{setting.name} is not valid: {exc}") from exc
    return values


def settings_table() -> str:
    """The README's settings table, in Markdown."""
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    for s in SETTINGS:
        default = "(see meaning)" if s.default is None else f"`{json.dumps(s.default)}`"
        lines.append(f"| `QUARRY_{s.name}` | {default} | {s.doc} |")
    return "\n".join(lines)


def write_readme_table(path: str = "README.md") -> None:
    """Refresh the settings table between the README's settings markers."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    head, rest = text.split("<!-- settings:start -->")
    _, tail = rest.split("<!-- settings:end -->")
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"{head}<!-- settings:start -->\n{settings_table()}\n<!-- settings:end -->{tail}")

