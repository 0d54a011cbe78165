"""Training on Celery workers: real Redis, real `celery -A wsgi:celery worker` processes.

Each test run uses a queue named after the pytest process (and a Redis database derived from
its pid), so parallel runs do not take each other's tasks. The tests that need no special
worker setting share one store and two workers (starting a worker costs seconds); each
names its own models. Where the CPU of a large training goes (the web workers stay idle)
is measured by bench/celery_idle.py, not here.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

from app import create_app
from tests.live import BIN, ROOT, quarry_env
from tests.models.conftest import IRIS_SQL, create, wait_for

pytestmark = pytest.mark.slow

REDIS_URL = f"redis://127.0.0.1:6379/{os.getpid() % 14 + 1}"
QUEUE = f"quarry-test-{os.getpid()}"
# Reading these rows takes a few seconds on SQLite: long enough to kill a worker mid-way.
SLOW_IRIS = ("SELECT * FROM demo.iris, (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL "
             "SELECT x + 1 FROM c WHERE x < 2500000) SELECT sum(x % 7) AS s FROM c) AS slow")
# The tests check who trains and how often, not how well: the shortest training budget
# (the default's 6 s of search is CPU each training spends in a worker).
QUICK = "USING time_budget_s = 1"


@pytest.fixture(scope="module")
def broker() -> str:
    try:
        redis.Redis.from_url(REDIS_URL).ping()
    except redis.ConnectionError:
        pytest.fail("Redis is not running on 127.0.0.1:6379 (.ci/run starts it)")
    return REDIS_URL


def store_env(directory: Path, sqlite_template: str, demo_db: str, broker: str
              ) -> dict[str, str]:
    """Settings shared by the web app and the workers: a migrated store (a copy of the
    session's migrated template), the session's demo file (read only; each worker would
    otherwise build one, importing scikit-learn in a child), one queue."""
    shutil.copy(sqlite_template, directory / "store.db")
    return quarry_env(QUARRY_DATABASE_URL=f"sqlite:///{directory}/store.db",
                      QUARRY_INSTANCE_PATH=str(directory), QUARRY_DEMO_PATH=demo_db,
                      QUARRY_CELERY_BROKER_URL=broker, QUARRY_CELERY_QUEUE=QUEUE)


@pytest.fixture(scope="module")
def env(tmp_path_factory, sqlite_template, demo_db, broker) -> dict[str, str]:
    return store_env(tmp_path_factory.mktemp("celery"), sqlite_template, demo_db, broker)


@pytest.fixture(scope="module")
def workers(env, tmp_path_factory) -> Iterator[Path]:
    """Two workers on the shared store and queue, for the tests that take them as they are;
    the folder of their logs."""
    logs = tmp_path_factory.mktemp("celery-logs")
    with worker(env, "w1", logs), worker(env, "w2", logs):
        yield logs


def web_app(env: dict[str, str]):
    """The web side, in this process, with the broker configured; project p1 exists."""
    app = create_app({k[len("QUARRY_"):]: v for k, v in env.items()
                      if k.startswith("QUARRY_")} | {"TESTING": True})
    client = app.test_client()
    client.post("/api/projects", json={"name": "p1"})  # 409 when an earlier test made it
    return app, client


@pytest.fixture
def web(env):
    app, client = web_app(env)
    yield app, client
    app.extensions["quarry.trainer"].shutdown()


@contextmanager
def worker(env: dict[str, str], name: str, logs: Path, **settings: str
           ) -> Iterator[subprocess.Popen]:
    """`celery -A wsgi:celery worker` on ``env``'s queue (one prefork child), until the end."""
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / f"{name}.log", "w") as out:
        process = subprocess.Popen(
            [str(BIN / "celery"), "-A", "wsgi:celery", "worker", "-Q",
             env["QUARRY_CELERY_QUEUE"], "-c", "1",
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


def test_a_worker_trains_and_the_web_process_does_not(web, workers):
    app, client = web
    response = create(client, "CREATE MODEL p1.m FROM demo (SELECT * FROM iris) "
                              f"PREDICT species {QUICK}")
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
    log = "".join((workers / f"{name}.log").read_text() for name in ("w1", "w2"))
    assert "model version" in log and "trained" in log, log
    assert "Loky-backed" not in log and "n_jobs=1" not in log, log


def test_a_worker_trains_a_forecasting_model(web, workers):
    _, client = web
    # The rows of diabetes in their stored order, as one series on integer steps.
    response = create(client, "CREATE MODEL p1.fc FROM demo (SELECT rowid AS n, progression "
                              "FROM diabetes) PREDICT progression ORDER BY n HORIZON 3 "
                              "USING time_budget_s = 5")
    assert response.status_code == 201 and response.get_json()["status"] == "generating"
    record = wait_for(client, "fc", timeout_s=60)
    assert record["status"] == "complete", record
    assert f":{os.getpid()}:" not in record["progress"]["trainer"]
    rows = client.post("/api/projects/p1/models/fc/predict", json={"data": []}).get_json()
    assert [r["n"] for r in rows] == [443, 444, 445]


def _training_pid(client, name: str) -> int:
    record = wait_for(client, name, statuses=("training",), timeout_s=60)
    assert record["status"] == "training", record
    host, pid, _ = record["progress"]["trainer"].split(":")
    return int(pid)


def test_worker_killed_mid_training_is_retried(web, workers):
    _, client = web
    # The shared workers: the killed one's task is taken again by either.
    create(client, f"CREATE MODEL p1.k FROM demo ({SLOW_IRIS}) PREDICT species {QUICK}")
    victim = _training_pid(client, "k")
    os.kill(victim, signal.SIGKILL)
    record = wait_for(client, "k", timeout_s=90)
    assert record["status"] == "complete", record
    assert record["attempts"] == 2
    assert f":{victim}:" not in record["progress"]["trainer"]


def test_tries_are_bounded(tmp_path, sqlite_template, demo_db, broker):
    # A store and queue of its own: no other worker may take the task again.
    env = (store_env(tmp_path, sqlite_template, demo_db, broker)
           | {"QUARRY_CELERY_QUEUE": QUEUE + "-b"})
    app, client = web_app(env)
    with worker(env, "wb", tmp_path, QUARRY_TRAINING_MAX_ATTEMPTS="1"):
        create(client, f"CREATE MODEL p1.g FROM demo ({SLOW_IRIS}) PREDICT species {QUICK}")
        os.kill(_training_pid(client, "g"), signal.SIGKILL)
        record = wait_for(client, "g", timeout_s=60)
    app.extensions["quarry.trainer"].shutdown()
    assert record["status"] == "error" and "interrupted" in record["error"], record


def test_two_workers_share_one_queue(web, workers):
    _, client = web
    # The shared workers, idle: the tests before waited for their trainings.
    for name in ("a", "b"):
        create(client,
               f"CREATE MODEL p1.{name} FROM demo ({SLOW_IRIS}) PREDICT species {QUICK}")
    records = [wait_for(client, name, timeout_s=90) for name in ("a", "b")]
    assert [r["status"] for r in records] == ["complete", "complete"], records
    trainers = {r["progress"]["trainer"] for r in records}
    assert len(trainers) == 2  # each worker took one


def test_a_rabbitmq_broker_works_too(tmp_path, sqlite_template, demo_db):
    """The same worker and task with RabbitMQ (amqp://) as the broker."""
    env = store_env(tmp_path, sqlite_template, demo_db, "amqp://guest:guest@127.0.0.1:5672//")
    app, client = web_app(env)
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
