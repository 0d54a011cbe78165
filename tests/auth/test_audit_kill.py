"""The audit log against a worker killed outright (issue 20 §2): gunicorn for real, on the
SQLite and PostgreSQL stores, the worker that answered killed with SIGKILL the moment its
answer arrived; the statement's record is in the log afterwards."""

from __future__ import annotations

import json
import os
import signal

import pytest
import requests

from tests.live import quarry_env, serving, wait_for_a_new_worker, workers

pytestmark = pytest.mark.slow


def _kill_the_worker(master: int) -> None:
    (worker,) = workers(master)  # one worker: the one that answered
    os.kill(worker, signal.SIGKILL)


def test_records_survive_the_worker_killed_after_its_answer(store_url, tmp_path, demo_db):
    env = quarry_env(QUARRY_DATABASE_URL=store_url, QUARRY_INSTANCE_PATH=str(tmp_path),
                     QUARRY_DEMO_SOURCE="true", QUARRY_DEMO_PATH=demo_db,
                     QUARRY_WORKERS="1", QUARRY_THREADS="2",
                     QUARRY_LOG_LEVEL="WARNING")
    with serving(env, tmp_path / "logs") as live:
        url, master = live.url, live.process.pid
        sent = []
        for i in range(3):
            query = f"SELECT {i} AS killed_after_answer"
            answer = requests.post(url + "/api/sql/query", json={"query": query}, timeout=30)
            _kill_the_worker(master)
            assert answer.json()["data"] == [[i]]
            sent.append(query)
            wait_for_a_new_worker(url)
        # A stream: the worker killed after its first line came, long before its end.
        streamed = "SELECT * FROM demo.iris"
        with requests.post(url + "/api/sql/query", stream=True, timeout=30,
                           json={"query": streamed, "response_format": "jsonlines"}) as stream:
            header = json.loads(next(stream.iter_lines()))
            _kill_the_worker(master)
        assert header["type"] == "table"
        wait_for_a_new_worker(url)
        records = requests.get(url + "/api/audit", params={"kind": "sql"},
                               timeout=30).json()["records"]
    found = {r["statement"]: r for r in records}
    for query in sent:
        assert (found[query]["row_count"], found[query]["outcome"]) == (1, "ok"), records
    # Recorded before its first byte; whether its end was recorded depends on how far the
    # worker got before the signal.
    assert found[streamed]["outcome"] in ("streaming", "ok"), records
