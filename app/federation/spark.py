"""Federated statements on a Spark cluster, through Spark Connect (FEDERATION_ENGINE).

The plan is the one DuckDB runs (``plan.py``); only where the legs go and who joins them
changes:

- a leg on PostgreSQL or MariaDB/MySQL becomes a JDBC relation of the statement's Spark
  session. Its query is the leg's gated text (the gate checked it in the source's dialect);
  Spark wraps it and pushes the engine statement's own filters, columns, aggregates and
  limits into it. Each JDBC session starts read-only (``sessionInitStatement``) with the
  source's time limit, and its query carries the statement's marker (``quarry_<id>``) so
  that a cancel finds and stops it in the database (``running.cancel_marked``);
- a leg Spark cannot reach (SQLite, an uploaded file) is read by Quarry through its usual
  path and handed to the session as Arrow, within SPARK_LOCAL_MAX_BYTES;
- a leg its source expects to send more than SPARK_PARTITION_ROWS rows is read in ranges
  of its table's integer primary key (``partitionColumn``, bounds from the key's index),
  one Spark task each, so that a cluster reads it in parallel;
- a leg that a smaller leg's join keys may cut (``dynamic.py``, as on DuckDB's route) is
  made after that leg: ``keys`` collects them (a Spark job over the small leg's view, or
  Quarry's own Arrow rows of it), and its JDBC query carries ``key IN (…)``. Spark's own
  runtime filters never reach a JDBC source: they filter rows once read;
- the engine statement is DuckDB's, written again in Spark's dialect by sqlglot, over
  temporary views named as the legs; its answer comes back as Arrow record batches.

Credentials go to Spark only as the JDBC ``user`` and ``password`` options, which Spark
redacts in its plans, logs and UI; the JDBC URL carries none. Every Spark Connect session
is the statement's own (created and released with it) and tagged with its id, so a cancel
or the time limit interrupts exactly its jobs (``interruptTag``).
"""

from __future__ import annotations

import math
import re
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlsplit

import sqlglot
from flask import Flask, current_app

from ..errors import EngineUnavailable
from ..lazy import on_first_use
from ..sql.errors import ErrorCode, SqlError
from ..sql.estimate import key_range
from ..sql.execute import checkout
from ..sql.formats import pa, pc  # pyarrow, imported with the first federated statement
from ..sql.gate import GatedStatement
from ..sql.running import cancel_marked
from ..sql.sources import DataSource
from .engine import key_kind
from .plan import Leg, leg_sql, source_column

EXTENSION_KEY = "quarry.spark"
ENGINES = ("duckdb", "spark", "auto")
pq = on_first_use("pyarrow.parquet")

# The JDBC drivers the Spark cluster must have (Debian: libpostgresql-jdbc-java,
# libmariadb-java), by Quarry's dialect: (URL scheme, driver class, default port).
_JDBC = {
    "postgresql": ("postgresql", "org.postgresql.Driver", 5432),
    "mysql": ("mysql", "org.mariadb.jdbc.Driver", 3306),
}
_MARK = re.compile(r"[^A-Za-z0-9_]")
_ROWS_PER_FETCH = 10_000
# The password option as a Spark Connect plan prints it (protobuf text: key, then value).
_PASSWORD_IN_PLAN = r'(?s)key: "password".{0,64}?value: "(?:[^"\\]|\\.)*"'
# A leg's parallel reads: (its column, smallest and largest key, how many reads).
Split = tuple[str, int, int, int]


class SparkEngine:
    """Where federated statements go when Spark runs them: the Spark Connect address and
    what a statement may hand it; one Spark Connect session per statement."""

    def __init__(self, remote: str | None, connect_timeout_s: float,
                 local_max_bytes: int, partition_rows: int = 0, max_partitions: int = 1
                 ) -> None:
        self.remote = remote
        self.connect_timeout_s = connect_timeout_s
        self.local_max_bytes = local_max_bytes
        self.partition_rows = partition_rows
        self.max_partitions = max_partitions

    def session(self, statement_id: str) -> SparkSession:
        """A new Spark Connect session for one statement; EngineUnavailable (503) when
        the remote cannot be reached or refuses it."""
        if not self.remote:
            raise EngineUnavailable("Federated statements run on Spark (FEDERATION_ENGINE) "
                                    "but QUARRY_SPARK_REMOTE is not set")
        self._check_reachable()
        ConnectSession, DefaultPolicy = _connect_client()
        try:
            # Spark redacts the JDBC password in plans and logs by its key, but the Connect
            # UI shows each request's plan as text: this session's string redaction hides
            # the password option there (the pattern holds no secret itself).
            spark = ConnectSession.builder.remote(self.remote) \
                .config("spark.sql.redaction.string.regex", _PASSWORD_IN_PLAN).create()
            # A server that went away answers at once, not after the client's ten minutes
            # of retries.
            spark.client.set_retry_policies([DefaultPolicy(max_retries=2,
                                                           max_backoff=1000)])
        except Exception as exc:  # noqa: BLE001 - any failure to open is "unavailable"
            raise self.unavailable(exc) from None
        return SparkSession(self, spark, statement_id)

    def _check_reachable(self) -> None:
        import grpc

        address = _address(self.remote or "")
        channel = grpc.insecure_channel(address)
        try:
            grpc.channel_ready_future(channel).result(timeout=self.connect_timeout_s)
        except grpc.FutureTimeoutError:
            raise EngineUnavailable(
                f"The Spark Connect server {self.remote} (QUARRY_SPARK_REMOTE) cannot be "
                f"reached within {self.connect_timeout_s:g} s; the statement did not run"
            ) from None
        finally:
            channel.close()

    def unavailable(self, exc: BaseException) -> EngineUnavailable:
        return EngineUnavailable(f"The Spark Connect server {self.remote} "
                                 f"(QUARRY_SPARK_REMOTE) refused the statement: "
                                 f"{_first_line(exc)}")


class SparkSession:
    """One statement's Spark Connect session: its legs as views, the engine statement,
    its answer as record batches, and its interrupt."""

    def __init__(self, engine: SparkEngine, spark: Any, statement_id: str) -> None:
        self.engine = engine
        self.spark = spark
        self.marker = "quarry_" + _MARK.sub("", statement_id or uuid.uuid4().hex)
        self.tag = self.marker.replace("_", "-")
        spark.addTag(self.tag)
        self.cap: int | None = None   # rows of the answer to fetch at most (None: all)
        self._local: dict[str, list[pa.RecordBatch]] = {}
        self._schemas: dict[str, pa.Schema] = {}
        self._local_bytes = 0
        self._jdbc_sources: dict[str, DataSource] = {}
        self._frame: Any = None
        self._lock = threading.Lock()
        # Spark has no JSON type: a JSON column of a leg (a knowledge base's metadata,
        # PostgreSQL's json/jsonb) is text in its answer, as it is on its JDBC reads.
        self.json_columns: list[int] = []

    # -- legs --------------------------------------------------------------------------------

    @staticmethod
    def reaches(source: DataSource) -> bool:
        """Whether Spark reads ``source`` itself (over JDBC)."""
        return source.dialect in _JDBC

    def jdbc(self, leg: Leg, gated: GatedStatement, timeout_s: float,
             split: Split | None = None) -> str | None:
        """Make the view ``leg.name`` a JDBC relation reading the gated leg query from its
        source, read-only and under ``timeout_s``, in the parallel reads of ``split``
        (``partitions``); Spark asks the source for the columns (no row) here, so a
        failing source fails now. How it is split (None: one read)."""
        source = gated.source or leg.source
        options = jdbc_options(source, gated.sql, timeout_s, self.marker)
        if split is not None:
            column, low, high, count = split
            # Spark takes a partition column only with a table: the leg's query becomes
            # a subquery (its marker still in the text a cancel looks for).
            options["dbtable"] = f"({options.pop('query')}) quarry_leg"
            options.update(partitionColumn=column, lowerBound=str(low),
                           upperBound=str(high + 1), numPartitions=str(count))
        self._jdbc_sources[source.name] = source
        with self._errors():
            self.spark.read.format("jdbc").options(**options).load() \
                .createOrReplaceTempView(leg.name)
        if split is None:
            return None
        return f"{split[3]} parallel reads by {split[0]} from {split[1]} to {split[2]}"

    def partitions(self, leg: Leg, timeout_s: float) -> Split | None:
        """How to read the leg in parallel when it is large enough: one table (a join
        inside its source is read whole), its rows estimated beyond SPARK_PARTITION_ROWS,
        an integer primary key (None: in one read). The key joins the leg's columns when
        the statement does not read it (Spark splits by a column of the relation)."""
        rows, each = leg.estimate or 0, self.engine.partition_rows
        if each <= 0 or rows <= each or leg.joined or leg.limit is not None \
                or not self.reaches(leg.source):
            return None
        count = min(math.ceil(rows / each), self.engine.max_partitions)
        if count < 2:
            return None
        found = key_range(leg.source, leg.table.db or None, leg.table.name, timeout_s)
        if found is None:
            return None
        key, low, high = found
        name = next((n for n in leg.columns if source_column(leg, n).name == key), None)
        if name is None:
            if key in leg.columns:  # the name is another column's
                return None
            # Copies: the lists are shared with the plan the process keeps.
            leg.columns, leg.kinds = [*leg.columns, key], {**leg.kinds, key: "int"}
            leg.sql, name = leg_sql(leg), key
        elif leg.kinds.get(name) != "int":
            return None
        return name, low, high, count

    def keys(self, table: str, column: str, most: int, *, as_int: bool = False
             ) -> tuple[str, list | None, Any, Any] | None:
        """The distinct non-NULL values of ``column`` in leg ``table``, as the DuckDB
        session's ``keys`` gives them (a dynamic filter's keys): read from the rows Quarry
        holds for a leg it read itself, else by a Spark job over the leg's view (the
        statement's tag: a cancel stops it). Text keys for an integer column (``as_int``)
        give no filter here: Spark would compare them by its own casts, not DuckDB's, and a
        filter left out costs rows read, never a row of the answer."""
        with self._lock:
            batches = self._local.get(table)
            schema = self._schemas.get(table)
        if batches is not None and schema is not None:
            data = pa.Table.from_batches(batches, schema=schema).column(column)
            values = pc.unique(pc.drop_null(data))
            kind = key_kind(data.type)
            if kind is None or (kind == "text" and as_int):
                return None
            if len(values) <= most:
                return kind, values.to_pylist(), None, None
            bounds = pc.min_max(values)
            return kind, None, bounds["min"].as_py(), bounds["max"].as_py()
        quoted = "`" + column.replace("`", "``") + "`"
        with self._errors():
            data = self.spark.sql(
                f"SELECT DISTINCT {quoted} FROM `{table}` WHERE {quoted} IS NOT NULL "
                f"LIMIT {int(most) + 1}").toArrow()
        values, kind = data.column(0), key_kind(data.schema.field(0).type)
        if kind is None or (kind == "text" and as_int):
            return None
        if len(values) <= most:
            return kind, values.to_pylist(), None, None
        if kind == "text":  # no range of text (dynamic.py): the bounds are not needed
            return kind, None, None, None
        # Beyond ``most`` the values read are a part: the range is the whole column's.
        with self._errors():
            low, high = self.spark.sql(f"SELECT min({quoted}), max({quoted}) "
                                       f"FROM `{table}`").collect()[0]
        return kind, None, low, high

    def append(self, table: str, batch: pa.RecordBatch | pa.Table) -> None:
        """Add rows of a leg Quarry reads itself (kept until the engine statement starts,
        within SPARK_LOCAL_MAX_BYTES over all such legs)."""
        batches = batch.to_batches() if isinstance(batch, pa.Table) else [batch]
        with self._lock:
            for one in batches:
                self._local_bytes += one.nbytes
                if self._local_bytes > self.engine.local_max_bytes:
                    raise SqlError(ErrorCode.TOO_MANY_ROWS,
                                   f"The legs Spark cannot read itself (SQLite, files) send "
                                   f"more than {self.engine.local_max_bytes} bytes "
                                   "(SPARK_LOCAL_MAX_BYTES); add a condition on those tables")
                self._local.setdefault(table, []).append(one)
                self._schemas.setdefault(table, one.schema)

    def ensure(self, table: str, schema: pa.Schema) -> None:
        with self._lock:
            self._schemas.setdefault(table, schema)
            self._local.setdefault(table, [])

    def attach(self, table: str, path: str, *, empty: bool = False) -> None:
        """An uploaded file's leg: its Parquet read here (Spark may not share the files
        folder), within the same byte limit."""
        parquet = pq.ParquetFile(path)
        if empty:
            self.ensure(table, parquet.schema_arrow)
            return
        for batch in parquet.iter_batches(batch_size=_ROWS_PER_FETCH):
            self.append(table, batch)
        self.ensure(table, parquet.schema_arrow)

    # -- the engine statement ---------------------------------------------------------------

    def _register_local(self) -> None:
        for table, batches in self._local.items():
            data = pa.Table.from_batches(batches, schema=self._schemas[table])
            # Plain fields: a JSON column's mark (``engine.JSON_FIELD``) is DuckDB's to read.
            data = pa.Table.from_arrays(data.columns, names=data.column_names)
            with self._errors():
                if data.num_rows:
                    frame = self.spark.createDataFrame(data)
                else:  # pyspark reads a schema off the rows; an empty leg gives its own
                    frame = self.spark.createDataFrame([], _spark_schema(data.schema))
                frame.createOrReplaceTempView(table)
        self._local.clear()

    def run(self, duckdb_sql: str) -> list[str]:
        """Start the engine statement (DuckDB's text, written again for Spark); the names
        of its columns."""
        self._register_local()
        with self._errors():
            frame = self.spark.sql(spark_sql(duckdb_sql))
            self._frame = frame.limit(self.cap) if self.cap is not None else frame
            return list(self._frame.columns)

    def batches(self, rows: int = _ROWS_PER_FETCH) -> Iterator[pa.RecordBatch]:
        """The answer as record batches, as Spark Connect streams them (what pyspark's
        ``toLocalIterator`` reads, without making a Row of each value)."""
        client, plan = self.spark.client, self._frame._plan
        with self._errors():
            for part in client.to_table_as_iterator(plan.to_proto(client), plan.observations):
                if isinstance(part, pa.Table):
                    yield from part.to_batches(rows)

    def explain(self, duckdb_sql: str) -> str:
        """Spark's plan of the engine statement (what each JDBC scan was given to push)."""
        self._register_local()
        with self._errors():
            return self.spark.sql("EXPLAIN FORMATTED " + spark_sql(duckdb_sql)) \
                .collect()[0][0]

    def interrupt(self) -> None:
        """Stop the statement's Spark jobs, and its JDBC reads in their databases (a read
        blocked in the database does not see Spark's interrupt)."""
        try:
            self.spark.interruptTag(self.tag)
        finally:
            sources = list(self._jdbc_sources.values())
            for source in sources:
                cancel_marked(source, self.marker)
            # A task Spark launched before its interrupt arrived may open its read after
            # that sweep (seen on a loaded machine): sweep again for a few seconds, apart.
            threading.Thread(target=_sweep, args=(sources, self.marker), daemon=True,
                             name="quarry-spark-sweep").start()

    def close(self) -> None:
        try:
            self.spark.stop()  # releases the session and its views on the server
        except Exception:  # noqa: BLE001, S110 - the server may be gone; nothing is left here
            pass

    # -- errors ----------------------------------------------------------------------------

    def _errors(self) -> _SparkErrors:
        return _SparkErrors(self.engine)


_SWEEPS, _SWEEP_EVERY_S = 12, 0.25


def _sweep(sources: list[DataSource], marker: str) -> None:
    """Stop the reads carrying ``marker`` that appear in the next ~3 s."""
    for _ in range(_SWEEPS):
        time.sleep(_SWEEP_EVERY_S)
        for source in sources:
            cancel_marked(source, marker)


class _SparkErrors:
    """Spark's failures as the data path's: the server gone → 503 naming it; anything else
    (a bad cast, a source's error) → QUERY_FAILED in Spark's words; SparkFailure keeps
    whether Spark reported a cancel."""

    def __init__(self, engine: SparkEngine) -> None:
        self.engine = engine

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: BaseException | None, _tb: Any) -> bool:
        if exc is None or isinstance(exc, (SqlError, EngineUnavailable)):
            return False
        from pyspark.errors import PySparkException

        if not isinstance(exc, PySparkException):
            return False
        text = str(exc)
        if _is_unavailable(exc):
            raise self.engine.unavailable(exc) from None
        raise SparkFailure(text, cancelled="OPERATION_CANCELED" in text
                           or "cancelled" in text.lower()) from None


class SparkFailure(Exception):
    """A statement Spark failed (or was made to stop: ``cancelled``)."""

    def __init__(self, message: str, *, cancelled: bool) -> None:
        super().__init__(message)
        self.cancelled = cancelled

    def as_sql_error(self) -> SqlError:
        return SqlError(ErrorCode.QUERY_FAILED, "The statement failed in Spark: "
                        + _first_line(self))


def _connect_client() -> tuple[Any, Any]:
    """pyspark's Connect client (its session class and retry policy), loaded with the first
    statement Spark runs: a worker that never sends one never pays its import."""
    with warnings.catch_warnings():
        # pyspark warns at import that it has not been tried with pandas 3 (which Quarry
        # uses): the Connect client moves Arrow, never pandas, so the warning says nothing
        # about this use.
        warnings.filterwarnings("ignore", category=FutureWarning, module=r"pyspark\.")
        from pyspark.sql.connect.client.retries import DefaultPolicy
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    return ConnectSession, DefaultPolicy


def _spark_schema(schema: pa.Schema) -> Any:
    """Spark's schema of an Arrow one; a column of no declared type (an empty SQLite leg)
    as text. pyspark is loaded by now (``_connect_client``)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(pa.schema([field.with_type(pa.string())
                                        if pa.types.is_null(field.type) else field
                                        for field in schema]))


def _is_unavailable(exc: BaseException) -> bool:
    import grpc

    code = getattr(exc, "getGrpcStatusCode", lambda: None)()
    return code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:500] if text else type(exc).__name__


def _address(remote: str) -> str:
    """``host:port`` of a Spark Connect URL (``sc://host:port/;param=…``)."""
    parts = urlsplit(remote)
    if parts.scheme != "sc" or not parts.hostname:
        raise EngineUnavailable(f"QUARRY_SPARK_REMOTE must be a Spark Connect URL "
                                f"(sc://host:port), not {remote!r}")
    return f"{parts.hostname}:{parts.port or 15002}"


def spark_sql(duckdb_sql: str) -> str:
    """The engine statement in Spark's dialect (sqlglot writes it from DuckDB's)."""
    try:
        return sqlglot.transpile(duckdb_sql, read="duckdb", write="spark",
                                 unsupported_level=sqlglot.ErrorLevel.RAISE)[0]
    except sqlglot.errors.SqlglotError as exc:
        raise SqlError(ErrorCode.UNSUPPORTED,
                       f"The statement cannot be run on Spark: {exc}") from None


def jdbc_options(source: DataSource, sql: str, timeout_s: float, marker: str
                 ) -> dict[str, str]:
    """Spark's JDBC options of one leg: the source's address with no credential in the
    URL, its account as ``user``/``password`` (which Spark redacts), the read-only session
    and the time limit, and the leg's gated query marked with the statement's id."""
    scheme, driver, port = _JDBC[source.dialect]
    host, number, database, user, password = _account(source)
    address = f"jdbc:{scheme}://{host}:{number or port}/{database}"
    seconds = max(1, math.ceil(timeout_s))
    if source.dialect == "postgresql":
        # Read-only from the session's start: Spark may open the transaction before its
        # init statement runs (autocommit off for a cursor read), and a default changed
        # inside a transaction holds only for the next one. So the server's settings come
        # as startup options too: every transaction read-only, the source's time limit,
        # and the standard reading of strings the gate assumed (execute.begin_postgresql).
        startup = quote(f"-c default_transaction_read_only=on -c statement_timeout="
                        f"{seconds * 1000} -c standard_conforming_strings=on", safe="")
        address += f"?options={startup}"
        init = "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY; SET TRANSACTION READ ONLY"
    else:
        # MySQL and MariaDB name their time limits differently: JDBC's queryTimeout below
        # (the driver kills the query past it) serves both.
        init = "SET SESSION TRANSACTION READ ONLY"
    options = {
        "url": address,
        "driver": driver,
        "query": f"/* {marker} */ {sql}",
        "sessionInitStatement": init,
        "queryTimeout": str(seconds),
        "fetchsize": str(_ROWS_PER_FETCH),
        "pushDownPredicate": "true",
        "pushDownAggregate": "true",
        "pushDownLimit": "true",
        "pushDownOffset": "true",
    }
    if user:
        options["user"] = user
    if password:
        options["password"] = password
    return options


def _account(source: DataSource) -> tuple[str, int | None, str, str | None, str | None]:
    """(host, port, database, user, password) of ``source``, read from a connection of
    its pool (configured and run-time sources alike keep their password only there)."""
    conn = checkout(source)
    try:
        driver = conn.driver_connection
        if source.dialect == "postgresql":
            info = driver.info
            return info.host, info.port, info.dbname, info.user, info.password or None
        database = driver.db.decode() if isinstance(driver.db, bytes) else driver.db
        password = driver.password.decode() if isinstance(driver.password, bytes) \
            else driver.password
        user = driver.user.decode() if isinstance(driver.user, bytes) else driver.user
        return driver.host, driver.port, database or "", user, password or None
    finally:
        conn.close()


def validate_engine(app: Flask) -> None:
    """Refuse to start with an engine that does not exist, or Spark without its address."""
    mode = app.config["FEDERATION_ENGINE"]
    if mode not in ENGINES:
        raise RuntimeError(f"QUARRY_FEDERATION_ENGINE must be one of {', '.join(ENGINES)}, "
                           f"not {mode!r}")
    if mode != "duckdb" and not app.config.get("SPARK_REMOTE"):
        raise RuntimeError(f"QUARRY_FEDERATION_ENGINE={mode} needs QUARRY_SPARK_REMOTE "
                           "(sc://host:port of a Spark Connect server)")
    if app.config.get("SPARK_REMOTE"):
        _address(app.config["SPARK_REMOTE"])
    if app.config["SPARK_MAX_PARTITIONS"] < 1 or app.config["SPARK_PARTITION_ROWS"] < 0:
        raise RuntimeError("QUARRY_SPARK_MAX_PARTITIONS must be at least 1 and "
                           "QUARRY_SPARK_PARTITION_ROWS at least 0")


def init_spark(app: Flask) -> None:
    try:
        validate_engine(app)
    except EngineUnavailable as exc:
        raise RuntimeError(exc.detail) from None
    app.extensions[EXTENSION_KEY] = SparkEngine(app.config.get("SPARK_REMOTE"),
                                                app.config["SPARK_CONNECT_TIMEOUT_S"],
                                                app.config["SPARK_LOCAL_MAX_BYTES"],
                                                app.config["SPARK_PARTITION_ROWS"],
                                                app.config["SPARK_MAX_PARTITIONS"])


def current_spark() -> SparkEngine:
    return current_app.extensions[EXTENSION_KEY]
