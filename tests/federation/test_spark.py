"""Federated statements on Spark (FEDERATION_ENGINE=spark), against real Spark started once
for this file: a standalone cluster (a master, two workers) and a Spark Connect server
against it.

The data set is tests/federation's (orders in PostgreSQL, customers in MariaDB, targets in
SQLite); PostgreSQL is reached with a password in its URL and MariaDB with an account of
its own that may only SELECT, so that the tests can look for those secrets in Spark's logs,
plans and UI.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Iterator
from decimal import Decimal

import pytest
import requests
from flask import Flask

from app import create_app

from ..conftest import _dispose
from ..helpers import root_and_bob, sql_runner
from ..spark_server import LIGHT_JVM, SparkServer, cluster_server, free_port, missing
from .conftest import CUSTOMERS, ORDERS, PID, SPLIT_DB, _mysql, _pg

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(missing() is not None, reason=f"Spark: {missing()}")]

PG_SECRET = f"pg-Secret-{PID}-x9"
MARIA_USER = f"qspark{PID}"
MARIA_SECRET = f"maria-Secret-{PID}-y7"
CANCELLED, TIME_LIMIT = 22, 9

JOINED = ("SELECT c.country, sum(o.amount) AS total, count(*) AS n "
          "FROM pg.orders o JOIN maria.customers c ON o.customer_id = c.id "
          "WHERE o.qty > 10000000010 GROUP BY c.country ORDER BY c.country")
THREE = ("SELECT c.name, t.goal, o.amount FROM pg.orders o "
         "JOIN maria.customers c ON o.customer_id = c.id "
         "LEFT JOIN lite.targets t ON t.country = c.country "
         "WHERE o.id <= 20 ORDER BY o.id")


@pytest.fixture(scope="module")
def spark(tmp_path_factory) -> Iterator[SparkServer]:
    """One Spark for the whole file: a standalone master, two workers (an executor on
    each) and a Connect server against them. Every test runs on it, so cluster mode is
    what every test proves; the JVMs are the light ones (spark_server.LIGHT_JVM)."""
    with cluster_server(str(tmp_path_factory.mktemp("spark")), java_options=LIGHT_JVM,
                        shuffle_partitions=2) as server:
        yield server


@pytest.fixture(scope="module")
def spark_sources(fed_sources) -> Iterator[dict[str, str]]:
    """fed_sources with secrets: a password in PostgreSQL's URL (its server trusts local
    connections, so any password passes), and a MariaDB account that may only SELECT."""
    with contextlib.closing(_mysql()) as conn, conn.cursor() as cur:
        cur.execute(f"DROP USER IF EXISTS '{MARIA_USER}'@'%'")
        cur.execute(f"CREATE USER '{MARIA_USER}'@'%' IDENTIFIED BY '{MARIA_SECRET}'")
        cur.execute(f"GRANT SELECT ON `{SPLIT_DB}`.* TO '{MARIA_USER}'@'%'")
        cur.execute(f"CREATE OR REPLACE SEQUENCE `{SPLIT_DB}`.spark_seq")
    with _pg(SPLIT_DB) as conn:  # about 20 s to read: it sleeps in every row
        conn.execute("CREATE OR REPLACE VIEW slow_spark AS SELECT g + "
                     "length(pg_sleep(0.1)::text) AS id FROM generate_series(1, 200) g")
        conn.execute("CREATE SEQUENCE IF NOT EXISTS spark_seq")
    pg = fed_sources["pg"].replace("postgres@", f"postgres:{PG_SECRET}@")
    maria = fed_sources["maria"].replace("root@", f"{MARIA_USER}:{MARIA_SECRET}@")
    try:
        yield {**fed_sources, "pg": pg, "maria": maria}
    finally:
        with contextlib.closing(_mysql()) as conn, conn.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{MARIA_USER}'@'%'")


def _app(sources: dict, session_dir: str, sqlite_template: str, name: str,
         **config) -> Flask:
    store = os.path.join(session_dir, f"{name}-store.db")
    shutil.copy(sqlite_template, store)
    settings = {"DATABASE_URL": f"sqlite:///{store}", "INSTANCE_PATH": session_dir,
                "TESTING": True, "DATA_SOURCES": sources, "SQL_TIMEOUT_S": 60.0,
                "FEDERATION_MEMORY": 64 * 1024 * 1024}
    settings.update(config)
    return create_app(settings)


@pytest.fixture(scope="module")
def spark_app(spark, spark_sources, session_dir, sqlite_template) -> Iterator[Flask]:
    app = _app(spark_sources, session_dir, sqlite_template, "spark",
               FEDERATION_ENGINE="spark", SPARK_REMOTE=spark.remote)
    yield app
    _dispose(app)


@pytest.fixture(scope="module")
def squery(spark_app):
    return sql_runner(spark_app.test_client())


def _exact(rows: list) -> list:
    """Rows with numbers as Decimal, whatever JSON type carried them."""
    return [[Decimal(str(v)) if isinstance(v, (int, float)) and not isinstance(v, bool)
             else v for v in row] for row in rows]


def test_answers_equal_duckdb_and_one_database(squery, fquery):
    on_spark = squery(JOINED)
    assert on_spark["type"] == "table", on_spark
    assert on_spark["context"]["engine"] == "spark"
    assert on_spark["column_names"] == ["country", "total", "n"]
    one = fquery(JOINED.replace("pg.", "one.").replace("maria.", "one."))
    assert _exact(on_spark["data"]) == _exact(one["data"])
    assert _exact(on_spark["data"]) == _exact(fquery(JOINED)["data"])  # DuckDB's route
    # Exact decimals: a numeric(12,2) sum is not a float.
    assert all("." in str(row[1]) and len(str(row[1]).split(".")[1]) <= 2
               for row in on_spark["data"])
    # SQLite's leg is read by Quarry and handed to Spark as Arrow.
    three = squery(THREE)
    assert three["type"] == "table", three
    assert _exact(three["data"]) == _exact(fquery(THREE)["data"])


def test_an_uploaded_file_is_handed_to_spark_as_arrow(spark_app, squery, fquery):
    client = spark_app.test_client()
    lines = ["id,name,country"] + [f"{i},{n},{c}" for i, n, c, *_ in CUSTOMERS]
    response = client.put("/api/files/sparkcustomers", query_string={"overwrite": "true"},
                          data={"file": (io.BytesIO(("\n".join(lines) + "\n").encode()),
                                         "customers.csv")},
                          content_type="multipart/form-data")
    assert response.status_code == 200, response.get_data(as_text=True)
    try:
        sql = ("SELECT c.country, count(*) AS n, sum(o.amount) AS total FROM pg.orders o "
               "JOIN files.sparkcustomers c ON o.customer_id = c.id "
               "GROUP BY c.country ORDER BY c.country")
        joined = squery(sql)
        assert joined["type"] == "table" and joined["context"]["engine"] == "spark", joined
        expected = fquery(sql.replace("pg.orders", "orders").replace(
            "files.sparkcustomers", "customers"), db="one")
        assert _exact(joined["data"]) == _exact(expected["data"]) and len(joined["data"]) > 2
    finally:
        client.delete("/api/files/sparkcustomers")


@pytest.mark.parametrize("fmt", ["jsonlines", "csv", "arrow"])
def test_streamed_formats(spark_app, fed_app, fquery, fmt):
    want = fquery(THREE)["data"]
    response = spark_app.test_client().post("/api/sql/query", json={
        "query": THREE, "response_format": fmt})
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.headers["X-Quarry-Engine"] == "spark"
    assert "X-Quarry-Engine-Note" not in response.headers
    body = response.get_data()
    on_duckdb = fed_app.test_client().post("/api/sql/query", json={
        "query": THREE, "response_format": fmt}).get_data()
    if fmt == "jsonlines":
        lines = [json.loads(line) for line in body.decode().splitlines()]
        assert lines[0]["context"]["engine"] == "spark", lines[0]
        assert [r for batch in lines[1:-1] for r in batch] == want
    elif fmt == "csv":
        text = body.decode().splitlines()
        assert text[0] == "name,goal,amount" and len(text) == len(want) + 1
        assert body == on_duckdb
    else:
        import pyarrow as pa

        table = pa.ipc.open_stream(body).read_all()
        assert table.schema.metadata[b"engine"] == b"spark"
        assert table.column_names == ["name", "goal", "amount"]
        assert table.column("name").to_pylist() == [row[0] for row in want]
        # The same types as DuckDB's route answers (the same encoder, the same values).
        duck = pa.ipc.open_stream(on_duckdb).read_all()
        assert table.schema.remove_metadata() == duck.schema.remove_metadata()
        assert table.column("amount").to_pylist() == duck.column("amount").to_pylist()


def test_explain_names_spark_and_what_each_source_was_given(squery, spark):
    body = squery("EXPLAIN " + JOINED)
    assert body["type"] == "table", body
    steps = {row[0].split(";")[0]: row for row in body["data"]}
    assert steps["engine"][1] == "spark"
    plan = steps["spark plan"][2]
    # Spark's plan: each source's JDBC scan with what was pushed to it.
    assert "JDBCRelation" in plan and "PushedFilters" in plan
    assert "qty" in plan  # the WHERE on orders, pushed into PostgreSQL's scan
    assert [row[1] for row in body["data"][:2]] == ["pg", "maria"]
    text = json.dumps(body)
    assert PG_SECRET not in text and MARIA_SECRET not in text


def test_an_empty_leg_quarry_reads_itself(squery, fquery):
    """A SQLite leg of no row (Spark cannot take its types from rows), in EXPLAIN (which
    reads none) and in a statement whose filter on it keeps none."""
    assert squery("EXPLAIN " + THREE)["type"] == "table"
    sql = THREE.replace("t.country = c.country", "t.country = c.country AND t.goal > 10000")
    body = squery(sql)
    assert body["type"] == "table", body
    assert _exact(body["data"]) == _exact(fquery(sql)["data"])
    assert all(row[1] is None for row in body["data"]) and body["data"]


def test_credentials_never_show_in_spark_logs_plans_or_ui(squery, spark):
    assert squery(JOINED)["type"] == "table"
    logs = spark.logs()
    assert "JDBCRelation" in logs or "SparkConnect" in logs  # the logs are there to read
    assert PG_SECRET not in logs and MARIA_SECRET not in logs
    apps = requests.get(spark.ui + "/api/v1/applications", timeout=60).json()
    seen = []
    for app in apps:
        base = f"{spark.ui}/api/v1/applications/{app['id']}"
        for path in ("/sql?details=true&planDescription=true", "/environment", "/jobs"):
            seen.append(requests.get(base + path, timeout=60).text)
    for page in ("/connect/", "/SQL/", "/environment/", "/jobs/"):
        seen.append(requests.get(spark.ui + page, timeout=60).text)
    ui = "\n".join(seen)
    assert "JDBCRelation" in ui  # the plans are shown …
    assert PG_SECRET not in ui and MARIA_SECRET not in ui  # … without the secrets


def test_jdbc_sessions_are_read_only(spark_app, spark, fed_sources):
    """The second layer under the gate: even a query the gate never saw cannot write
    through the session Spark opens (here: a sequence's next value), with accounts that
    may write (PostgreSQL's and MariaDB's administrators)."""
    from app.federation.spark import _connect_client, jdbc_options
    from app.sql.sources import build_source

    session_class, _ = _connect_client()
    with spark_app.app_context():
        writes = {"pg": "SELECT nextval('spark_seq') AS v",
                  "maria": "SELECT NEXTVAL(spark_seq) AS v"}
        session = session_class.builder.remote(spark.remote).create()
        try:
            for name, sql in writes.items():
                source = build_source(f"{name}_admin", fed_sources[name], spark_app.config)
                options = jdbc_options(source, sql, 10, "quarry_ro_check")
                source.dispose()
                with pytest.raises(Exception) as failed:
                    session.read.format("jdbc").options(**options).load().collect()
                assert "read" in str(failed.value).lower() and \
                    "only" in str(failed.value).lower(), (name, str(failed.value)[:300])
        finally:
            session.stop()


SLOW = "SELECT s.id, c.name FROM pg.slow_spark s JOIN maria.customers c ON c.id = s.id"


def _running(app: Flask) -> list[dict]:
    return [q for q in app.test_client().get("/api/sql/queries").get_json()
            if q.get("statement") == SLOW]


def _jdbc_reads() -> int:
    with _pg(SPLIT_DB) as conn:
        # Spark's JDBC reads of the slow view (Spark names its subquery), running or
        # left open in a transaction.
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE "
                            "'%slow_spark%SPARK_GEN_SUBQ%' AND state <> 'idle' "
                            "AND pid <> pg_backend_pid()").fetchone()[0]


def _running_jobs(spark) -> int:
    count = 0
    for app in requests.get(spark.ui + "/api/v1/applications", timeout=60).json():
        count += len(requests.get(f"{spark.ui}/api/v1/applications/{app['id']}/jobs"
                                  "?status=running", timeout=60).json())
    return count


def test_cancel_interrupts_the_spark_job_and_its_jdbc_reads(spark_app, spark):
    answers: list = []
    client = spark_app.test_client()
    thread = threading.Thread(target=lambda: answers.append(
        client.post("/api/sql/query", json={"query": SLOW}).get_json()))
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (_running(spark_app) and _jdbc_reads()):
            time.sleep(0.1)
        assert _jdbc_reads() >= 1 and _running_jobs(spark) >= 1
        listed = _running(spark_app)
        assert len(listed) == 1 and listed[0]["source"] == "pg, maria"
        asked = time.monotonic()
        response = spark_app.test_client().delete(
            f"/api/sql/queries/{listed[0]['query_id']}")
        assert response.status_code == 200, response.get_data(as_text=True)
        thread.join(15)
        assert not thread.is_alive()
        while time.monotonic() - asked < 5 and (_jdbc_reads() or _running_jobs(spark)):
            time.sleep(0.05)
        gone = time.monotonic() - asked
        assert _jdbc_reads() == 0 and _running_jobs(spark) == 0
        assert gone <= 2.0, gone
    finally:
        thread.join(60)
    assert answers[0]["type"] == "error" and answers[0]["error_code"] == CANCELLED, answers


def test_time_limit_stops_the_statement_on_spark(spark_app, spark):
    started = time.monotonic()
    body = spark_app.test_client().post("/api/sql/query", json={
        "query": SLOW, "timeout_s": 2}).get_json()
    assert body["type"] == "error" and body["error_code"] == TIME_LIMIT, body
    assert time.monotonic() - started < 15
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _jdbc_reads():
        time.sleep(0.1)
    assert _jdbc_reads() == 0


def test_the_callers_rights_hold_on_spark(spark, spark_sources, session_dir,
                                          sqlite_template):
    app = _app(spark_sources, session_dir, sqlite_template, "rights",
               FEDERATION_ENGINE="spark", SPARK_REMOTE=spark.remote, AUTH_REQUIRED=True,
               SECRET_KEY="x" * 32, DEMO_SOURCE=False)
    try:
        sql = root_and_bob(app)
        assert sql("root", "GRANT query ON DATABASE pg TO bob")["type"] == "ok"
        refused = sql("bob", JOINED)  # maria: not granted, so it does not exist for bob
        assert refused["type"] == "error" and refused["error_code"] == 5, refused
        assert "maria" in refused["error_message"]
        assert sql("root", "GRANT query ON DATABASE maria TO bob")["type"] == "ok"
        granted = sql("bob", JOINED)
        assert granted["type"] == "table" and granted["context"]["engine"] == "spark", granted
    finally:
        _dispose(app)


def test_spark_down_answers_503_naming_the_remote_and_auto_falls_back(
        spark_sources, session_dir, sqlite_template):
    remote = f"sc://127.0.0.1:{free_port()}"  # nothing listens there
    down = _app(spark_sources, session_dir, sqlite_template, "down",
                FEDERATION_ENGINE="spark", SPARK_REMOTE=remote, SPARK_CONNECT_TIMEOUT_S=1.0)
    auto = _app(spark_sources, session_dir, sqlite_template, "auto",
                FEDERATION_ENGINE="auto", SPARK_REMOTE=remote, SPARK_CONNECT_TIMEOUT_S=1.0,
                SPARK_MIN_ROWS=1)
    try:
        response = down.test_client().post("/api/sql/query", json={"query": JOINED})
        assert response.status_code == 503, response.get_data(as_text=True)
        problem = response.get_json()
        assert remote in problem["detail"] and "Spark" in problem["title"] + problem["detail"]
        record = down.test_client().get("/api/audit").get_json()["records"][0]
        assert record["statement"] == JOINED and record["outcome"] == "error", record
        assert record["error_code"] == "10", record  # SOURCE_DOWN: the statement did not run
        # A statement on one source does not need Spark.
        one = down.test_client().post("/api/sql/query", json={
            "query": "SELECT count(*) AS n FROM pg.orders"}).get_json()
        assert one["type"] == "table" and one["data"] == [[60]]
        body = sql_runner(auto.test_client())(JOINED)
        assert body["type"] == "table" and body["context"]["engine"] == "duckdb"
        assert remote in body["context"]["engine_note"]
        assert "DuckDB" in body["context"]["engine_note"]
        _assert_streams_say(auto, JOINED, "duckdb", body["context"]["engine_note"],
                            body["data"])
    finally:
        _dispose(down)
        _dispose(auto)


def _assert_streams_say(app: Flask, sql: str, engine: str, note: str | None,
                        want: list) -> None:
    """Each streamed format carries the answer's engine (and note) where it has room:
    JSON lines' and SSE's header line, the Arrow schema's metadata, and for every format
    (CSV has no other place) the response's headers."""
    import pyarrow as pa

    client = app.test_client()
    for fmt in ("jsonlines", "sse", "csv", "arrow"):
        response = client.post("/api/sql/query", json={"query": sql, "response_format": fmt})
        assert response.status_code == 200, response.get_data(as_text=True)
        assert response.headers.get("X-Quarry-Engine") == engine, (fmt, response.headers)
        assert response.headers.get("X-Quarry-Engine-Note") == note, (fmt, response.headers)
        body = response.get_data()
        if fmt in ("jsonlines", "sse"):
            lines = [json.loads(line.removeprefix("data: ")) for line in
                     body.decode().splitlines() if line.strip()]
            context = lines[0]["context"]
            assert context.get("engine") == engine and context.get("engine_note") == note
            assert _exact([r for batch in lines[1:-1] for r in batch]) == _exact(want)
        elif fmt == "csv":
            assert len(body.decode().splitlines()) == len(want) + 1
        else:
            table = pa.ipc.open_stream(body).read_all()
            metadata = {k.decode(): v.decode() for k, v in table.schema.metadata.items()}
            assert metadata.get("engine") == engine and metadata.get("engine_note") == note
            assert table.num_rows == len(want)


def test_auto_sends_small_statements_to_duckdb_and_large_ones_to_spark(
        spark, spark_sources, session_dir, sqlite_template):
    small = _app(spark_sources, session_dir, sqlite_template, "auto-small",
                 FEDERATION_ENGINE="auto", SPARK_REMOTE=spark.remote, SPARK_MIN_ROWS=10**9)
    large = _app(spark_sources, session_dir, sqlite_template, "auto-large",
                 FEDERATION_ENGINE="auto", SPARK_REMOTE=spark.remote, SPARK_MIN_ROWS=10)
    try:
        assert "engine" not in sql_runner(small.test_client())(JOINED)["context"]
        assert sql_runner(large.test_client())(JOINED)["context"]["engine"] == "spark"
    finally:
        _dispose(small)
        _dispose(large)


def _scanned(spark: SparkServer, query_id: str, table: str) -> int | None:
    """The rows Spark's JDBC scans of ``table`` received for statement ``query_id`` (Spark's
    own count, in its UI's SQL metrics): what the source sent. None: no such scan seen."""
    marker = "quarry_" + re.sub(r"[^A-Za-z0-9_]", "", query_id)
    app = requests.get(spark.ui + "/api/v1/applications", timeout=60).json()[0]["id"]
    deadline = time.monotonic() + 10  # the UI learns of a finished query a moment later
    while True:
        executions = requests.get(f"{spark.ui}/api/v1/applications/{app}/sql",
                                  params={"details": "true", "planDescription": "true",
                                          "length": 1000}, timeout=60).json()
        counts = [int(metric["value"].replace(",", ""))
                  for execution in executions if marker in execution["planDescription"]
                  and execution["status"] == "COMPLETED"
                  for node in execution["nodes"]
                  if node["nodeName"].startswith("Scan JDBCRelation")
                  and f"{table}" in node["nodeName"]
                  for metric in node["metrics"] if metric["name"] == "number of output rows"]
        if counts or time.monotonic() > deadline:
            return sum(counts) if counts else None
        time.sleep(0.2)


CUT = ("SELECT o.id, c.name FROM pg.orders o JOIN maria.customers c ON o.customer_id = c.id "
       "WHERE c.country = 'SE' ORDER BY o.id")


def test_a_small_legs_keys_cut_what_the_large_source_sends(
        spark, squery, fquery, spark_sources, session_dir, sqlite_template):
    """A dynamic filter on Spark's route: the customers of one country are read first,
    and PostgreSQL sends only their orders (Spark's runtime filters would filter the rows
    once all were sent). Counted by Spark itself, with and without the filter."""
    want = fquery(CUT)["data"]
    swedes = {c[0] for c in CUSTOMERS if c[2] == "SE"}
    assert len(want) == len([o for o in ORDERS if o[1] in swedes]) < len(ORDERS)
    explained = squery("EXPLAIN " + CUT)
    assert "filtered by keys of leg_1" in explained["data"][0][0], explained["data"]
    cut = squery(CUT)
    assert cut["context"]["engine"] == "spark" and _exact(cut["data"]) == _exact(want)
    assert _scanned(spark, cut["query_id"], "orders") == len(want)
    whole_app = _app(spark_sources, session_dir, sqlite_template, "no-dynamic",
                     FEDERATION_ENGINE="spark", SPARK_REMOTE=spark.remote,
                     FEDERATION_DYNAMIC_KEYS=0)
    try:
        whole = sql_runner(whole_app.test_client())(CUT)
        assert _exact(whole["data"]) == _exact(want)
        assert _scanned(spark, whole["query_id"], "orders") == len(ORDERS)
    finally:
        _dispose(whole_app)


def test_keys_beyond_the_list_cut_by_their_whole_range(
        spark, fquery, spark_sources, session_dir, sqlite_template):
    """More keys than FEDERATION_DYNAMIC_KEYS (here 1): the large leg gets the range of
    all of them, not of the part read to count them."""
    sql = CUT.replace("c.country = 'SE'", "c.country IN ('FR', 'SE', 'BE')")
    ids = [c[0] for c in CUSTOMERS if c[2] in ("FR", "SE", "BE")]
    app = _app(spark_sources, session_dir, sqlite_template, "key-range",
               FEDERATION_ENGINE="spark", SPARK_REMOTE=spark.remote,
               FEDERATION_DYNAMIC_KEYS=1)
    try:
        body = sql_runner(app.test_client())(sql)
        assert _exact(body["data"]) == _exact(fquery(sql)["data"]) and body["data"]
        in_range = [o for o in ORDERS if min(ids) <= o[1] <= max(ids)]
        assert _scanned(spark, body["query_id"], "orders") == len(in_range) < len(ORDERS)
    finally:
        _dispose(app)


def test_a_large_leg_is_read_in_parallel_ranges_of_its_key(
        spark, spark_sources, session_dir, sqlite_template, fquery):
    """"Large" here: more than 2 rows a read, at most 3 reads; orders (PostgreSQL, which
    estimates its leg at tens of rows) and customers (MariaDB: 6), each by its primary
    key, which JOINED does not select."""
    app = _app(spark_sources, session_dir, sqlite_template, "ranges",
               FEDERATION_ENGINE="spark", SPARK_REMOTE=spark.remote,
               SPARK_PARTITION_ROWS=2, SPARK_MAX_PARTITIONS=3)
    try:
        run = sql_runner(app.test_client())
        explained = run("EXPLAIN " + JOINED)
        steps = {row[0].split(";")[0]: row for row in explained["data"]}
        assert "3 parallel reads by id from 1 to 60" in steps["leg 1: leg_0"][0], steps
        assert "3 parallel reads by id from 1 to 6" in steps["leg 2: leg_1"][0], steps
        plan = steps["spark plan"][2]
        # Spark's plan: every JDBC scan in three partitions.
        assert set(re.findall(r"\[numPartitions=(\d+)\]", plan)) == {"3"}, plan
        body = run(JOINED)
        assert _exact(body["data"]) == _exact(fquery(JOINED)["data"])
        # Every order the filters keep came, once, through the three reads.
        assert _scanned(spark, body["query_id"], "orders") == sum(
            row[2] for row in body["data"])
    finally:
        _dispose(app)


def test_a_standalone_cluster_of_two_workers_runs_it(spark, squery, fquery):
    body = squery(JOINED)
    assert body["type"] == "table" and body["context"]["engine"] == "spark", body
    assert _exact(body["data"]) == _exact(fquery(JOINED)["data"])
    master = requests.get(spark.master_ui + "/json/", timeout=60).json()
    alive = [w for w in master["workers"] if w["state"] == "ALIVE"]
    assert len(alive) == 2 and all(w["coresused"] == 1 for w in alive), master["workers"]
    apps = requests.get(spark.ui + "/api/v1/applications", timeout=60).json()
    executors = [e for e in requests.get(f"{spark.ui}/api/v1/applications/{apps[0]['id']}"
                                         "/executors", timeout=60).json()
                 if e["id"] != "driver"]
    # One executor on each worker, and both ran tasks of this file's statements.
    assert len(executors) == 2, executors
    assert all(e["totalTasks"] > 0 for e in executors), executors


def test_a_knowledge_base_joined_on_spark_answers_its_metadata_as_text(squery):
    """A knowledge base's hits are handed to Spark as Arrow; Spark has no JSON type, so
    its answer gives the metadata as its JSON text (DuckDB's gives the object:
    docs/federation.md, "JSON stays JSON")."""
    assert squery("CREATE KNOWLEDGE_BASE mindsdb.spark_notes USING metadata_columns = "
                  "['team']")["type"] == "ok"
    assert squery("INSERT INTO mindsdb.spark_notes (id, content, team) VALUES "
                  "(1, 'The printer jams.', 'hardware'), "
                  "(2, 'Forgot my password.', 'accounts')")["type"] == "ok"
    body = squery("SELECT kb.id, kb.metadata, c.name FROM mindsdb.spark_notes kb "
                  "JOIN maria.customers c ON c.id = kb.id WHERE kb.content = 'printer' "
                  "ORDER BY kb.id")
    assert body["type"] == "table", body
    assert body["context"]["engine"] == "spark"
    names = {c[0]: c[1] for c in CUSTOMERS}
    assert [(row[0], json.loads(row[1]), row[2]) for row in body["data"]] == [
        ("1", {"team": "hardware"}, names[1]), ("2", {"team": "accounts"}, names[2])]
