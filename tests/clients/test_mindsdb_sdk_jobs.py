"""mindsdb_sdk 3.4.10, unchanged, against a live Quarry (gunicorn, two workers, each with
its jobs' scheduler, sign-in on): project.jobs.create / list / get / drop and
job.get_history(), the slot run once by one of the two workers."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from tests.live import serving_admins

mindsdb_sdk = pytest.importorskip("mindsdb_sdk")

pytestmark = pytest.mark.slow
PASSWORD = "sdk jobs password"


@pytest.fixture(scope="module")
def url(tmp_path_factory, sqlite_template):
    with serving_admins(tmp_path_factory.mktemp("sdk_jobs"), sqlite_template, ("erin",),
                        PASSWORD, QUARRY_JOBS_POLL_S="0.2",
                        QUARRY_PRELOAD_ML="false") as server:
        yield server.url


def test_jobs_end_to_end(url):
    server = mindsdb_sdk.connect(url, login="erin", password=PASSWORD)
    project = server.create_project("sdkjobs")
    start = datetime.now(UTC).replace(tzinfo=None) - timedelta(minutes=5)
    job = project.jobs.create("hourly", "SELECT * FROM demo.iris LIMIT 2; SELECT 1",
                              start_at=start, end_at=start + timedelta(days=1),
                              repeat_str="1 hour")
    assert job.name == "hourly"
    assert job.query_str == "SELECT * FROM demo.iris LIMIT 2; SELECT 1"
    assert job.schedule_str == "every 1 hour"
    with project.jobs.create("later", repeat_min=90,
                             start_at=datetime(2099, 1, 1)) as built:
        built.add_query("SELECT 2")
    assert built.query_str == "SELECT 2" and built.schedule_str == "every 90 minutes"
    assert sorted(j.name for j in project.jobs.list()) == ["hourly", "later"]
    assert project.jobs.get("later").next_run_at is not None

    # Both workers look every 0.2 s; the overdue slot runs once, on one of them.
    deadline = time.monotonic() + 30
    while True:
        runs = job.get_history().rename(columns=str.lower)
        if len(runs) and runs["end_at"].notna().all():
            break
        assert time.monotonic() < deadline, runs
        time.sleep(0.2)
    time.sleep(1.0)
    runs = project.jobs.get("hourly").get_history().rename(columns=str.lower)
    assert len(runs) == 1, runs
    assert runs.iloc[0]["outcome"] == "ok" and runs.iloc[0]["error"] is None
    job.refresh()
    assert datetime.fromisoformat(job.next_run_at) > datetime.now(UTC)

    project.jobs.drop("hourly")
    with pytest.raises(AttributeError):
        project.jobs.get("hourly")
    with pytest.raises(RuntimeError, match="cannot run in a job"):
        project.jobs.create("bad", "UPDATE demo.iris SET species = 'x'")
    assert [j.name for j in project.jobs.list()] == ["later"]
    project.jobs.drop("later")
