"""Training on Celery workers: real Redis, real `celery -A wsgi:celery worker` processes.

Each test run uses a queue named after the pytest process (and a Redis database derived from
its pid), so parallel runs do not take each other's tasks.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
import redis
import requests

from app import create_app
from tests.live import BIN, ROOT, flask, quarry_env, serving
from tests.models.conftest import IRIS_SQL, create, wait_for

pytestmark = pytest.mark.slow

REDIS_URL = f"redis://127.0.0.1:6379/{os.getpid() % 14 + 1}"
QUEUE = f"quarry-test-{os.getpid()}"
# Reading these rows takes a few seconds on SQLite: long enough to kill a worker mid-way.
SLOW_IRIS = ("SELECT * FROM demo.iris, (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL "
             "SELECT x + 1 FROM c WHERE x < 2500000) SELECT sum(x % 7) AS s FROM c) AS slow")


@pytest.fixture(scope="module")
def broker() -> str:
    try:
        redis.Redis.from_url(REDIS_URL).ping()
    except redis.ConnectionError:
        pytest.fail("Redis is not running on 127.0.0.1:6379 (.ci/run starts it)")
    return REDIS_URL


@pytest.fixture
def env(tmp_path, broker) -> dict[str, str]:
    """Settings shared by the web app and the workers: one migrated store, one queue."""
    env = quarry_env(QUARRY_DATABASE_URL=f"sqlite:///{tmp_path}/store.db",
                     QUARRY_INSTANCE_PATH=str(tmp_path), QUARRY_CELERY_BROKER_URL=broker,
                     QUARRY_CELERY_QUEUE=QUEUE)
    flask(env, "db", "upgrade")
    return env


@pytest.fixture
def web(env):
    """The web side, in this process, with the broker configured."""
    app = create_app({k[len("QUARRY_"):]: v for k, v in env.items()
                      if k.startswith("QUARRY_")} | {"TESTING": True})
    client = app.test_client()
    client.post("/api/projects", json={"name": "p1"})
    yield app, client
    app.extensions["quarry.trainer"].shutdown()


@contextmanager
def worker(env: dict[str, str], name: str, logs: Path, **settings: str
           ) -> Iterator[subprocess.Popen]:
    """`celery -A wsgi:celery worker` on the test queue (one prefork child), until the end."""
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / f"{name}.log", "w") as out:
        process = subprocess.Popen(
            [str(BIN / "celery"), "-A", "wsgi:celery", "worker", "-Q", QUEUE, "-c", "1",
             "-n", f"{name}-{os.getpid()}@%h", "--without-gossip", "--without-mingle",
             "--loglevel", "INFO"],
            cwd=ROOT, env={**env, **settings}, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while "ready" not in (logs / f"{name}.log").read_text():
            assert process.poll() is None, (logs / f"{name}.log").read_text()
            assert time.monotonic() < deadline, "the worker did not start"
            time.sleep(0.2)
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


def test_a_worker_trains_and_the_web_process_does_not(web, env, tmp_path):
    app, client = web
    with worker(env, "w1", tmp_path):
        response = create(client, "CREATE MODEL p1.m FROM demo (SELECT * FROM iris) "
                                  "PREDICT species")
        assert response.status_code == 201
        assert response.get_json()["status"] == "generating"
        record = wait_for(client, "m", timeout_s=60)
        assert record["status"] == "complete", record
        assert record["attempts"] == 1 and record["accuracy"] > 0.9
        # The worker's identity, not this process's, trained it.
        assert f":{os.getpid()}:" not in record["progress"]["trainer"]
        # join_learn_process waits for the worker's outcome; RETRAIN goes the same way.
        joined = create(client, IRIS_SQL.format(name="j"))
        assert joined.status_code == 201 and joined.get_json()["status"] == "complete"
        retrained = client.post("/api/projects/p1/models/j/retrain",
                                json={"using": {"join_learn_process": True}})
        assert retrained.get_json()["status"] == "complete"
    assert app.extensions["quarry.trainer"]._pool is None  # no training thread ever started
    # A prefork child is a daemon process, where joblib's process pools cannot start:
    # scikit-learn then warned once per estimator fitted. The log holds what matters only.
    log = (tmp_path / "w1.log").read_text()
    assert "model version" in log and "trained" in log, log
    assert "Loky-backed" not in log and "n_jobs=1" not in log, log


def _training_pid(client, name: str) -> int:
    record = wait_for(client, name, statuses=("training",), timeout_s=60)
    assert record["status"] == "training", record
    host, pid, _ = record["progress"]["trainer"].split(":")
    return int(pid)


def test_worker_killed_mid_training_is_retried(web, env, tmp_path):
    _, client = web
    with ExitStack() as stack:
        stack.enter_context(worker(env, "w1", tmp_path))
        stack.enter_context(worker(env, "w2", tmp_path))
        create(client, f"CREATE MODEL p1.k FROM demo ({SLOW_IRIS}) PREDICT species")
        victim = _training_pid(client, "k")
        os.kill(victim, signal.SIGKILL)
        record = wait_for(client, "k", timeout_s=90)
        assert record["status"] == "complete", record
        assert record["attempts"] == 2
        assert f":{victim}:" not in record["progress"]["trainer"]


def test_tries_are_bounded(web, env, tmp_path):
    _, client = web
    with worker(env, "w1", tmp_path, QUARRY_TRAINING_MAX_ATTEMPTS="1"):
        create(client, f"CREATE MODEL p1.g FROM demo ({SLOW_IRIS}) PREDICT species")
        os.kill(_training_pid(client, "g"), signal.SIGKILL)
        record = wait_for(client, "g", timeout_s=60)
    assert record["status"] == "error" and "interrupted" in record["error"], record


def test_two_workers_share_one_queue(web, env, tmp_path):
    _, client = web
    with ExitStack() as stack:
        for name in ("w1", "w2"):
            stack.enter_context(worker(env, name, tmp_path))
        for name in ("a", "b"):
            create(client, f"CREATE MODEL p1.{name} FROM demo ({SLOW_IRIS}) PREDICT species")
        records = [wait_for(client, name, timeout_s=90) for name in ("a", "b")]
    assert [r["status"] for r in records] == ["complete", "complete"], records
    trainers = {r["progress"]["trainer"] for r in records}
    assert len(trainers) == 2  # each worker took one


# 100 000 generated rows (three numbers, a label that depends on two of them), read from the
# demo data source like any training query.
HUNDRED_K = ("SELECT * FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
             "WHERE x < 100000) SELECT x % 97 AS a, (x * 7) % 13 AS b, (x * 31) % 101 AS n, "
             "CASE WHEN (x % 97) + 3 * ((x * 7) % 13) > 70 THEN 'hi' ELSE 'lo' END AS label "
             "FROM c) AS generated")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue  # gone meanwhile
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _family_cpu(pid: int) -> float:
    """CPU seconds of a process and its (living) children."""
    return sum(_cpu_seconds(p) for p in [pid, *_children(pid)])


def test_web_workers_stay_idle_while_a_worker_trains_100k_rows(env, tmp_path):
    """With a broker, gunicorn's workers only enqueue: the CPU of a 100 000-row training is
    spent in the Celery worker's process, and the web workers' CPU time stays flat (they
    answer this test's status polls, nothing more)."""
    with worker(env, "w1", tmp_path / "celery") as celery_worker, \
            serving(env | {"QUARRY_WORKERS": "3"}, tmp_path / "gunicorn") as server:
        deadline = time.monotonic() + 60
        while len(web_workers := _children(server.process.pid)) < 3:
            assert time.monotonic() < deadline, web_workers  # gunicorn forks them in turn
            time.sleep(0.2)
        assert requests.post(server.url + "/api/projects", json={"name": "p1"},
                             timeout=30).status_code == 201
        web_before = sum(_cpu_seconds(p) for p in web_workers)
        celery_before = _family_cpu(celery_worker.pid)
        created = requests.post(server.url + "/api/projects/p1/models", timeout=60, json={
            "query": f"CREATE MODEL p1.big FROM demo ({HUNDRED_K}) PREDICT label "
                     "USING time_budget_s = 5"})
        assert created.status_code == 201 and created.json()["status"] == "generating"
        deadline = time.monotonic() + 600
        while True:
            record = requests.get(server.url + "/api/projects/p1/models/big", timeout=30).json()
            if record["status"] in ("complete", "error") or time.monotonic() > deadline:
                break
            time.sleep(1)
        web_cpu = sum(_cpu_seconds(p) for p in web_workers) - web_before
        celery_cpu = _family_cpu(celery_worker.pid) - celery_before
        assert sorted(_children(server.process.pid)) == sorted(web_workers)  # none replaced
        info = requests.get(server.url + "/api/projects/p1/models/big/describe",
                            timeout=30).json()[0]
    figures = f"web workers {web_cpu:.2f} s CPU, Celery worker {celery_cpu:.2f} s CPU"
    print(f"\n100 000-row training: {figures}")
    assert record["status"] == "complete", record
    assert record["progress"]["rows_read"] == 100_000
    assert info["final_model_rows"] == 100_000  # describe: the rows the stored model saw
    assert 0 < info["evaluation"]["rows_scored"] < 100_000  # held out to measure it
    assert celery_cpu > 3.0, figures  # the training ran there
    assert web_cpu < 0.1 * celery_cpu, figures


def test_a_rabbitmq_broker_works_too(tmp_path):
    """The same worker and task with RabbitMQ (amqp://) as the broker."""
    url = "amqp://guest:guest@127.0.0.1:5672//"
    env = quarry_env(QUARRY_DATABASE_URL=f"sqlite:///{tmp_path}/store.db",
                     QUARRY_INSTANCE_PATH=str(tmp_path), QUARRY_CELERY_BROKER_URL=url,
                     QUARRY_CELERY_QUEUE=QUEUE)
    flask(env, "db", "upgrade")
    app = create_app({k[len("QUARRY_"):]: v for k, v in env.items()
                      if k.startswith("QUARRY_")} | {"TESTING": True})
    client = app.test_client()
    client.post("/api/projects", json={"name": "p1"})
    try:
        with worker(env, "rabbit", tmp_path):
            joined = create(client, IRIS_SQL.format(name="r"))
            assert joined.status_code == 201, joined.get_json()
            record = joined.get_json()
            assert record["status"] == "complete", record
            assert f":{os.getpid()}:" not in record["progress"]["trainer"]
    finally:
        app.extensions["quarry.trainer"].shutdown()
    assert app.extensions["quarry.trainer"]._pool is None  # not trained in this process
