"""Background training, recovery after a crash, and several processes on one store."""

import os
import signal
import subprocess
import sys
import time
from contextlib import ExitStack
from datetime import timedelta

import pytest
import requests

from app.extensions import db
from app.store import MLModel
from app.store.types import utcnow
from tests.live import quarry_env, serving
from tests.models.conftest import IRIS_SQL, create, wait_for
from tests.models.test_failures import SLOW_SELECT

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_BIN = os.path.dirname(sys.executable)


def test_background_lifecycle(p1):
    response = create(p1, "CREATE MODEL p1.bg FROM demo (SELECT * FROM iris) PREDICT species")
    assert response.status_code == 201
    first = response.get_json()
    assert first["status"] in ("generating", "training") and first["accuracy"] is None
    seen = {first["status"]}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        record = p1.get("/api/projects/p1/models/bg").get_json()
        seen.add(record["status"])
        if record["status"] in ("complete", "error"):
            break
        time.sleep(0.05)
    assert record["status"] == "complete", record
    assert record["accuracy"] >= 0.9 and record["training_time"] > 0
    assert seen <= {"generating", "training", "complete"}
    info = p1.get("/api/projects/p1/models/bg/describe").get_json()[0]
    assert info["accuracies"]["balanced_accuracy_score"] == record["accuracy"]


def test_trainings_queue_behind_one_worker(make_app):
    # TRAINING_WORKERS = 1: the second model waits (generating) while the first trains.
    p1 = make_app(SQL_TIMEOUT_S=5).test_client()
    p1.post("/api/projects", json={"name": "p1"})
    create(p1, f"CREATE MODEL p1.slow FROM demo ({SLOW_SELECT}) PREDICT a")
    wait_for(p1, "slow", statuses=("training",))
    queued = create(p1, "CREATE MODEL p1.next FROM demo (SELECT * FROM iris) PREDICT species")
    assert queued.status_code == 201
    time.sleep(0.5)
    assert p1.get("/api/projects/p1/models/next").get_json()["status"] == "generating"
    assert p1.delete("/api/projects/p1/models/slow").status_code == 204
    assert p1.delete("/api/projects/p1/models/next").status_code == 204


CRASHING_TRAINER = """
import sys, time
from app import create_app
app = create_app({"DATABASE_URL": sys.argv[1], "INSTANCE_PATH": sys.argv[2],
                  "SQL_TIMEOUT_S": 120})
response = app.test_client().post("/api/projects/p1/models", json={"query": sys.argv[3]})
print(response.status_code, flush=True)
time.sleep(300)
"""


def test_model_of_a_killed_process_ends_in_error(make_app, store_url, session_dir):
    client = make_app().test_client()
    client.post("/api/projects", json={"name": "p1"})
    query = f"CREATE MODEL p1.crash FROM demo ({SLOW_SELECT}) PREDICT a"
    child = subprocess.Popen([sys.executable, "-c", CRASHING_TRAINER, store_url, session_dir,
                              query], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "201"
        record = wait_for(client, "crash", statuses=("training",), timeout_s=30)
        assert record["status"] == "training"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
    # A process started afterwards finds the orphan at start-up and says what happened.
    restarted = make_app().test_client()
    record = restarted.get("/api/projects/p1/models/crash").get_json()
    assert record["status"] == "error"
    assert "interrupted" in record["error"] and str(child.pid) in record["error"]


def test_model_whose_heartbeat_stopped_ends_in_error(app, client):
    # Another host's trainer cannot be asked about its pid: only its heartbeat tells.
    client.post("/api/projects", json={"name": "p1"})
    with app.app_context():
        project_id = client.get("/api/projects/p1").get_json()["id"]
        for name, age in (("stale", timedelta(minutes=10)), ("fresh", timedelta(seconds=5))):
            db.session.add(MLModel(
                project_id=project_id, name=name, name_key=name, status="training",
                predict="species", data_source="demo", fetch_data_query="SELECT 1",
                trainer="elsewhere.example:4242:1", heartbeat_at=utcnow() - age))
        db.session.commit()
    statuses = {m["name"]: m for m in client.get("/api/projects/p1/models").get_json()}
    assert statuses["stale"]["status"] == "error" and "elsewhere.example" in \
        statuses["stale"]["error"]
    assert statuses["fresh"]["status"] == "training"


@pytest.mark.slow
def test_train_in_one_process_predict_in_another(make_app, store_url, session_dir, tmp_path):
    if store_url.startswith("sqlite"):
        pytest.skip("processes (and hosts) share a server store; two gunicorns cost ~25 s")
    make_app()  # the store is migrated; the demo file exists
    env = quarry_env(QUARRY_DATABASE_URL=store_url, QUARRY_INSTANCE_PATH=session_dir,
                     QUARRY_WORKERS="1", QUARRY_THREADS="4")
    with ExitStack() as stack:
        trainer, other = (stack.enter_context(serving(env, tmp_path / name)).url
                          for name in ("trainer", "other"))
        assert requests.post(f"{trainer}/api/projects", json={"name": "p1"}).status_code == 201
        created = requests.post(f"{trainer}/api/projects/p1/models",
                                json={"query": IRIS_SQL.format(name="shared")}, timeout=120)
        assert created.status_code == 201 and created.json()["status"] == "complete"
        # The other process has never seen this model: record, describe and artifact all
        # come from the store.
        record = requests.get(f"{other}/api/projects/p1/models/shared").json()
        assert record["accuracy"] == created.json()["accuracy"]
        info = requests.get(f"{other}/api/projects/p1/models/shared/describe").json()
        assert info[0]["outputs"] == ["species"]
        answer = requests.post(f"{other}/api/projects/p1/models/shared/predict", json={
            "data": [{"sepal_length": 7.7, "sepal_width": 3.0, "petal_length": 6.1,
                      "petal_width": 2.3}]}).json()
        assert answer[0]["species"] == "virginica"
        # Deleted through one, gone for the other (no stale cache).
        assert requests.delete(f"{other}/api/projects/p1/models/shared").status_code == 204
        assert requests.post(f"{trainer}/api/projects/p1/models/shared/predict",
                             json={"data": [{}]}).status_code == 404
