"""A worker that dies under a job's run: gunicorn starts another, and at the job's next
slot the unfinished run is ended as an error (its process is gone) and the slot runs."""

from __future__ import annotations

import os
import signal
import time
from datetime import UTC, datetime, timedelta

import pytest
import requests

from tests.jobs.test_jobs import FIRST_RUN_ENDLESS
from tests.live import migrated_sqlite_env, serving, workers

pytestmark = pytest.mark.slow


def history(url: str, job: str = "slow") -> list[dict]:
    """A job's runs, newest first (GET …/jobs/<job>/history)."""
    answer = requests.get(f"{url}/api/projects/mindsdb/jobs/{job}/history", timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def until(check, timeout: float = 60):
    """What ``check()`` returns once it is truthy, asked every 0.1 s for ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)
    return found


def test_a_run_left_by_a_dead_worker_is_ended_and_the_next_slot_runs(tmp_path,
                                                                     sqlite_template,
                                                                     demo_db):
    env = migrated_sqlite_env(tmp_path, sqlite_template, QUARRY_DEMO_PATH=demo_db,
                              QUARRY_JOBS_POLL_S="0.1",
                              QUARRY_SQL_TIMEOUT_S="20", QUARRY_PRELOAD_ML="false")
    with serving(env, tmp_path / "logs") as server:
        # The first slot 57 s ago, the next one 3 s from now. The first run is endless and
        # dies with its worker; the next one ends at once (an endless one would hold the
        # server's graceful stop, which waits for the runs under way, for its time limit).
        start = (datetime.now(UTC) - timedelta(seconds=57)).strftime("%Y-%m-%d %H:%M:%S")
        made = requests.post(f"{server.url}/api/sql/query", timeout=30, json={
            "query": f"CREATE JOB slow ({FIRST_RUN_ENDLESS}) START '{start}' EVERY minute"})
        assert made.json()["type"] == "ok", made.json()
        until(lambda: [r for r in history(server.url) if r["outcome"] == "running"])
        for pid in workers(server.process.pid):
            os.kill(pid, signal.SIGKILL)  # the run's process dies under it
        runs = until(lambda: (lambda h: h if len(h) == 2 and h[0]["end_at"] else None)(
            history(server.url)))
        second, first = runs
        assert first["outcome"] == "error" and "did not finish" in first["error"], first
        assert second["slot_at"] > first["slot_at"], runs
        assert second["outcome"] == "ok" and second["error"] is None, second
        requests.post(f"{server.url}/api/sql/query", timeout=30,
                      json={"query": "DROP JOB slow"})
