"""gunicorn settings for Quarry: ``gunicorn -c gunicorn.conf.py wsgi:app``.

Values and defaults come from Quarry's settings table (app/config.py, the README's table):
QUARRY_BIND, QUARRY_WORKERS, QUARRY_THREADS, QUARRY_SQL_TIMEOUT_S and QUARRY_LOG_LEVEL in the
environment, or gunicorn's own options on the command line. See docs/deploy.md.
"""

import gc
import json
import logging
import os
import shutil
import sys
import tempfile
from datetime import UTC, datetime

from gunicorn import util as _gunicorn_util

# Prometheus in multiprocess mode: every worker writes its figures to files in this folder
# and a scrape of /metrics (by any worker) adds them up. prometheus_client reads the variable
# when it is first imported, so it is set here, before anything of the app is imported. A
# folder given by the operator is used as it is; otherwise a private one is made per start.
_OWN_METRICS_DIR = not os.environ.get("PROMETHEUS_MULTIPROC_DIR")
_METRICS_DIR = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or tempfile.mkdtemp(
    prefix="quarry-metrics-")
os.environ["PROMETHEUS_MULTIPROC_DIR"] = _METRICS_DIR

from app.config import load_settings  # noqa: E402 - after the variable above, on purpose

_settings = load_settings()


# Behind a reverse proxy on the same host by default; MindsDB's port, so clients need no change.
bind = [_settings["BIND"]]

# Threads, not only processes: a SQL statement holds its thread for up to SQL_TIMEOUT_S, and
# two slow queries must not freeze the API. Processes use the cores (pandas and scikit-learn
# hold the GIL); each one loads the ML stack, so they are not multiplied further.
worker_class = "gthread"
# The app is imported once, in the master, and the workers share those pages (copy-on-write)
# instead of each importing Flask, SQLAlchemy and the SQL parsers again.
preload_app = True
workers = _settings["WORKERS"] or (os.cpu_count() or 1) + 1
threads = _settings["THREADS"]

# A request may legitimately run as long as the SQL time limit; the worker is only declared
# hung well after that. Graceful shutdown (SIGTERM, deploys) waits as long, so running
# requests finish instead of being cut.
timeout = int(_settings["SQL_TIMEOUT_S"]) + 30
graceful_timeout = timeout
keepalive = 5

# Forwarded headers are handled by the app (ProxyFix with QUARRY_PROXY_HOPS) and only there:
# gunicorn would otherwise believe X-Forwarded-Proto from any local client.
forwarded_allow_ips = ""
secure_scheme_headers = {}

# Access log on stdout, error log (and the app's log) on stderr. The access line carries the
# request id and never a header, cookie or body, so no credential can reach it.
accesslog = "-"
errorlog = "-"
loglevel = _settings["LOG_LEVEL"].lower()
# %(h)s is the proxy's address; the client's, as the proxy reports it, follows in quotes.
access_log_format = ('%(h)s "%({x-forwarded-for}i)s" [%({x-request-id}o)s] '
                     '"%(m)s %(U)s %(H)s" %(s)s %(B)s %(M)sms "%(a)s"')


def _problem_error(sock, status_int, reason, mesg):
    """gunicorn's own refusals (a request line or header too long, a malformed request) as the
    same problem document the app answers, instead of gunicorn's HTML page.

    gunicorn answers these before the app sees the request, through ``util.write_error``;
    the workers call it by that name, so replacing it here covers every refusal.
    """
    body = json.dumps({"title": reason, "status": status_int,
                       "detail": mesg or reason,
                       "timestamp": datetime.now(UTC).isoformat()}).encode()
    head = (f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\n"
            f"Content-Type: application/problem+json\r\nContent-Length: {len(body)}\r\n\r\n")
    _gunicorn_util.write_nonblock(sock, head.encode("latin-1") + body)


_gunicorn_util.write_error = _problem_error


def on_starting(server):
    # Figures of an earlier run would be added to this one's: start from an empty folder.
    for name in os.listdir(_METRICS_DIR):
        path = os.path.join(_METRICS_DIR, name)
        if os.path.isfile(path) and name.endswith(".db"):
            os.remove(path)


def child_exit(server, worker):
    # A dead worker's gauges (trainings running, pool connections in use) stop counting;
    # its counters are kept, so totals do not drop when a worker is replaced.
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid, _METRICS_DIR)


def on_exit(server):
    if _OWN_METRICS_DIR:
        shutil.rmtree(_METRICS_DIR, ignore_errors=True)


def when_ready(server):
    # Master, after loading the app and before the first fork: the federation engine's
    # modules when the deployment can federate (QUARRY_FEDERATION_PRELOAD), then
    # scikit-learn and the active models, once, shared by every worker
    # (QUARRY_PRELOAD_ML=false leaves them to the first prediction of each worker; so does
    # a store without active models).
    app = server.app.wsgi()
    # The statement log's writes, compiled once here rather than by each worker's first
    # statement.
    from app.services.audit import EXTENSION_KEY as AUDIT_KEY

    app.extensions[AUDIT_KEY].warm()
    if _settings["FEDERATION_PRELOAD"]:
        from app.services.startup import preload_engine

        with app.app_context():
            if preload_engine():
                app.logger.info("preloaded the federation engine")
    if not _settings["PRELOAD_ML"]:
        return
    from app.services.models import preload_models

    with app.app_context():
        try:
            count = preload_models()
        except Exception:  # a store not migrated yet, or down: workers load on demand
            app.logger.warning("preloading models failed", exc_info=True)
            return
    if count:
        app.logger.info("preloaded scikit-learn and %d model(s)", count)


def pre_fork(server, worker):
    # Objects built by the master stay where they are: the collector would otherwise write
    # to their pages in every worker, un-sharing them (copy-on-write).
    gc.freeze()


def worker_exit(server, worker):
    # A worker that stops (a restart, a deploy) after serving: its jobs' runs are cancelled
    # and record their end, its training finishes, its store connections are closed, its
    # log is flushed, and it ends there. Python's own exit would also wait on every
    # library's threads: a job run's (held the whole graceful_timeout, then killed), and
    # DuckDB's, whose clean-up joined threads that never ended (the console's tests: 60 s
    # a stop).
    if not worker.booted or worker.alive:
        return  # a worker that failed: gunicorn's exit code says how
    app = server.app.wsgi()
    from app.extensions import db
    from app.mindsdb.runs import stop_jobs

    stop_jobs(app, wait_s=min(10.0, graceful_timeout))
    # A training under way here finishes first (gunicorn kills the worker at
    # graceful_timeout); one still queued is dropped, and reads as interrupted.
    trainer = app.extensions.get("quarry.trainer")
    if trainer is not None:
        trainer.shutdown()
    with app.app_context():
        # Every pool the app opened (data sources, vector stores, then the store): their
        # sessions end as a client's should.
        for key, extension in app.extensions.items():
            if key.startswith("quarry.") and callable(getattr(extension, "dispose", None)):
                extension.dispose()
        db.engine.dispose()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def post_fork(server, worker):
    # Connections the master opened while building the app belong to the master; the
    # worker also tunes its allocator (app.after_fork).
    from app import after_fork

    after_fork(server.app.wsgi())
