"""The Celery app and its tasks: training a model version, and running a job's slot.

Used only when ``QUARRY_CELERY_BROKER_URL`` is set; otherwise models train on the web
process's trainer threads (``services/trainer.py``). Run workers with
``celery -A wsgi:celery worker -Q <QUARRY_CELERY_QUEUE>`` on any host that reaches the store
and the data sources. The tasks are thin wrappers: the claim, the tries and the training are
``services.training.run_queued``; a job's run is ``mindsdb.runs.run_job`` (its slot was
claimed in the store by a web process's scheduler before the task was sent).
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Celery, Task
from flask import Flask

from .extensions import db
from .mindsdb.runs import RUN_JOB_TASK, run_job
from .services.trainer import TRAIN_TASK
from .services.training import run_queued

log = logging.getLogger(__name__)


def celery_for(app: Flask) -> Celery:
    """The Celery app bound to ``app``, made on first call when ``create_app`` made none
    (no broker configured): what ``celery -A wsgi:celery`` runs."""
    return app.extensions.get("quarry.celery_app") or init_celery(app)


def init_celery(app: Flask) -> Celery:
    """The Celery app bound to ``app`` (kept on ``app.extensions["quarry.celery"]`` when a
    broker is configured, so the services enqueue there)."""
    broker = app.config["CELERY_BROKER_URL"]
    celery = Celery("quarry", broker=broker or "memory://", set_as_current=False)
    celery.conf.update(
        task_default_queue=app.config["CELERY_QUEUE"],
        # Acknowledge after the task ran, and give the message back when the worker process
        # died under it (kill -9, out of memory): another worker then takes it. Tries are
        # counted in the store (run_queued), so a task that kills its worker stops there.
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,  # a long task does not hold others back on its worker
        task_ignore_result=True,
        broker_connection_retry_on_startup=True,
        broker_transport_options={"visibility_timeout":
                                  app.config["CELERY_VISIBILITY_TIMEOUT_S"]},
        worker_hijack_root_logger=False,
    )

    class AppTask(Task):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            with app.app_context():
                try:
                    return self.run(*args, **kwargs)
                finally:
                    db.session.remove()

    celery.Task = AppTask

    @celery.task(name=TRAIN_TASK, bind=True)
    def train_model(task: Task, model_id: int) -> str:
        """Claim and train one model version (ids, not objects: any worker, any host)."""
        trainer = app.extensions["quarry.trainer"]
        outcome = trainer.run_here(model_id, run_queued)
        log.info("model version %s: %s (delivery %s)", model_id, outcome, task.request.id)
        return outcome

    @celery.task(name=RUN_JOB_TASK, bind=True)
    def run_job_task(task: Task, run_id: int) -> str:
        """Run one slot of a job, claimed by a web process's scheduler (services/jobs.py)."""
        outcome = run_job(run_id)
        log.info("job run %s: %s (delivery %s)", run_id, outcome, task.request.id)
        return outcome

    app.extensions["quarry.celery_app"] = celery
    if broker:
        app.extensions["quarry.celery"] = celery
    return celery
