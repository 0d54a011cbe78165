"""Jobs through HTTP, on SQLite and PostgreSQL stores: CREATE / DROP / SHOW JOB and the
REST routes, what a job may run, schedules, the scheduler (each slot once across several
schedulers on one store, missed slots once, no overlap), templates, LAST, IF, rights at
creation and at each run, and the metrics."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from datetime import UTC, datetime, timedelta

from app.services import auth as auth_service
from app.sql.errors import ErrorCode
from tests.auth.conftest import PASSWORD, make_auth_app  # noqa: F401 - a fixture
from tests.helpers import assert_problem

FAST = {"JOBS_SCHEDULER": True, "JOBS_POLL_S": 0.1}
# Endless (until its time limit) in a job's first run, which has no earlier run (its
# PREVIOUS_START_DATETIME is its own START_DATETIME); ten rows in every later run, which
# then ends at once instead of waiting out the time limit again.
FIRST_RUN_ENDLESS = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < CASE WHEN "
    "'{{START_DATETIME}}' = '{{PREVIOUS_START_DATETIME}}' THEN 300000000 ELSE 10 END) "
    "SELECT sum(x % 7) AS a, count(*) AS n FROM c")


def sql(client, query: str, db: str | None = None, headers=None) -> dict:
    body = {"query": query, **({"context": {"db": db}} if db else {})}
    response = client.post("/api/sql/query", json=body, headers=headers)
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def ok(client, query: str, db: str | None = None, headers=None) -> dict:
    body = sql(client, query, db, headers)
    assert body["type"] in ("ok", "table"), body
    return body


def rows(body: dict) -> list[dict]:
    return [dict(zip([c.lower() for c in body["column_names"]], r, strict=True))
            for r in body["data"]]


def ago(**delta) -> str:
    return (datetime.now(UTC) - timedelta(**delta)).strftime("%Y-%m-%d %H:%M:%S")


def history(client, job: str, project: str = "mindsdb", headers=None) -> list[dict]:
    response = client.get(f"/api/projects/{project}/jobs/{job}/history", headers=headers)
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def wait_for(check, timeout: float = 20.0, what: str = "the job's runs"):
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def ended(client, job: str, count: int = 1, **kw) -> list[dict]:
    """The job's history once ``count`` of its runs have ended (newest first)."""
    def check():
        runs = history(client, job, **kw)
        return runs if len([r for r in runs if r["end_at"]]) >= count else None
    return wait_for(check, 30)


# --- statements and routes ---------------------------------------------------------------------

def test_create_show_select_and_drop_in_sql_and_rest(make_app):
    client = make_app().test_client()
    ok(client, "CREATE PROJECT p1")
    ok(client, "CREATE JOB p1.nightly (SELECT * FROM demo.iris LIMIT 1; SELECT 2) "
               "START '2030-01-01 02:00:00' END '2031-01-01' EVERY 2 days")
    ok(client, "CREATE JOB IF NOT EXISTS p1.nightly (SELECT 1)")  # kept as it was
    ok(client, "CREATE JOB once AS (SELECT 1) IF (SELECT 1)")
    taken = sql(client, "CREATE JOB p1.NIGHTLY (SELECT 1)")
    assert taken["error_code"] == ErrorCode.CONFLICT, taken
    assert "p1.NIGHTLY" in taken["error_message"]

    shown = rows(ok(client, "SHOW JOBS FROM p1"))
    assert shown == [{"name": "nightly", "project": "p1",
                      "start_at": "2030-01-01T02:00:00+00:00",
                      "end_at": "2031-01-01T00:00:00+00:00",
                      "next_run_at": "2030-01-01T02:00:00+00:00",
                      "schedule_str": "every 2 days",
                      "query": "SELECT * FROM demo.iris LIMIT 1; SELECT 2", "if_query": None,
                      "created_by": None}]
    assert [r["name"] for r in rows(ok(client, "SHOW JOBS"))] == ["once"]
    assert rows(ok(client, "SELECT name, if_query FROM jobs WHERE name = 'once'")) == \
        [{"name": "once", "if_query": "SELECT 1"}]
    assert rows(ok(client, "SELECT * FROM p1.jobs_history")) == []
    assert ok(client, "SELECT * FROM log.jobs_history")["column_names"] == [
        "NAME", "PROJECT", "SLOT_AT", "START_AT", "END_AT", "OUTCOME", "DURATION_S",
        "ERROR", "QUERY"]

    listed = client.get("/api/projects/p1/jobs").get_json()
    assert [j["name"] for j in listed] == ["nightly"]
    assert client.get("/api/projects/p1/jobs/NightLy").get_json()["schedule_str"] == \
        "every 2 days"
    made = client.post("/api/projects/p1/jobs", json={"job": {
        "name": "r1", "query": "SELECT 1", "schedule_str": "every 3 hours",
        "start_at": "2030-05-01T10:00:00Z"}})
    assert made.status_code == 201, made.get_json()
    assert made.get_json()["next_run_at"] == "2030-05-01T10:00:00+00:00"
    assert client.get("/api/projects/p1/jobs/r1/history").get_json() == []
    assert client.delete("/api/projects/p1/jobs/r1").status_code == 204
    assert_problem(client.get("/api/projects/p1/jobs/r1"), 404, "r1")
    assert_problem(client.delete("/api/projects/p1/jobs/r1"), 404, "r1")
    assert_problem(client.get("/api/projects/nope/jobs"), 404, "nope")

    ok(client, "DROP JOB p1.nightly")
    gone = sql(client, "DROP JOB p1.nightly")
    assert gone["error_code"] == ErrorCode.NOT_FOUND and "p1.nightly" in gone["error_message"]
    ok(client, "DROP JOB IF EXISTS p1.nightly")
    assert rows(ok(client, "SHOW JOBS FROM p1")) == []


REFUSED = [
    # (statement, words the error names)
    ("CREATE JOB j (INSERT INTO demo.iris (species) VALUES ('x'))",
     ["INSERT INTO demo.iris", "data source"]),
    ("CREATE JOB j (SELECT 1; UPDATE demo.iris SET species = 'x')",
     ["UPDATE demo.iris", "data source"]),
    ("CREATE JOB j (DELETE FROM demo.iris WHERE 1 = 1)", ["DELETE FROM demo.iris"]),
    ("CREATE JOB j (DROP PROJECT mindsdb)", ["DROP PROJECT mindsdb", "RETRAIN"]),
    ("CREATE JOB j (CREATE TABLE demo.copy (SELECT * FROM demo.iris))",
     ["demo.copy", "data source"]),
    ("CREATE JOB j (CREATE MODEL m FROM demo (SELECT * FROM iris) PREDICT species)",
     ["CREATE MODEL m"]),
    ("CREATE JOB j (CREATE JOB k (SELECT 1))", ["CREATE JOB k"]),
    ("CREATE JOB j (GRANT viewer ON PROJECT mindsdb TO bob)", ["cannot run in a job"]),
    ("CREATE JOB j (SELECT 1) EVERY 3 fortnights", ["EVERY", "fortnights"]),
    ("CREATE JOB j (SELECT 1) EVERY 0 minutes", ["at least 1"]),
    ("CREATE JOB j (SELECT 1) START '2031-01-01' END '2030-01-01'", ["after END"]),
    ("CREATE JOB j (SELECT 1) END '2001-01-01'", ["in the past"]),
    ("CREATE JOB j (SELECT 1) START 'tomorrow'", ["not a time"]),
    ("CREATE JOB j (SELECT 1) IF (RETRAIN mindsdb.m)", ["IF takes a SELECT"]),
    ("CREATE JOB j (RETRAIN mindsdb.nope)", ["nope"]),
    ("CREATE JOB j (SELECT * FROM nosuch.t)", ["nosuch"]),
    ("CREATE JOB j (SELECT * FROM demo.iris WHERE rowid > LAST AND species IN "
     "(SELECT species FROM demo.iris))", []),  # LAST on one table: accepted below
    ("CREATE JOB j (SELECT 'it''s; -- not a split' AS a; DROP VIEW v)", ["DROP VIEW v"]),
    ("CREATE JOB j (SELECT '\u00e9t\u00e9 \U0001f600'; DROP DATABASE demo)",
     ["DROP DATABASE demo"]),
    ("CREATE JOB j (" + "SELECT 1; " * 300 + "DROP PROJECT x)", ["DROP PROJECT x"]),
    ("CREATE JOB j (/* comment; */ DROP PROJECT y)", ["DROP PROJECT y"]),
]


def test_what_a_job_may_not_run_is_refused_when_it_is_created(make_app):
    client = make_app().test_client()
    for statement, words in REFUSED:
        body = sql(client, statement)
        if not words:
            assert body["type"] == "ok", (statement, body)
            ok(client, "DROP JOB j")
            continue
        assert body["type"] == "error", (statement, body)
        assert body["error_code"] == ErrorCode.INVALID_STATEMENT or "nope" in words \
            or "nosuch" in words, (statement, body)
        for word in words:
            assert word in body["error_message"], (statement, body)
    assert rows(ok(client, "SHOW JOBS")) == []
    # The same rules on REST: 422 naming the statement, 400 for the shape.
    refused = client.post("/api/projects/mindsdb/jobs", json={"job": {
        "name": "j", "query": "SELECT 1; UPDATE demo.iris SET species = 'x'"}})
    assert_problem(refused, 422, "UPDATE demo.iris")
    bad = client.post("/api/projects/mindsdb/jobs", json={"job": {
        "name": "j", "query": "SELECT 1", "schedule_str": "every blue moon"}})
    assert_problem(bad, 422, "blue moon")
    assert_problem(client.post("/api/projects/mindsdb/jobs", json={"job": {
        "name": "j", "query": "SELECT 1", "colour": 1}}), 400, "colour")
    assert_problem(client.post("/api/projects/mindsdb/jobs", json={"job": {
        "name": "j\u00e9", "query": "SELECT 1"}}), 400)
    assert_problem(client.post("/api/projects/mindsdb/jobs", json={"job": {
        "name": "j", "query": "SELECT '\x00'"}}), 422)
    assert_problem(client.post("/api/projects/mindsdb/jobs", json={"job": {
        "name": "j", "query": "SELECT 1", "start_at": "2030-01-01\x00"}}), 422)
    assert client.get("/api/projects/mindsdb/jobs").get_json() == []


def test_concurrent_creates_of_one_name_make_one_job(make_app):
    app = make_app()
    barrier = threading.Barrier(6)
    answers: list[int] = []

    def create(n: int) -> None:
        client = app.test_client()
        barrier.wait()
        answers.append(client.post("/api/projects/mindsdb/jobs", json={"job": {
            "name": "racer", "query": f"SELECT {n}", "schedule_str": "every day"}}).status_code)
    threads = [threading.Thread(target=create, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers) == [201, 409, 409, 409, 409, 409]
    assert len(app.test_client().get("/api/projects/mindsdb/jobs").get_json()) == 1


# --- the scheduler -------------------------------------------------------------------------------

def test_a_due_job_runs_once_for_its_missed_slots_with_its_templates(make_app):
    client = make_app(**FAST).test_client()
    ok(client, "CREATE VIEW mindsdb.stamp AS (SELECT 'none' AS started, 'none' AS previous)")
    start = ago(minutes=10, seconds=30)
    ok(client, "CREATE JOB stamper (ALTER VIEW mindsdb.stamp AS (SELECT "
               "'{{START_DATETIME}}' AS started, '{{PREVIOUS_START_DATETIME}}' AS previous)) "
               f"START '{start}' EVERY minute")
    runs = ended(client, "stamper")
    time.sleep(0.5)  # five more looks of the scheduler: no second run
    runs = history(client, "stamper")
    assert len(runs) == 1, runs
    run = runs[0]
    assert run["outcome"] == "ok" and run["error"] is None, run
    assert run["slot_at"] == datetime.fromisoformat(start).replace(
        tzinfo=UTC).isoformat()  # the first missed slot, run once
    assert run["duration_s"] >= 0
    job = client.get("/api/projects/mindsdb/jobs/stamper").get_json()
    assert datetime.fromisoformat(job["next_run_at"]) > datetime.now(UTC)
    stamp = rows(ok(client, "SELECT * FROM mindsdb.stamp"))[0]
    started = datetime.fromisoformat(run["start_at"]).strftime("%Y-%m-%d %H:%M:%S")
    assert stamp == {"started": started, "previous": started}  # no earlier run
    assert rows(ok(client, "SELECT name, outcome FROM log.jobs_history")) == [
        {"name": "stamper", "outcome": "ok"}]
    metrics = client.get("/metrics").get_data(as_text=True)
    assert 'quarry_job_runs_total{outcome="ok"} 1.0' in metrics
    assert "quarry_job_start_lag_seconds_count 1.0" in metrics


def test_a_job_snapshots_a_query_as_a_file(make_app, tmp_path):
    client = make_app(FILES_DIR=str(tmp_path / "files"), **FAST).test_client()
    # The statement works outside jobs too: a file made from a query's rows.
    ok(client, "CREATE TABLE files.first (SELECT 1 AS a, species AS b, NULL AS c FROM "
               "demo.iris LIMIT 1)")
    taken = sql(client, "CREATE TABLE files.first (SELECT 2 AS a FROM demo.iris)")
    assert taken["error_code"] == ErrorCode.CONFLICT, taken
    ok(client, "CREATE TABLE IF NOT EXISTS files.first (SELECT 2 AS a FROM demo.iris)")
    assert ok(client, "SELECT * FROM files.first")["data"] == [[1, "setosa", None]]
    ok(client, "CREATE JOB snap (CREATE OR REPLACE TABLE files.species (SELECT species, "
               "count(*) AS n FROM demo.iris GROUP BY species ORDER BY species))")
    assert ended(client, "snap")[0]["outcome"] == "ok"
    assert ok(client, "SELECT species, n FROM files.species ORDER BY species")["data"] == [
        ["setosa", 50], ["versicolor", 50], ["virginica", 50]]
    assert "species" in [f["name"] for f in client.get("/api/files/").get_json()]


def test_a_job_without_every_runs_once_and_if_skips_without_rows(make_app):
    client = make_app(**FAST).test_client()
    ok(client, "CREATE JOB once (SELECT 1)")
    ok(client, "CREATE JOB never (SELECT 1) IF (SELECT * FROM demo.iris WHERE 1 = 0)")
    ok(client, "CREATE JOB broken (SELECT * FROM demo.iris WHERE nope = 1)")
    assert ended(client, "once")[0]["outcome"] == "ok"
    assert ended(client, "never")[0]["outcome"] == "skipped"
    failed = ended(client, "broken")[0]
    assert failed["outcome"] == "error" and "nope" in failed["error"], failed
    assert "SELECT * FROM demo.iris WHERE nope = 1" in failed["error"]
    for name in ("once", "never", "broken"):
        assert client.get(f"/api/projects/mindsdb/jobs/{name}").get_json()[
            "next_run_at"] is None
    metrics = client.get("/metrics").get_data(as_text=True)
    assert 'quarry_job_runs_total{outcome="error"} 1.0' in metrics
    assert 'quarry_job_runs_total{outcome="skipped"} 1.0' in metrics


def test_each_slot_runs_once_across_schedulers_sharing_a_store(make_app):
    """Three apps (three schedulers, as three workers or instances) on one store, each
    looking every 20 ms: 24 due jobs, each slot claimed and run by exactly one of them."""
    first = make_app().test_client()
    for n in range(24):
        ok(first, f"CREATE JOB j{n} (SELECT {n}) START '{ago(minutes=3)}' EVERY hour")
    apps = [make_app(JOBS_SCHEDULER=True, JOBS_POLL_S=0.02) for _ in range(3)]
    barrier = threading.Barrier(3)

    def start(app):
        barrier.wait()
        app.test_client().get("/api/status")  # the first request starts its scheduler
    threads = [threading.Thread(target=start, args=(app,)) for app in apps]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    def all_ended():
        runs = rows(ok(first, "SELECT name, end_at FROM log.jobs_history"))
        return len(runs) >= 24 and all(r["end_at"] for r in runs)
    wait_for(all_ended, 60)
    time.sleep(0.3)  # fifteen more looks each
    runs = rows(ok(first, "SELECT name, slot_at, outcome FROM log.jobs_history"))
    assert sorted(r["name"] for r in runs) == sorted(f"j{n}" for n in range(24))
    assert {r["outcome"] for r in runs} == {"ok"}


def test_a_run_longer_than_its_interval_does_not_overlap_itself(make_app):
    client = make_app(SQL_TIMEOUT_S=2, **FAST).test_client()
    # The first slot is 58 s ago, the next one 2 s from now: it comes while the first run
    # (up to its 2 s time limit) is still going, and must wait for it.
    start = (datetime.now(UTC) - timedelta(seconds=58)).strftime("%Y-%m-%d %H:%M:%S")
    ok(client, f"CREATE JOB slow ({FIRST_RUN_ENDLESS}) START '{start}' EVERY minute")
    runs = ended(client, "slow", 2)
    second, first = runs
    assert first["outcome"] == "error" and "time limit" in first["error"].lower(), first
    assert second["outcome"] == "ok", second
    assert datetime.fromisoformat(second["start_at"]) >= \
        datetime.fromisoformat(first["end_at"])
    ok(client, "DROP JOB slow")


# --- rights --------------------------------------------------------------------------------------

def _file_source(path) -> str:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE orders (id INTEGER, qty INTEGER)")
    conn.executemany("INSERT INTO orders VALUES (?, ?)", [(i, i % 5) for i in range(1, 21)])
    conn.commit()
    conn.close()
    return f"sqlite:///{path}"


def test_rights_are_checked_at_creation_and_again_at_each_run(make_auth_app,  # noqa: F811
                                                              tmp_path):
    app = make_auth_app(DATA_SOURCES={"sales": {"url": _file_source(tmp_path / "s.db")}},
                        **FAST)
    client = app.test_client()
    tokens = {}
    with app.app_context():
        auth_service.create_user("root", PASSWORD, admin=True)
        for name in ("alice", "bob"):
            auth_service.create_user(name, PASSWORD)
        for name in ("root", "alice", "bob"):
            tokens[name] = {"Authorization": "Bearer " +
                            auth_service.create_token(name, "t")[1]}
    assert client.post("/api/projects", json={"name": "pa"},
                       headers=tokens["alice"]).status_code == 201
    ok(client, "GRANT viewer ON PROJECT pa TO bob", headers=tokens["alice"])
    # Not granted the source yet: it does not exist for alice.
    body = sql(client, "CREATE JOB pa.j (SELECT count(*) FROM sales.orders) EVERY hour",
               headers=tokens["alice"])
    assert body["type"] == "error" and "sales" in body["error_message"], body
    # A viewer may not create jobs.
    refused = client.post("/api/projects/pa/jobs", json={"job": {"name": "j",
                          "query": "SELECT 1"}}, headers=tokens["bob"])
    assert_problem(refused, 403, "viewer")
    ok(client, "GRANT query ON DATABASE sales TO alice", headers=tokens["root"])
    start = (datetime.now(UTC) - timedelta(seconds=58)).strftime("%Y-%m-%d %H:%M:%S")
    ok(client, f"CREATE JOB pa.j (SELECT count(*) FROM sales.orders) START '{start}' "
               "EVERY minute", headers=tokens["alice"])
    assert client.get("/api/projects/pa/jobs/j", headers=tokens["bob"]).get_json()[
        "created_by"] == "alice"
    first = ended(client, "j", project="pa", headers=tokens["alice"])[0]
    assert first["outcome"] == "ok", first
    # The grant is revoked before the next slot (2 s later): that run fails, recorded.
    ok(client, "REVOKE query ON DATABASE sales FROM alice", headers=tokens["root"])
    runs = ended(client, "j", 2, project="pa", headers=tokens["bob"])
    assert runs[0]["outcome"] == "error" and "sales" in runs[0]["error"], runs[0]
    # The history is the project's: an admin sees it, a user outside the project does not.
    assert len(sql(client, "SELECT * FROM log.jobs_history", headers=tokens["root"])[
        "data"]) == 2
    with app.app_context():
        auth_service.create_user("carol", PASSWORD)
        carol = {"Authorization": "Bearer " + auth_service.create_token("carol", "t")[1]}
    assert sql(client, "SELECT * FROM log.jobs_history", headers=carol)["data"] == []
    assert_problem(client.get("/api/projects/pa/jobs/j/history", headers=carol), 404)
    ok(client, "DROP JOB pa.j", headers=tokens["alice"])


# --- LAST ----------------------------------------------------------------------------------------

def test_last_inserts_only_new_rows_into_a_knowledge_base(make_app, tmp_path):
    path = tmp_path / "docs.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE docs (id INTEGER PRIMARY KEY, body TEXT)")
    conn.executemany("INSERT INTO docs VALUES (?, ?)",
                     [(i, f"document number {i}") for i in range(1, 6)])
    conn.commit()
    app = make_app(DATA_SOURCES={"src": f"sqlite:///{path}"}, KB_DIR=str(tmp_path / "kb"),
                   **FAST)
    client = app.test_client()
    ok(client, "CREATE KNOWLEDGE_BASE mindsdb.kb")
    ok(client, "CREATE KNOWLEDGE_BASE mindsdb.warm")  # loads the embedded model now
    ok(client, "INSERT INTO mindsdb.warm (id, content) VALUES (1, 'warm up')")
    start = (datetime.now(UTC) - timedelta(seconds=56)).strftime("%Y-%m-%d %H:%M:%S")
    ok(client, "CREATE JOB sync (INSERT INTO mindsdb.kb SELECT id, body AS content FROM "
               f"src.docs WHERE id > LAST) START '{start}' EVERY minute")
    assert ended(client, "sync")[-1]["outcome"] == "ok"
    conn.executemany("INSERT INTO docs VALUES (?, ?)",
                     [(i, f"document number {i}") for i in range(6, 9)])
    conn.commit()
    conn.close()
    # The next slot comes 4 s after the first: it reads the three new rows (or, on a machine
    # so slow that it ran before they came, the slot after it does).
    wait_for(lambda: client.get("/api/projects/mindsdb/knowledge_bases/kb").get_json()[
        "documents"] == 8, 90, "the new rows")
    runs = ended(client, "sync", 2)
    assert {r["outcome"] for r in runs} == {"ok"}, runs
    # The audit log counts what each insert read: 5 rows, then only the new ones, each once.
    audit = rows(ok(client, "SELECT target, after FROM quarry.audit WHERE kind = "
                            "'knowledge_base' AND action = 'insert' AND target = 'mindsdb.kb' "
                            "ORDER BY id"))
    counts = [json.loads(a["after"])["rows"] for a in audit]
    assert counts[0] == 5 and sum(counts) == 8, counts
    ok(client, "DROP JOB sync")
