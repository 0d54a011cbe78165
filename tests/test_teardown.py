"""An app's teardown stops the threads that use its store before the store's pool is closed.

A thread still polling when the pool was disposed checked its connection back into the
closed pool, where it stayed open until garbage collection closed it — a ResourceWarning,
an error under ``filterwarnings = error``, in whichever later test happened to run then.
"""

from __future__ import annotations

import threading
import time

from sqlalchemy import event

from app.extensions import db
from app.services.queries import POLL_S
from app.sql.errors import ErrorCode
from tests.conftest import _dispose
from tests.models.test_failures import SLOW_SELECT


def test_teardown_stops_the_running_statements_watcher(make_app):
    app = make_app(SQL_TIMEOUT_S=1)
    with app.app_context():
        engine = db.engine
    by_watcher: list[float] = []

    def checkout(*_args) -> None:
        if threading.current_thread().name == "quarry-query-watcher":
            by_watcher.append(time.monotonic())

    event.listen(engine, "checkout", checkout)
    answers: list = []
    running = threading.Thread(target=lambda: answers.append(app.test_client().post(
        "/api/sql/query", json={"query": SLOW_SELECT, "context": {"db": "demo"}})))
    running.start()
    try:
        # The watcher registers the statement in the store once it has run REGISTER_AFTER_S.
        deadline = time.monotonic() + 5
        while not app.test_client().get("/api/sql/queries").get_json():
            assert time.monotonic() < deadline, "the statement was never registered"
            time.sleep(0.05)
        assert by_watcher, "the watcher did not use the store"
        _dispose(app)  # what make_app does after each test
        stopped = time.monotonic()
        time.sleep(3 * POLL_S)  # the statement is still running: a live watcher would poll
        assert [t for t in by_watcher if t > stopped] == []
    finally:
        running.join(timeout=10)
        event.remove(engine, "checkout", checkout)
    assert answers[0].get_json()["error_code"] == ErrorCode.TIME_LIMIT, answers[0].get_json()
