"""Prometheus metrics: what every floor counts, and the text /metrics answers.

Under gunicorn, each worker is a process of its own: ``prometheus_client`` then runs in its
multiprocess mode, in which every process writes its values to files under
PROMETHEUS_MULTIPROC_DIR and a scrape adds up the files of all of them (gunicorn.conf.py
sets the folder up before the app is imported and marks dead workers in ``child_exit``).
Without that variable (tests, ``flask run``) the metrics live in one registry per app.
The metric objects are built by ``init_metrics`` when the app is created, never at import.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from flask import Flask, current_app
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
    values,
)

EXTENSION_KEY = "quarry.metrics"
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
_LAG_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0)
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass
class Metrics:
    registry: CollectorRegistry
    multiprocess: bool
    requests: Counter
    request_seconds: Histogram
    sql_statements: Counter
    sql_seconds: Histogram
    sql_rows: Counter
    trainings_running: Gauge
    trainings_done: Counter
    pool_in_use: Gauge
    sign_in_failures: Counter
    job_runs: Counter
    job_lag_seconds: Histogram
    # The labelled series in use, by metric and label values: ``labels()`` validates and
    # locks on every call (seven calls a SELECT cost ~0.1 ms), a dictionary read does not.
    _series: dict[tuple[Any, ...], Any] = field(default_factory=dict)

    def series(self, metric: Any, *values: str) -> Any:
        """``metric.labels(*values)``, looked up once."""
        key = (id(metric), *values)
        found = self._series.get(key)
        if found is None:
            found = self._series[key] = metric.labels(*values)
        return found

    def sql_statement(self, source: str, outcome: str, seconds: float, rows: int) -> None:
        self.series(self.sql_statements, source, outcome).inc()
        self.series(self.sql_seconds, source, outcome).observe(seconds)
        if rows:
            self.series(self.sql_rows, source).inc(rows)

    def render(self) -> tuple[bytes, str]:
        """The exposition text of every process (multiprocess) or of this one."""
        if self.multiprocess:
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
            return generate_latest(registry), CONTENT_TYPE_LATEST
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def init_metrics(app: Flask) -> Metrics:
    """Build this app's metric objects into app.extensions."""
    # The folder must have been set before prometheus_client was first imported (it picks
    # its value class then); set later, the values stay in process memory, so read them there.
    shared = bool(os.environ.get(MULTIPROC_ENV)) and values.ValueClass is not values.MutexValue
    registry = CollectorRegistry(auto_describe=True)
    # In multiprocess mode the objects write to files; the per-app registry is not read.
    kw = {"registry": registry}
    metrics = Metrics(
        registry=registry, multiprocess=shared,
        requests=Counter("quarry_http_requests", "HTTP requests by route, method and status",
                         ["route", "method", "status"], **kw),
        request_seconds=Histogram("quarry_http_request_duration_seconds",
                                  "Time to answer an HTTP request", ["route", "method"],
                                  buckets=_LATENCY_BUCKETS, **kw),
        sql_statements=Counter("quarry_sql_statements", "SQL statements by data source "
                               "(empty: none or a service statement) and outcome",
                               ["source", "outcome"], **kw),
        sql_seconds=Histogram("quarry_sql_statement_duration_seconds",
                              "Time to run a SQL statement", ["source", "outcome"],
                              buckets=_LATENCY_BUCKETS, **kw),
        sql_rows=Counter("quarry_sql_rows_returned", "Rows returned by SQL statements",
                         ["source"], **kw),
        trainings_running=Gauge("quarry_trainings_running", "Models being trained now",
                                multiprocess_mode="livesum", **kw),
        trainings_done=Counter("quarry_trainings", "Trainings ended, by outcome",
                               ["outcome"], **kw),
        pool_in_use=Gauge("quarry_source_pool_connections_in_use",
                          "Data-source connections checked out, per source",
                          ["source"], multiprocess_mode="livesum", **kw),
        sign_in_failures=Counter("quarry_sign_in_failures", "Failed sign-ins", **kw),
        job_runs=Counter("quarry_job_runs", "Jobs' runs ended, by outcome (ok, skipped, "
                         "error)", ["outcome"], **kw),
        job_lag_seconds=Histogram("quarry_job_start_lag_seconds", "Time from a job's slot "
                                  "to the start of its run", buckets=_LAG_BUCKETS, **kw),
    )
    app.extensions[EXTENSION_KEY] = metrics
    return metrics


def current_metrics() -> Metrics:
    return current_app.extensions[EXTENSION_KEY]
