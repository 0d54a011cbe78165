"""With a Celery broker, a claimed slot is a task: real Redis, a real
`celery -A wsgi:celery worker`. The web process claims the slot (the unique row) and sends
the run's id; the worker runs it as the job's creator and records the outcome."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app import create_app
from app.config import load_settings
from tests.jobs.test_jobs import ended, ok
from tests.models.test_celery import QUEUE, broker, store_env, worker  # noqa: F401

pytestmark = pytest.mark.slow


def test_a_celery_worker_runs_the_claimed_slot(tmp_path, sqlite_template, demo_db,
                                               broker):  # noqa: F811 - the fixture
    env = store_env(tmp_path, sqlite_template, demo_db, broker) | {
        "QUARRY_CELERY_QUEUE": QUEUE + "-jobs", "QUARRY_JOBS_POLL_S": "0.1"}
    app = create_app(load_settings(env) | {"TESTING": True})
    client = app.test_client()
    assert client.post("/api/projects", json={"name": "p1"}).status_code == 201
    try:
        with worker(env, "wj", tmp_path):
            start = (datetime.now(UTC) - timedelta(minutes=3)).strftime("%Y-%m-%d %H:%M:%S")
            ok(client, "CREATE JOB p1.viaworker (SELECT count(*) FROM demo.iris) "
                       f"START '{start}' EVERY hour")
            ok(client, "CREATE JOB p1.failing (SELECT nope FROM demo.iris) "
                       f"START '{start}' EVERY hour")
            run = ended(client, "viaworker", project="p1")[0]
            failed = ended(client, "failing", project="p1")[0]
            log = (tmp_path / "wj.log").read_text()
    finally:
        app.extensions["quarry.jobs"].shutdown()
        app.extensions["quarry.trainer"].shutdown()
    assert run["outcome"] == "ok" and run["error"] is None, run
    assert failed["outcome"] == "error" and "nope" in failed["error"], failed
    # The worker ran both (the web process only claimed and sent them).
    assert "job run 1: ok (delivery" in log and "job run 2: error (delivery" in log, log
