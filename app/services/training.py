"""Creating a model: the CREATE MODEL rules, the model's record, and its training run.

The MindsDB adapter (``app/mindsdb/models.py``) reads a CREATE MODEL statement, sent to REST
or to SQL, into a ``TrainingSpec`` of plain values; the rules are here, once for both. The
run itself happens on a trainer thread (``trainer.py``) unless the statement joins it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from flask import current_app
from marshmallow import ValidationError
from sqlalchemy import select, update

from .. import ml
from ..errors import (
    ModelBusy,
    ModelNotFound,
    ModelNotReady,
    NameReserved,
    NameTaken,
    TrainingFailed,
    Unprocessable,
    summarise,
)
from ..extensions import db
from ..federation import run as federation
from ..rules.names import PROJECT_TABLES, name_key, validate_name
from ..schemas.models import TrainingOptions
from ..sql.errors import SqlError
from ..sql.gate import gate
from ..sql.sources import SourceRegistry, current_sources
from ..store import MLModel
from ..store.types import utcnow
from ..telemetry import current_metrics
from . import access, audit
from . import sqlviews as view_service
from .common import Raced, commit, retried_on_race
from .lookup import taken_or_gone
from .models import delete_versions, find_model, lock_versions, split_ref
from .projects import get_project
from .trainer import PENDING, QUEUED, TRAIN_TASK, recover_orphans, trainer_alive

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

DEFAULT_VALIDATION_FRACTION = 0.2


@dataclass(frozen=True)
class TrainingSpec:
    """What a CREATE MODEL statement asks for, as plain values."""

    project: str
    name: str
    target: str                  # the PREDICT column
    query: str                   # the SELECT that reads the training rows
    source: str | None = None    # FROM <data source>; None: the one the query's tables name
    using: dict[str, Any] = field(default_factory=dict)  # USING as written, keys lower-cased
    if_not_exists: bool = False
    replace: bool = False        # CREATE OR REPLACE
    # A forecasting model: {"order", "group": [...], "window", "horizon"}; None: tabular.
    timeseries: dict[str, Any] | None = None


def create_model(spec: TrainingSpec) -> MLModel:
    """Record a model and train it (in the background unless ``USING join_learn_process =
    true``). A model name taken in the project → 409."""
    model, created = _record_model(spec)
    if not created:
        return model
    return _launch(model)


@dataclass(frozen=True)
class RetrainSpec:
    """What RETRAIN or FINETUNE asks for, as plain values; None keeps the stored value."""

    project: str
    name: str
    version: int | None = None   # RETRAIN/FINETUNE p.m.N: start from version N
    query: str | None = None     # FROM … (SELECT …): new training rows
    source: str | None = None
    using: dict[str, Any] = field(default_factory=dict)
    finetune: bool = False


def retrain_spec(project: str, ref: str, body: dict[str, Any], *,
                 finetune: bool = False) -> RetrainSpec:
    """The spec of a REST retrain/finetune body ({"query", "data_source", "using"})."""
    name, version = split_ref(ref)
    return RetrainSpec(project=project, name=name, version=version,
                       query=body.get("query") or None, source=body.get("data_source"),
                       using={str(k).lower(): v for k, v in (body.get("using") or {}).items()},
                       finetune=finetune)


def retrain_model(spec: RetrainSpec) -> MLModel:
    """Record version N+1 of a model and train it; it becomes active when complete (unless
    ``USING active = false``), and until then the active version keeps answering.

    RETRAIN reads the stored query (or the new one) with the stored USING merged with the
    new; FINETUNE trains on the base version's rows plus the new query's rows. One version
    trains at a time: a second RETRAIN while one runs → 409.
    """
    project = get_project(spec.project, "write")
    if spec.query is not None:
        _check_new_query(project, spec)
    # Orphans first (their commit would end the row locks taken next).
    recover_orphans(list(db.session.scalars(select(MLModel).where(
        MLModel.project_id == project.id, MLModel.name_key == name_key(spec.name),
        MLModel.status.in_(PENDING)))))
    versions = lock_versions(project.id, spec.name)
    if not versions:
        raise ModelNotFound(spec.name, project.name)
    busy = [v for v in versions if v.status in PENDING]
    if busy:
        db.session.rollback()
        raise ModelBusy(f"Model '{versions[0].name}' is already training version "
                        f"{busy[0].version}; wait until it completes (or fails)",
                        model=versions[0].name, version=busy[0].version)
    base = _base_version(versions, spec)
    model = _next_version(project, base, versions, spec)
    # The training query runs later, in the background, without the caller: check now,
    # every data source it reads (a view's statement may name several).
    for source in _sources_read(model):
        if not access.may_query(source):
            db.session.rollback()  # the versions' locks go first
            access.require_source(source)
    db.session.add(model)
    name = base.name
    audit.record_change("model", "finetune" if spec.finetune else "retrain",
                        f"{project.name}.{name}", {"version": base.version},
                        {"version": model.version, "data_source": model.data_source,
                         "query": model.fetch_data_query,
                         "using": model.training_options["using"]})
    # Two RETRAINs that both read version N insert N+1: the unique constraint refuses one.
    commit(taken_or_gone(project, lambda: ModelBusy(
        f"Model '{name}' is already training a new version", model=name)))
    return _launch(model)


def _sources_read(model: MLModel) -> list[str]:
    try:
        named = federation.sources_named(model.fetch_data_query, current_sources(),
                                         model.data_source)
    except SqlError:  # a source removed since: the run reports it, as for one source
        named = []
    return named or [model.data_source]


def _check_new_query(project: Any, spec: RetrainSpec) -> None:
    """The new training query checked as CREATE MODEL's is, before any lock is taken: the
    data source is asked for its columns, which the store's locks must not wait for."""
    base = find_model(project.id, spec.name, spec.version)
    if base is None:
        raise ModelNotFound(spec.name if spec.version is None else
                            f"{spec.name}.{spec.version}", project.name)
    source, query = training_data(TrainingSpec(project=spec.project, name=base.name,
                                               target=base.predict, query=spec.query or "",
                                               source=spec.source))
    check_training_query(source, query,
                         (base.training_options or {}).get("target", base.predict),
                         (base.training_options or {}).get("timeseries"))


def _base_version(versions: list[MLModel], spec: RetrainSpec) -> MLModel:
    if spec.version is not None:
        base = next((v for v in versions if v.version == spec.version), None)
        if base is None:
            db.session.rollback()
            raise ModelNotFound(f"{versions[0].name}.{spec.version}", spec.project)
    else:
        base = next((v for v in versions if v.active), None) or versions[-1]
    if spec.finetune and base.status != "complete":
        db.session.rollback()
        raise ModelNotReady(f"Version {base.version} of model '{base.name}' is not trained "
                            f"(status {base.status}): FINETUNE starts from a trained version",
                            model_status=base.status)
    return base


def _next_version(project: Any, base: MLModel, versions: list[MLModel],
                  spec: RetrainSpec) -> MLModel:
    stored = base.training_options or {}
    using = dict(stored.get("using", {}))
    using.pop("join_learn_process", None)
    using.pop("active", None)
    using.update(spec.using)
    options: dict[str, Any] = {"target": stored.get("target", base.predict),
                               "using": training_options(using)}
    if stored.get("timeseries") is not None:  # a new version forecasts as the base did
        options["timeseries"] = stored["timeseries"]
    if spec.query is not None:
        source, query = training_data(TrainingSpec(project=spec.project, name=base.name,
                                                   target=base.predict, query=spec.query,
                                                   source=spec.source))
    elif spec.source is not None:
        raise Unprocessable("FROM <data source> needs a query: FROM demo (SELECT …)",
                            title="Training data missing")
    elif spec.finetune:
        raise Unprocessable("FINETUNE needs the new rows: FINETUNE p.m FROM <data source> "
                            "(SELECT …)", title="Training data missing")
    else:
        query, source = base.fetch_data_query, base.data_source
    if spec.finetune:
        # The base version's rows come first: the fine-tuned pipeline is refitted on them
        # plus the new rows (see docs/models.md: sklearn's estimators here have no
        # incremental fit that keeps their preprocessing consistent).
        options["finetune"] = {
            "from_version": base.version,
            "method": "refit on the base version's training rows plus the new rows",
            "base_data": [*stored.get("finetune", {}).get("base_data", []),
                          {"source": base.data_source, "query": base.fetch_data_query}]}
    return MLModel(project_id=project.id, name=base.name, name_key=base.name_key,
                   version=max(v.version for v in versions) + 1, active=False,
                   status="generating", predict=base.predict,
                   engine=options["using"].get("engine", base.engine), data_source=source,
                   fetch_data_query=query, training_options=options,
                   base_version=base.version if spec.finetune else None,
                   trainer=current_app.extensions["quarry.trainer"].ident,
                   heartbeat_at=utcnow(), progress={"phase": "queued", "rows_read": 0})


def _launch(model: MLModel) -> MLModel:
    """Start training ``model``: on a Celery worker when a broker is configured, else on
    this process's trainer; and wait for it when USING join_learn_process = true."""
    name, model_id = model.name, model.id
    join = bool(model.training_options["using"].get("join_learn_process"))
    celery = current_app.extensions.get("quarry.celery")
    if celery is not None:
        _set(model_id, model.trainer, trainer=QUEUED)
        celery.send_task(TRAIN_TASK, args=[model_id])
        if join:
            _wait_for(model_id)
    else:
        future = current_app.extensions["quarry.trainer"].submit(model_id, run_training)
        if join:
            future.result()
    if not join:
        return model
    db.session.refresh(model)
    if model.status == "error":
        raise TrainingFailed(f"Training of model '{name}' failed: {model.error}",
                             model=name, model_status="error")
    return model


def _wait_for(model_id: int) -> None:
    """Poll the store until a Celery worker has finished the version (join_learn_process)."""
    deadline = time.monotonic() + current_app.config["CELERY_JOIN_TIMEOUT_S"]
    while time.monotonic() < deadline:
        db.session.commit()  # a fresh snapshot each round
        status = db.session.scalar(select(MLModel.status).where(MLModel.id == model_id))
        if status not in PENDING:
            return
        time.sleep(0.2)


def training_options(using: dict[str, Any]) -> dict[str, Any]:
    """The USING options, validated (per field, as a REST body is)."""
    try:
        return TrainingOptions().load(using)
    except ValidationError as exc:
        raise Unprocessable(f"Invalid USING: {summarise(exc.messages)}", title="Invalid USING",
                            errors=exc.messages) from None


def check_model_name(project: str, name: str) -> None:
    """A model is read as a table of its project (SELECT … FROM p.m), beside the project's
    tables of models, skills and agents: it may not take one of their names."""
    if name_key(name) in PROJECT_TABLES:
        raise NameReserved(f"'{name}' is reserved: {project}.{name_key(name)} is the project's "
                           f"table of {name_key(name)}; choose another model name", name=name)


@retried_on_race
def _record_model(spec: TrainingSpec) -> tuple[MLModel, bool]:
    """The new model's record, committed, and True; or the existing one and False when the
    statement says ``IF NOT EXISTS`` and the name is taken."""
    project = get_project(spec.project, "write")
    name = validate_name("model", spec.name, error=Unprocessable)
    check_model_name(project.name, name)
    options: dict[str, Any] = {"target": spec.target, "using": training_options(spec.using)}
    if spec.timeseries is not None:
        options["timeseries"] = spec.timeseries
    source, query = training_data(spec)
    # The training query runs later, in the background, without the caller: check now.
    access.require_source(source)
    if spec.if_not_exists and not spec.replace:
        existing = find_model(project.id, name, None)
        if existing is not None:
            return existing, False
    # Before anything is written (OR REPLACE's delete too): a query that cannot train is
    # refused here, not recorded as a model in status error.
    check_training_query(source, query, spec.target, spec.timeseries)
    if spec.replace:
        delete_versions(project.id, name)

    model = MLModel(project_id=project.id, name=name, name_key=name_key(name),
                    version=1, active=True, status="generating", predict=spec.target,
                    engine=options["using"].get("engine", "sklearn"), data_source=source,
                    fetch_data_query=query, training_options=options,
                    trainer=current_app.extensions["quarry.trainer"].ident,
                    heartbeat_at=utcnow(), progress={"phase": "queued", "rows_read": 0})
    db.session.add(model)
    audit.record_change("model", "create", f"{project.name}.{name}", None,
                        {"predict": spec.target, "data_source": source, "query": query,
                         "using": options["using"]})
    project_name = project.name
    try:
        # The insert is also refused when the project was deleted meanwhile: then 404.
        commit(taken_or_gone(project, lambda: NameTaken("Model", name, project_name)))
    except NameTaken:
        if spec.replace or spec.if_not_exists:
            # Another request created the name between the delete (or lookup) and this
            # insert: OR REPLACE replaces that model too, IF NOT EXISTS returns it.
            raise Raced from None
        raise
    return model, True


def training_data(spec: TrainingSpec) -> tuple[str, str]:
    """(the data source, the query) the model trains from. The views the query names are
    replaced by their statements, read as the caller sees them: ``FROM p (SELECT * FROM
    v)`` — what mindsdb_sdk sends for a view — and ``FROM (SELECT * FROM p.v)`` train from
    the data sources the view reads (its first one is the model's data source). The
    expanded statement is the one stored: a RETRAIN reads what was checked now."""
    registry = access.queryable_sources()
    in_source = spec.source is not None and registry.get(spec.source) is not None
    expanded = view_service.expand(spec.query, None if in_source else
                                   (spec.source or spec.project), registry) \
        if spec.query else None
    if expanded is None:
        return _source_name(spec), spec.query
    if in_source:
        return registry.require(spec.source).name, expanded
    try:
        named = federation.sources_named(expanded, registry)
    except SqlError as exc:
        raise Unprocessable(f"The training query cannot be run: {exc.message}",
                            title="Invalid training query") from None
    if not named:
        raise Unprocessable("The training query reads no data source: the views it names "
                            "read none", title="Training data missing")
    return named[0], expanded


def _source_name(spec: TrainingSpec) -> str:
    # As the caller sees them: a source it may not query is missing (its name must not leak).
    registry = access.queryable_sources()
    if spec.source is None:
        # FROM (SELECT … FROM demo.iris), as mindsdb_sdk writes models.create(query="…"):
        # the data source is the one the query's qualified tables name.
        return _qualified_source(spec.query, registry)
    source = registry.get(spec.source)
    if source is None:
        raise Unprocessable(f"Data source '{spec.source}' does not exist; configured data "
                            f"sources: {', '.join(registry.names()) or 'none'}",
                            title="Unknown data source")
    return source.name


def check_training_query(source: str, query: str, target: str,
                         timeseries: dict[str, Any] | None = None) -> None:
    """422 unless ``query`` is a read statement the caller may run on ``source`` and returns
    the column ``target`` (and a forecasting model's ORDER BY and GROUP BY columns). Only
    the query's columns are read (``query_columns``), through
    the caller's view of the data sources, as POST /api/sql/query would run it."""
    registry = access.queryable_sources()
    try:
        # On one data source or several (a view's, files): no row is read.
        columns = federation.query_columns(query, registry, source,
                                           timeout_s=current_app.config["SQL_TIMEOUT_S"])
    except SqlError as exc:
        raise Unprocessable(f"The training query cannot be run: {exc.message}",
                            title="Invalid training query") from None
    wanted = [("predict", "the PREDICT target", target)]
    if timeseries is not None:
        wanted.append(("order_by", "the ORDER BY column", timeseries["order"]))
        wanted += [("group_by", "a GROUP BY column", g) for g in timeseries["group"]]
    for key, role, name in wanted:
        if ml.find_column(columns, name) is None:  # as training finds it
            listed = ", ".join(columns) or "none"
            message = (f"Column '{name}' ({role}) is not among the columns the "
                       f"training query returns: {listed}")
            title = "Unknown PREDICT column" if key == "predict" else "Unknown column"
            raise Unprocessable(message, title=title, errors={key: [message]})
    seen: dict[str, str] = {}  # training finds a column by its name, in any case
    for name in columns:
        if (first := seen.get(name.casefold())) is not None:
            also = "" if first == name else f" (also as '{first}')"
            message = (f"The training query returns the column '{name}' more than once"
                       f"{also}: give each column a name of its own (AS …)")
            raise Unprocessable(message, title="Invalid training query",
                                errors={"query": [message]})
        seen[name.casefold()] = name


def _qualified_source(query: str, registry: SourceRegistry) -> str:
    try:
        found = gate(query, registry, None).source
    except SqlError as exc:
        raise Unprocessable(f"The training query cannot be run: {exc.message}",
                            title="Invalid training query") from exc
    if found is None:
        raise Unprocessable("The training query names no data source: write "
                            "CREATE MODEL p.m FROM <data source> (SELECT …) or qualify its "
                            "tables (SELECT … FROM demo.iris)", title="Training data missing")
    return found.name


# --- the run (on a trainer thread, in an app context of its own) ---------------------------

def run_training(model_id: int, trainer: str) -> None:
    """Read the rows, train, and store the outcome; every failure ends in status error."""
    try:
        _train(model_id, trainer)
    except Exception as exc:  # a bug or resource exhaustion: still never "training" forever
        log.exception("training model %s failed", model_id)
        db.session.rollback()
        _fail(model_id, trainer, f"Training failed unexpectedly: {type(exc).__name__}: {exc}")


def run_queued(model_id: int, trainer: str) -> str:
    """A Celery worker's run: claim the version, then train it. Returns what happened.

    The claim is one conditional UPDATE, so a task delivered twice (its first worker was
    killed, or a describe re-queued it) trains once; each start counts a try, and past
    ``TRAINING_MAX_ATTEMPTS`` the version is marked error instead of tried again.
    """
    model = db.session.get(MLModel, model_id)
    if model is None or model.status not in PENDING:
        return "gone"  # deleted, or finished by another delivery
    if model.status == "training" and trainer_alive(model.trainer, model.heartbeat_at):
        return "busy"  # another worker is on it
    previous, attempts = model.trainer, model.attempts
    db.session.rollback()
    if attempts >= current_app.config["TRAINING_MAX_ATTEMPTS"]:
        _set(model_id, previous, status="error", trainer=None, heartbeat_at=None,
             error=f"Training was interrupted {attempts} times (its worker stopped each "
                   "time); giving up. Fix the cause (memory?) and RETRAIN the model.")
        return "gave up"
    claimed = db.session.execute(
        update(MLModel)
        .where(MLModel.id == model_id, MLModel.status.in_(PENDING),
               MLModel.trainer.is_(None) if previous is None else MLModel.trainer == previous)
        .values(status="generating", trainer=trainer, heartbeat_at=utcnow(),
                updated_at=utcnow())).rowcount
    db.session.commit()
    if not claimed:
        return "busy"
    run_training(model_id, trainer)
    return "trained"


def _train(model_id: int, trainer: str) -> None:
    model = db.session.get(MLModel, model_id)
    if model is None or model.status != "generating":
        return  # deleted, or already given up on, while it waited in the queue
    # Each start counts a try (run_queued gives up past TRAINING_MAX_ATTEMPTS).
    _set(model_id, trainer, status="training", heartbeat_at=utcnow(),
         attempts=MLModel.attempts + 1,
         progress={"phase": "reading", "rows_read": 0, "trainer": trainer})
    started = time.perf_counter()
    metrics = current_metrics()
    metrics.trainings_running.inc()
    try:
        frame = _read_model_rows(model)
        _set(model_id, trainer, progress={"phase": "fitting", "rows_read": len(frame),
                                            "trainer": trainer})
        result = _fit(model, frame)
    except ml.TrainingError as exc:
        metrics.trainings_done.labels("failed").inc()
        _fail(model_id, trainer, exc.message)
        return
    except SqlError as exc:
        metrics.trainings_done.labels("failed").inc()
        _fail(model_id, trainer, f"Reading the training data failed: {exc.message}")
        return
    except BaseException:
        metrics.trainings_done.labels("failed").inc()
        raise
    finally:
        metrics.trainings_running.dec()
    metrics.trainings_done.labels("finished").inc()
    description = result.description
    finetune = (model.training_options or {}).get("finetune")
    if finetune and isinstance(description, dict) and isinstance(description.get("info"), dict):
        description["info"]["finetune"] = {"from_version": finetune["from_version"],
                                           "method": finetune["method"]}
    stored = _set(model_id, trainer, status="complete", accuracy=result.accuracy,
                  error=None, description=description, artifact=result.artifact,
                  training_time=round(time.perf_counter() - started, 3), trainer=None,
                  heartbeat_at=None, progress={"phase": "complete", "rows_read": len(frame),
                            "trainer": trainer},
                  commit=False)
    # The switch to the new version is in the same transaction as its artifact: a predict
    # sees the old active version or the new one, never none.
    if stored and (model.training_options or {}).get("using", {}).get("active", True):
        _activate(model)
    db.session.commit()


def _activate(model: MLModel) -> None:
    """Make ``model`` the active version of its name (in the caller's transaction)."""
    db.session.execute(update(MLModel)
                       .where(MLModel.project_id == model.project_id,
                              MLModel.name_key == model.name_key)
                       .values(active=MLModel.id == model.id))


def _read_model_rows(model: MLModel) -> pd.DataFrame:
    """The version's training rows: its query's, after a FINETUNE's base rows."""
    ml.preload()  # one thread at a time: see app/ml/__init__.py
    import pandas as pd  # on first training only: see app/ml/__init__.py

    options = model.training_options or {}
    sample = options.get("using", {}).get("max_rows")
    parts = [_read_frame(d["source"], d["query"], sample)
             for d in options.get("finetune", {}).get("base_data", [])]
    parts.append(_read_frame(model.data_source, model.fetch_data_query, sample))
    return parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)


def _fit(model: MLModel, frame: pd.DataFrame) -> ml.TrainResult:
    """Train on ``frame`` with the model's USING options."""
    options = model.training_options or {}
    using = options.get("using", {})
    if options.get("timeseries") is not None:
        return ml.train_forecast(frame, options.get("target", model.predict),
                                 options["timeseries"], time_budget_s=using.get("time_budget_s"))
    return ml.train(frame, options.get("target", model.predict), problem=using.get("problem"),
                    validation_fraction=using.get("validation_fraction",
                                                  DEFAULT_VALIDATION_FRACTION),
                    time_budget_s=using.get("time_budget_s"))


def _read_frame(source: str, query: str, sample_rows: int | None) -> pd.DataFrame:
    """The rows of the training query, read through the read-only data path.

    ``USING max_rows = N`` asks for a sample: the query is wrapped in ``LIMIT N``. Beyond
    that, more rows than TRAINING_MAX_ROWS is an error (the data path refuses), not a silent
    cut: the caller should narrow the query down.
    """
    ml.preload()  # one thread at a time: see app/ml/__init__.py
    import pandas as pd  # on first training only: see app/ml/__init__.py

    cap = current_app.config["TRAINING_MAX_ROWS"]
    if sample_rows:
        query = f"SELECT * FROM ({query.strip().rstrip(';')}) AS training_rows " \
                f"LIMIT {min(int(sample_rows), cap)}"
    # Files and the statements of views over several sources are read by the engine.
    columns, rows = federation.read_rows(query, current_sources(), source, max_rows=cap,
                                         timeout_s=current_app.config["SQL_TIMEOUT_S"])
    return pd.DataFrame.from_records(rows, columns=columns)


def _set(model_id: int, owner: str | None, *, commit: bool = True, **values: Any) -> int:
    # Only while this trainer still owns the model: a model marked error by a process that
    # thought this one dead, or deleted, stays as it is.
    count = db.session.execute(update(MLModel)
                               .where(MLModel.id == model_id,
                                      MLModel.trainer.is_(None) if owner is None
                                      else MLModel.trainer == owner)
                               .values(updated_at=utcnow(), **values)).rowcount
    if commit:
        db.session.commit()
    return count


def _fail(model_id: int, owner: str, message: str) -> None:
    _set(model_id, owner, status="error", error=message, trainer=None, heartbeat_at=None)
