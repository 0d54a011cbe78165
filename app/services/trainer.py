"""The background trainer of one process: a bounded thread pool, a heartbeat, a liveness test.

Built in ``create_app`` (``app.extensions["quarry.trainer"]``); threads start on first use,
so a gunicorn master that imports the app before forking starts none. Every model this
process has queued or is training carries its trainer identity
(``host:pid:process-start-time``) and a heartbeat refreshed every ``HEARTBEAT_S``. Any
process can then tell a model whose trainer died — the pid is gone on this host, or the
heartbeat stopped — and mark it ``error`` instead of leaving it ``training`` forever.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

from flask import Flask, current_app
from sqlalchemy import select, update
from sqlalchemy.exc import SQLAlchemyError

from ..extensions import db
from ..lru import LruCache
from ..store import MLModel
from ..store.types import utcnow

log = logging.getLogger(__name__)

HEARTBEAT_S = 10.0
# A heartbeat older than this means the trainer is gone (another host, a hung process).
STALE_AFTER = timedelta(seconds=90)
MODEL_CACHE_SIZE = 32
PENDING = ("generating", "training")  # a model's statuses before it is complete or error
# The trainer of a version waiting in the Celery queue: no process owns it yet, and the
# broker (not a heartbeat) keeps it; a worker's claim replaces the marker with its name.
QUEUED = "celery:queued"
TRAIN_TASK = "quarry.train_model"  # the Celery task's name (app/tasks.py)


def _process_start(pid: int) -> str | None:
    """The start time of a process (clock ticks since boot), so a reused pid is told apart."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # fields[0] is the state (field 3 of stat); starttime is field 22.
    return None if fields[0] in ("Z", "X") else fields[19]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def this_process() -> str:
    """This process's trainer identity, computed when asked (after any fork)."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_process_start(pid) or '?'}"


def trainer_alive(trainer: str | None, heartbeat_at: datetime | None,
                  now: datetime | None = None) -> bool:
    """Whether the process named ``trainer`` may still be training a model."""
    now = now or utcnow()
    if heartbeat_at is None or now - heartbeat_at > STALE_AFTER:
        return False
    if not trainer:
        return False
    host, _, rest = trainer.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return True  # another host: only its heartbeat can tell
    pid = int(pid_text)
    if not _pid_alive(pid):
        return False
    current = _process_start(pid)
    return current is None or start in ("?", current)


class Trainer:
    """Runs training jobs off the request thread, at most ``workers`` at a time."""

    def __init__(self, app: Flask, workers: int) -> None:
        self._app = app
        self._workers = max(1, workers)
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._heart: threading.Thread | None = None
        self._stop = threading.Event()
        self._active: set[int] = set()

    @property
    def ident(self) -> str:
        return this_process()

    def run_here(self, model_id: int, job: Callable[[int, str], Any]) -> Any:
        """Run ``job(model_id, trainer_ident)`` on this thread (a Celery worker's task),
        with this process's heartbeat kept for it meanwhile."""
        with self._lock:
            self._start_heart()
            self._active.add(model_id)
        try:
            return job(model_id, self.ident)
        finally:
            with self._lock:
                self._active.discard(model_id)

    def _start_heart(self) -> None:
        if self._heart is None:
            self._heart = threading.Thread(target=self._beat, name="quarry-heartbeat",
                                           daemon=True)
            self._heart.start()

    def submit(self, model_id: int, job: Callable[[int, str], Any]) -> Future:
        """Queue ``job(model_id, trainer_ident)``; it runs in an app context of its own."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self._workers,
                                                thread_name_prefix="quarry-trainer")
            self._start_heart()
            self._active.add(model_id)
            return self._pool.submit(self._run, model_id, job)

    def _run(self, model_id: int, job: Callable[[int, str], Any]) -> Any:
        try:
            with self._app.app_context():
                try:
                    return job(model_id, self.ident)
                finally:
                    db.session.remove()
        finally:
            with self._lock:
                self._active.discard(model_id)

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            with self._lock:
                active = list(self._active)
            if not active:
                continue
            try:
                with self._app.app_context():
                    db.session.execute(
                        update(MLModel)
                        .where(MLModel.id.in_(active), MLModel.trainer == self.ident)
                        .values(heartbeat_at=utcnow()))
                    db.session.commit()
                    db.session.remove()
            except SQLAlchemyError:
                # The store may be briefly down; the next beat tries again.
                log.warning("trainer heartbeat failed", exc_info=True)

    def shutdown(self) -> None:
        """Stop the heartbeat, drop queued jobs and wait for the running ones (and for a beat
        under way: its store connection goes back to the pool before the pool is closed)."""
        self._stop.set()
        with self._lock:
            pool, self._pool = self._pool, None
            heart = self._heart
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        if heart is not None:
            heart.join(timeout=10)


def recover_orphans(models: list[MLModel] | None = None) -> int:
    """Deal with every pending model whose trainer process is gone; returns how many.

    Without a task queue (no Celery broker) such a model is marked error. With one, a
    version under ``TRAINING_MAX_ATTEMPTS`` tries goes back to the queue (the claim in
    ``training.run_queued`` counts the tries), so another worker trains it.
    """
    if models is None:
        models = list(db.session.scalars(select(MLModel).where(MLModel.status.in_(PENDING))))
    now = utcnow()
    dead = [m for m in models
            if m.status in PENDING and m.trainer != QUEUED
            and not trainer_alive(m.trainer, m.heartbeat_at, now)]
    celery = current_app.extensions.get("quarry.celery")
    requeued = []
    for model in dead:
        owned = (MLModel.id == model.id, MLModel.status.in_(PENDING),
                 MLModel.trainer.is_(None) if model.trainer is None
                 else MLModel.trainer == model.trainer)
        if celery is not None:
            # The claim (training.run_queued) decides whether tries are left.
            if db.session.execute(update(MLModel).where(*owned).values(
                    status="generating", trainer=QUEUED, updated_at=now)).rowcount:
                requeued.append(model.id)
            continue
        db.session.execute(
            update(MLModel).where(*owned)
            .values(status="error", trainer=None, heartbeat_at=None, updated_at=now,
                    error=f"Training was interrupted: the process training the model "
                          f"({model.trainer or 'unknown'}) stopped before it finished. "
                          "RETRAIN the model, or drop it and create it again."))
    if dead:
        db.session.commit()
        for model_id in requeued:
            celery.send_task(TRAIN_TASK, args=[model_id])
        for model in dead:
            db.session.refresh(model)
    return len(dead)


def init_trainer(app: Flask) -> None:
    """Build this app's trainer, and its cache of unpacked artifacts: model id ->
    (the model's updated_at when unpacked, the loaded model)."""
    app.extensions["quarry.trainer"] = Trainer(app, app.config["TRAINING_WORKERS"])
    app.extensions["quarry.model_cache"] = LruCache(MODEL_CACHE_SIZE)
