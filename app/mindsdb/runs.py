"""The jobs' scheduler of one process, and a job's run.

Every web process may run a ``JobScheduler`` (QUARRY_JOBS_SCHEDULER): a thread that looks
for due jobs every JOBS_POLL_S and claims their slots in the store (``services/jobs.py``:
an insert that only one process can win). A won slot runs on a job thread of this process
(at most JOBS_THREADS at once) or, when a Celery broker is set, is sent to a Celery worker as a
task holding the run's id. It starts with the first request of a process, or when gunicorn forks the
worker (``after_fork``): never in the master, which forks it.

A process that stops (gunicorn's ``worker_exit``: a restart, a deploy) stops looking,
cancels the statements its runs have under way and waits a few seconds for them to record
their end (an error saying the process stopped); the job threads are daemons, so a run that
does not end by then (a training) never holds the process past that: its run is ended as an
error at the job's next slot, as for a process that died.

A run executes each statement through ``execute_sql``, the one entry of POST
/api/sql/query, in a request context whose caller is the job's creator with the rights the
store holds for it now: a right revoked since the job was made fails that run, and the
failure is in the job's history.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from flask import Flask, current_app
from mindsdb_sql_parser.ast import BinaryOperation, Constant, Function, Identifier, Select
from sqlalchemy.exc import SQLAlchemyError

from ..errors import QuarryError
from ..extensions import db
from ..services import access
from ..services import jobs as job_service
from ..services.queries import running
from ..services.trainer import this_process
from ..sql.errors import SqlError
from ..sql.running import SHUTDOWN
from ..telemetry import current_metrics
from .context import Context
from .jobs import all_last_terms, check_statement, split_statements, stored, with_times
from .parser import NotParsed, parse_sql_cached
from .queries import run_query

log = logging.getLogger(__name__)
EXTENSION_KEY = "quarry.jobs"
RUN_JOB_TASK = "quarry.run_job"  # the Celery task's name (app/tasks.py)


class JobFailed(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class JobScheduler:
    """Looks for due jobs every ``JOBS_POLL_S`` and runs (or queues) the slots it wins."""

    def __init__(self, app: Flask) -> None:
        self._app = app
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid: int | None = None
        self._runs: dict[int, threading.Thread] = {}  # run id -> the job thread running it
        self._stop = threading.Event()
        self._wake = threading.Event()   # a job thread came free after a full look
        self._threads = max(1, app.config["JOBS_THREADS"])
        self._running = 0                # runs claimed here and not ended yet
        self._full = False               # the last look filled every job thread

    def ensure_started(self) -> None:
        """Start this process's thread once (again in a forked child, whose parent's
        thread did not come along)."""
        if self._pid == os.getpid() or not self._app.config["JOBS_SCHEDULER"]:
            return
        with self._lock:
            if self._pid == os.getpid() or self._stop.is_set():
                return
            self._pid = os.getpid()
            self._runs = {}
            self._thread = threading.Thread(target=self._loop, name="quarry-job-scheduler",
                                            daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        poll = self._app.config["JOBS_POLL_S"]
        while not self._stop.is_set():
            try:
                self.look()
            except SQLAlchemyError:
                log.warning("jobs: looking for due jobs failed", exc_info=True)
            # Every JOBS_POLL_S; sooner when the last look took all the job threads could
            # and one has come free (more slots may be due, which other processes left).
            self._wake.wait(poll)
            self._wake.clear()

    def look(self) -> int:
        """Claim due slots, run them here or send them to Celery; how many were won.

        Without a broker a process claims no more slots than it has free job threads: the
        other processes (which look at other moments) take the rest, so a slot shared by
        many jobs starts on every worker at once instead of queueing behind one."""
        with self._app.app_context():
            try:
                celery = self._app.extensions.get("quarry.celery")
                with self._lock:
                    free = self._threads - self._running
                limit = None if celery is not None else free
                if limit == 0:
                    self._full = True
                    return 0
                claimed = job_service.claim_due(this_process(), queued=celery is not None,
                                                limit=limit)
            finally:
                db.session.remove()
            self._full = limit is not None and len(claimed) >= limit
            for claim in claimed:
                if celery is not None:
                    celery.send_task(RUN_JOB_TASK, args=[claim.run_id])
                elif not self._stop.is_set():
                    # A daemon thread per run (at most JOBS_THREADS: the claims are capped
                    # by the free ones): a process that stops never waits on one for long.
                    thread = threading.Thread(target=self._run, args=(claim.run_id,),
                                              name=f"quarry-job-{claim.run_id}", daemon=True)
                    with self._lock:
                        self._running += 1
                        self._runs[claim.run_id] = thread
                    thread.start()
        return len(claimed)

    def _run(self, run_id: int) -> None:
        with self._app.app_context():
            try:
                run_job(run_id)
            except Exception:  # noqa: BLE001 - a thread's last word: the store is down
                log.exception("jobs: run %s could not be recorded", run_id)
            finally:
                db.session.remove()
                with self._lock:
                    self._running -= 1
                    self._runs.pop(run_id, None)
                if self._full:
                    self._wake.set()

    def shutdown(self, wait_s: float = 30.0) -> None:
        """Stop looking; cancel the statements of the runs under way (each run records its
        end as an error saying so) and wait up to ``wait_s`` for them to end."""
        self._stop.set()
        self._wake.set()
        deadline = time.monotonic() + wait_s
        with self._lock:
            runs = list(self._runs.values())
        if runs:
            with self._app.app_context():
                running().cancel_in_threads({t.ident for t in runs}, SHUTDOWN)
        thread = self._thread
        for waited in (thread, *runs):
            if waited is not None and waited is not threading.current_thread():
                waited.join(timeout=max(0.0, deadline - time.monotonic()))


def init_jobs(app: Flask) -> None:
    scheduler = app.extensions[EXTENSION_KEY] = JobScheduler(app)
    app.before_request(scheduler.ensure_started)


def stop_jobs(app: Flask, wait_s: float) -> None:
    """In a gunicorn worker that is exiting: its runs are cancelled, and it exits within
    about ``wait_s`` whatever they do."""
    scheduler = app.extensions.get(EXTENSION_KEY)
    if scheduler is not None:
        scheduler.shutdown(wait_s)


def start_jobs(app: Flask) -> None:
    """In a gunicorn worker just forked: start its scheduler without waiting for a request."""
    scheduler = app.extensions.get(EXTENSION_KEY)
    if scheduler is not None:
        scheduler.ensure_started()


# --- a run -----------------------------------------------------------------------------------

def run_job(run_id: int) -> str:
    """Run one claimed slot (in an app context); its outcome."""
    plan = job_service.start_run(run_id, this_process())
    if plan is None:
        return "gone"
    metrics = current_metrics()
    metrics.job_lag_seconds.observe(max(0.0, (plan.started_at - plan.slot_at).total_seconds()))
    outcome, error, last_values = "error", None, None
    try:
        with current_app.test_request_context("/api/sql/query", method="POST"):
            access.set_actor(access.actor_of(plan.creator_id, plan.created_by,
                                             plan.creator_scope))
            outcome, last_values = _statements(plan)
    except JobFailed as exc:
        error = exc.message
    except QuarryError as exc:
        error = f"{exc.title}: {exc.detail}"
    except SqlError as exc:
        error = exc.message
    except Exception as exc:  # noqa: BLE001 - recorded as the run's error, not lost
        log.exception("job %s.%s: run %s failed", plan.project, plan.job, run_id)
        error = f"The run failed inside Quarry ({type(exc).__name__}); see its log"
    db.session.rollback()
    job_service.finish_run(run_id, outcome, error, last_values)
    metrics.series(metrics.job_runs, outcome).inc()
    log.info("job %s.%s slot %s: %s", plan.project, plan.job, plan.slot_at, outcome)
    return outcome


def _statements(plan: job_service.RunPlan) -> tuple[str, dict[str, Any]]:
    start = plan.started_at.strftime(job_service.TIME_FORMAT)
    previous = (plan.previous_start or plan.started_at).strftime(job_service.TIME_FORMAT)
    if plan.if_query:
        answer = _execute(with_times(plan.if_query, start, previous), plan.project)
        if not answer.get("data"):
            return "skipped", {}
    ctx = Context(db=plan.project, registry=access.queryable_sources())
    last_values: dict[str, Any] = {}
    for text in split_statements(with_times(plan.query, start, previous)):
        try:
            check_statement(text, ctx)  # again: with the creator's rights of today
        except QuarryError as exc:
            raise JobFailed(f"{_shown(text)}: {exc.detail}") from None
        _execute(_reading_new_rows(text, plan, last_values), plan.project)
    return "ok", last_values


def _reading_new_rows(text: str, plan: job_service.RunPlan,
                      last_values: dict[str, Any]) -> str:
    """The statement with each ``column > LAST`` made ``column > <last run's largest>
    AND column <= <largest now>`` (the first run: ``column <= <largest now>``), so that a
    row is read by exactly one run even while rows arrive; the largest values kept."""
    try:
        tree = parse_sql_cached(text)  # a fresh copy: rewritten here
    except NotParsed:
        return text  # a read in a source's own dialect: no LAST there
    terms = all_last_terms(tree)
    if not terms:
        return text
    for term in terms:
        biggest = Select(targets=[Function("max", args=[Identifier(parts=[
            term.column.parts[-1]])], alias=Identifier("last_value"))],
            from_table=Identifier(parts=list(term.table.parts)))
        answer = _execute(biggest.to_string(), plan.project)
        top = stored(answer["data"][0][0]) if answer.get("data") else None
        before = plan.last_values.get(term.key)
        column = term.column
        if top is None:
            # An empty table: nothing to read, and nothing learnt.
            term.node.op, term.node.args = "=", [Constant(1), Constant(0)]
            continue
        upper = BinaryOperation("<=", args=[column, Constant(top)])
        if before is None:
            term.node.op, term.node.args = upper.op, upper.args
        else:
            lower = BinaryOperation(term.node.op, args=[column, Constant(before)])
            term.node.op, term.node.args = "and", [lower, upper]
        last_values[term.key] = top
    return tree.to_string()


def _execute(text: str, project: str) -> dict[str, Any]:
    # As POST /api/sql/query runs it: listed among the running statements (GET
    # /api/sql/queries), under the time limit, cancellable by DELETE and by a stopping process.
    answer = run_query(text, project, None, timeout_s=None, response_format="json",
                       user=access.actor_name()).body or {}
    if answer.get("type") == "error":
        raise JobFailed(f"{_shown(text)}: {answer.get('error_message')}")
    return answer


def _shown(text: str) -> str:
    shown = " ".join(text.split())
    return shown if len(shown) <= 200 else shown[:197] + "..."

