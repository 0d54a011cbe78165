"""schemathesis against /api/openapi.json, in-process on the WSGI app, with every check.

The OpenAPI document is a promise: a request it calls valid is never refused for its shape
(400), every answer has a documented status, content type and body, and a request it calls
invalid is refused. schemathesis generates requests from the document (examples, boundary
values of each schema, random positive and negative data, and chains of calls that follow
the document's links) and checks each answer: no 5xx, status code, content type, headers
and body conformance, positive data accepted, negative data rejected, unsupported methods
answered 405 with Allow, deleted objects gone, created objects readable.

The run uses schemathesis' engine, the one its CLI drives (``schemathesis run``), so the
phases and checks are those of ``--checks all``; its pytest plugin cannot run under the
pytest this suite uses. The seed is fixed and the generation deterministic, so a run is
repeatable; the number of examples per operation bounds its length.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

import pytest
import schemathesis
from schemathesis.engine import StopReason, events, from_schema

from app import create_app
from app.config import load_settings
from app.extensions import db
from app.services import auth as auth_service
from app.sql.errors import SqlError
from tests.live import quarry_env, serving

pytestmark = [
    pytest.mark.slow,
    # Hypothesis' note that it printed a large generated value (under -W error, a failure).
    pytest.mark.filterwarnings("ignore:Generating overly large repr"),
]

# Longest a run may take before it is stopped and counted as a failure (the cap catches a
# run that went astray, e.g. shrinking a failure at length); each run is bounded by its
# --max-examples and --max-time as well (``config``).
TIME_CAP_S = 240

# Statuses that answer a request of the documented shape: 422 is the service refusing
# what the request asks (SQL that is no CREATE MODEL statement, rows the model cannot
# read), never its shape; 404 and 409 depend on what the store holds.
ACCEPTED = ["2xx", "401", "403", "404", "409", "422", "429"]


# NUL characters are generated too. The document forbids them in every string and key of a
# request body (app/api/openapi.py, TEXT_PATTERN), but the generator does not apply
# ``propertyNames`` to the keys of free-form objects, so it calls a key with a NUL valid:
# the service answers such a body 422 (a value it cannot keep), one of ACCEPTED.
def config(*, examples: int, coverage: bool, max_time: int = 60, allow_nul: bool = True,
           headers: dict[str, str] | None = None) -> schemathesis.Config:
    return schemathesis.Config.from_dict({
        "headers": headers or {},
        "seed": 20261123,
        "max-time": max_time,  # the CLI's --max-time: stop generating after this many seconds
        "cache": {"enabled": False},  # no replay of earlier runs' failures: the same run each time
        "generation": {
            "max-examples": examples,
            "deterministic": True,
            "database": "none",  # nothing written to .hypothesis/
            "allow-x00": allow_nul,
        },
        "checks": {"positive_data_acceptance": {"expected-statuses": ACCEPTED}},
        "phases": {"coverage": {"enabled": coverage}},
    })


@dataclass
class Run:
    operations: set[str] = field(default_factory=set)
    cases: Counter = field(default_factory=Counter)  # per phase
    checks: Counter = field(default_factory=Counter)  # per check name
    statuses: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    cut_streams: int = 0  # CSV/Arrow answers cut by a SQL error after their first bytes
    stop_reason: StopReason | None = None
    seconds: float = 0.0

    def summary(self) -> str:
        return (f"{len(self.operations)} operations, {sum(self.cases.values())} requests "
                f"({dict(self.cases)}), {sum(self.checks.values())} checks "
                f"({len(self.checks)} kinds), statuses {dict(sorted(self.statuses.items()))}, "
                f"{len(self.failures)} failures, {self.cut_streams} cut streams, "
                f"{self.seconds:.0f} s")


def run_schemathesis(app, cfg: schemathesis.Config) -> Run:
    return run_engine(schemathesis.openapi.from_wsgi("/api/openapi.json", app, config=cfg))


def run_engine(schema: schemathesis.BaseSchema) -> Run:
    run = Run()
    started = time.monotonic()
    stream = from_schema(schema).execute()
    for event in stream:
        if isinstance(event, events.ScenarioFinished):
            _record(run, event)
        elif isinstance(event, events.NonFatalError):
            if isinstance(event.value, SqlError) and event.label == "POST /api/sql/query":
                # A CSV or Arrow stream has no place for an error once its first bytes are
                # out: the server cuts the connection (docs/sql.md, "Complete or cut"). In
                # process, that cut reaches the caller as the SqlError itself.
                run.cut_streams += 1
            else:
                run.errors.append(f"{event.label}: {event.value!r}")
        elif isinstance(event, events.FatalError):
            run.errors.append(f"fatal: {event.exception!r}")
        elif isinstance(event, events.EngineFinished):
            run.stop_reason = event.stop_reason
        if time.monotonic() - started > TIME_CAP_S:
            stream.stop()
    run.seconds = time.monotonic() - started
    return run


def _record(run: Run, event: events.ScenarioFinished) -> None:
    recorder = event.recorder
    run.cases[event.phase.value] += len(recorder.cases)
    for case_id, node in recorder.cases.items():
        operation = node.value.operation
        run.operations.add(f"{operation.method.upper()} {operation.path}")
        interaction = recorder.interactions.get(case_id)
        if interaction is not None and interaction.response is not None:
            run.statuses[interaction.response.status_code] += 1
    for checks in recorder.checks.values():
        for check in checks:
            run.checks[check.name] += 1
            if check.failure_info is not None:
                failure = check.failure_info.failure
                run.failures.append(f"[{event.phase.value}] {check.name}: {failure.title}\n"
                                    f"  {failure.message}\n  {check.failure_info.code_sample}")


def documented_operations(app) -> set[str]:
    spec = app.test_client().get("/api/openapi.json").get_json()
    return {f"{method.upper()} {path}" for path, item in spec["paths"].items()
            for method in item if method in {"get", "put", "post", "delete", "patch"}}


# SQLite gets the full run; PostgreSQL a lighter one, for what differs there (column
# lengths, JSON, text types; NUL characters, which its text type cannot hold). On a quiet
# machine the SQLite run reached every operation well within its 60 s with 4 examples (at a
# load average of 15 it reached 47 of 81); under `make test` on 2 cores it ran its whole
# 60 s (74 s with its checks), the suite's longest test: 3 examples, 45 s. The PostgreSQL
# run with 2 examples in 20 s reached 66 of the operations on a machine 2.5 times slower
# than usual: one example each, in at most 30 s.
@pytest.mark.parametrize("store_url, settings", [
    ("sqlite", {"examples": 3, "coverage": False, "max_time": 45}),
    ("postgresql", {"examples": 1, "coverage": False, "max_time": 30}),
], indirect=["store_url"], ids=["sqlite", "postgresql"])
def test_schemathesis_finds_nothing(app, store_url, settings):
    run = run_schemathesis(app, config(**settings))
    print(f"\nschemathesis on {app.config['DATABASE_URL'].split(':')[0]}: {run.summary()}")
    report = run.summary() + "\n" + "\n".join(run.failures[:20] + run.errors[:20])
    assert run.stop_reason in (StopReason.COMPLETED, StopReason.MAX_TIME), report
    assert not run.errors, report
    assert not run.failures, report
    # Every operation of the document was exercised (nearly all, when --max-time stopped the
    # run on a loaded machine), by a real generator: many requests, answered with many
    # statuses, every kind of check.
    documented = documented_operations(app)
    if run.stop_reason == StopReason.COMPLETED:
        assert run.operations == documented, report
    assert run.operations <= documented and len(run.operations) >= 0.9 * len(documented), report
    assert sum(run.cases.values()) >= len(run.operations), report
    assert {200, 201, 204, 404} <= set(run.statuses), report
    assert {"not_a_server_error", "status_code_conformance", "content_type_conformance",
            "response_schema_conformance", "positive_data_acceptance",
            "negative_data_rejection", "unsupported_method"} <= set(run.checks), report


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_schemathesis_with_sign_in_required(store_url, tmp_path):
    # With sign-in on, the document requires credentials on every route but the public
    # ones; ignored_auth sends each request again without them and with wrong ones (Bearer,
    # X-Api-Key, session cookie) and fails unless that is refused. Over HTTP, to a gunicorn:
    # schemathesis' in-process transport cannot send those probes.
    env = quarry_env(QUARRY_DATABASE_URL=store_url, QUARRY_INSTANCE_PATH=str(tmp_path),
                     QUARRY_DEMO_SOURCE="false", QUARRY_AUTH_REQUIRED="true",
                     QUARRY_SECRET_KEY="k" * 40, QUARRY_WORKERS="1", QUARRY_THREADS="4",
                     QUARRY_LOG_LEVEL="WARNING")
    app = create_app(load_settings(env))
    with app.app_context():
        auth_service.create_user("alice", "correct horse battery")
        token = auth_service.create_token("alice", "schemathesis")[1]
        db.engine.dispose()
    credentials = {"Authorization": f"Bearer {token}"}  # the document is not public either
    with serving(env, tmp_path) as live:
        schema = schemathesis.openapi.from_url(
            live.url + "/api/openapi.json", headers=credentials,
            config=config(examples=2, coverage=False, max_time=20, headers=credentials))
        run = run_engine(schema)
    print(f"\nschemathesis with sign-in required: {run.summary()}")
    report = run.summary() + "\n" + "\n".join(run.failures[:20] + run.errors[:20])
    assert run.stop_reason in (StopReason.COMPLETED, StopReason.MAX_TIME), report
    assert not run.errors, report
    assert not run.failures, report
    assert run.checks["ignored_auth"] >= len(run.operations) // 2 and 401 in run.statuses, report


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_schemathesis_run_reports_a_broken_promise(app):
    # The harness itself fails when the document says less than the service does: document
    # a project's name as any string, and a name the service refuses (400) becomes a
    # "schema-valid request rejected" finding.
    spec = app.test_client().get("/api/openapi.json").get_json()
    body = spec["components"]["schemas"]["ProjectIn"]["properties"]["name"]
    body.pop("pattern"), body.pop("maxLength")
    operation = {"/api/projects": {"post": spec["paths"]["/api/projects"]["post"]}}
    schema = schemathesis.openapi.from_dict({**spec, "paths": operation},
                                            config=config(examples=25, coverage=False))
    schema.app = app  # as schemathesis.openapi.from_wsgi does
    run = Run()
    stream = from_schema(schema).execute()
    for event in stream:
        if isinstance(event, events.ScenarioFinished):
            _record(run, event)
            if run.failures:  # found: the rest of the run (up to its --max-time) adds nothing
                stream.stop()
                break
    assert any("positive_data_acceptance" in failure for failure in run.failures), \
        run.summary()

