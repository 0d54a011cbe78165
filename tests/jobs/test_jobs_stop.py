"""A job's statement runs as a statement of POST /api/sql/query does: listed among the running
statements and stopped by DELETE /api/sql/queries/<id>. A worker that is told to stop
(SIGTERM: a restart, a deploy) while one of its job runs is under way cancels the run's
statement, records the run's end, and exits at once: it used to wait for the run, held past
gunicorn's graceful_timeout and then killed."""

from __future__ import annotations

import sqlite3
import time

import pytest
import requests

from tests.jobs.test_jobs_live import history, until
from tests.live import migrated_sqlite_env, serving
from tests.models.test_failures import SLOW_SELECT

pytestmark = pytest.mark.slow


def test_a_stopping_worker_cancels_its_run_records_it_and_exits(tmp_path, sqlite_template,
                                                              demo_db):
    # The run's statement may take 120 s; gunicorn waits graceful_timeout (150 s) for a
    # worker before it kills it.
    env = migrated_sqlite_env(tmp_path, sqlite_template, QUARRY_DEMO_PATH=demo_db,
                              QUARRY_JOBS_POLL_S="0.1",
                              QUARRY_SQL_TIMEOUT_S="120", QUARRY_PRELOAD_ML="false")
    with serving(env, tmp_path / "logs") as server:
        for job in ("cancelled", "stopped"):
            made = requests.post(f"{server.url}/api/sql/query", timeout=30,
                                 json={"query": f"CREATE JOB {job} ({SLOW_SELECT})"})
            assert made.json()["type"] == "ok", made.json()
            until(lambda job=job: (history(server.url, job) or [{}])[0].get("outcome")
                   == "running")
            if job == "cancelled":
                listed = until(lambda: [q for q in requests.get(
                    f"{server.url}/api/sql/queries", timeout=30).json()
                    if "WITH RECURSIVE" in q["statement"]])
                assert len(listed) == 1, listed
                gone = requests.delete(f"{server.url}/api/sql/queries/{listed[0]['query_id']}",
                                       timeout=30)
                assert gone.status_code in (200, 202, 204), gone.text
                run = until(lambda: (lambda h: h[0] if h[0]["end_at"] else None)(
                    history(server.url, "cancelled")))
                assert run["outcome"] == "error" and "cancelled" in run["error"], run
        time.sleep(0.5)  # the statement is in the database by now
        asked = time.monotonic()
        assert server.stop() == 0
        took = time.monotonic() - asked
    log = (tmp_path / "logs" / "stderr.log").read_text()
    assert "SIGKILL" not in log and "Worker exiting" in log, log
    # Far from the 150 s a worker waiting on its run took (the run itself: 120 s).
    assert took < 60, (took, log)
    with sqlite3.connect(tmp_path / "store.db") as store:
        runs = store.execute("SELECT r.outcome, r.error, r.ended_at FROM job_runs r JOIN "
                             "jobs j ON j.id = r.job_id WHERE j.name = 'stopped'").fetchall()
    store.close()
    assert len(runs) == 1, runs
    outcome, error, ended_at = runs[0]
    assert outcome == "error" and ended_at is not None, runs
    assert "process running it was stopping" in error, error
