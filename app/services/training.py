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
from sqlalchemy import update

from .. import ml
from ..errors import BadRequest, NameReserved, NameTaken, TrainingFailed, summarise
from ..extensions import db
from ..rules.names import PROJECT_TABLES, name_key, validate_name
from ..schemas.models import TrainingOptions
from ..sql.errors import SqlError
from ..sql.execute import fetch_rows
from ..sql.gate import gate
from ..sql.sources import SourceRegistry, current_sources
from ..store import MLModel
from ..store.types import utcnow
from ..telemetry import current_metrics
from . import access, audit
from .common import Raced, commit, retried_on_race
from .lookup import taken_or_gone
from .models import delete_versions, find_model
from .projects import get_project

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


def create_model(spec: TrainingSpec) -> MLModel:
    """Record a model and train it (in the background unless ``USING join_learn_process =
    true``). A model name taken in the project → 409."""
    model, created = _record_model(spec)
    if not created:
        return model
    name = model.name
    future = current_app.extensions["quarry.trainer"].submit(model.id, run_training)
    if model.training_options["using"].get("join_learn_process"):
        future.result()
        db.session.refresh(model)
        if model.status == "error":
            raise TrainingFailed(f"Training of model '{name}' failed: {model.error}",
                                 model=name, model_status="error")
    return model


def training_options(using: dict[str, Any]) -> dict[str, Any]:
    """The USING options, validated (per field, as a REST body is)."""
    try:
        return TrainingOptions().load(using)
    except ValidationError as exc:
        raise BadRequest(f"Invalid USING: {summarise(exc.messages)}", title="Invalid USING",
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
    name = validate_name("model", spec.name)
    check_model_name(project.name, name)
    options = {"target": spec.target, "using": training_options(spec.using)}
    source = _source_name(spec)
    # The training query runs later, in the background, without the caller: check now.
    access.require_source(source)
    if spec.replace:
        delete_versions(project.id, name)
    elif spec.if_not_exists:
        existing = find_model(project.id, name, None)
        if existing is not None:
            return existing, False

    model = MLModel(project_id=project.id, name=name, name_key=name_key(name),
                    version=1, active=True, status="generating", predict=spec.target,
                    engine=options["using"].get("engine", "sklearn"), data_source=source,
                    fetch_data_query=spec.query, training_options=options,
                    trainer=current_app.extensions["quarry.trainer"].ident,
                    heartbeat_at=utcnow())
    db.session.add(model)
    audit.record_change("model", "create", f"{project.name}.{name}", None,
                        {"predict": spec.target, "data_source": source, "query": spec.query,
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


def _source_name(spec: TrainingSpec) -> str:
    registry = current_sources()
    if spec.source is None:
        # FROM (SELECT … FROM demo.iris), as mindsdb_sdk writes models.create(query="…"):
        # the data source is the one the query's qualified tables name.
        return _qualified_source(spec.query, registry)
    source = registry.get(spec.source)
    if source is None:
        raise BadRequest(f"Data source '{spec.source}' does not exist; configured data "
                         f"sources: {', '.join(registry.names()) or 'none'}",
                         title="Unknown data source")
    return source.name


def _qualified_source(query: str, registry: SourceRegistry) -> str:
    try:
        found = gate(query, registry, None).source
    except SqlError as exc:
        raise BadRequest(f"The training query cannot be run: {exc.message}",
                         title="Invalid training query") from exc
    if found is None:
        raise BadRequest("The training query names no data source: write "
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


def _train(model_id: int, trainer: str) -> None:
    model = db.session.get(MLModel, model_id)
    if model is None or model.status != "generating":
        return  # deleted, or already given up on, while it waited in the queue
    _set(model_id, trainer, status="training", heartbeat_at=utcnow())
    started = time.perf_counter()
    metrics = current_metrics()
    metrics.trainings_running.inc()
    try:
        result = _fit(model)
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
    _set(model_id, trainer, status="complete", accuracy=result.accuracy, error=None,
         description=result.description, artifact=result.artifact,
         training_time=round(time.perf_counter() - started, 3), trainer=None,
         heartbeat_at=None)


def _fit(model: MLModel) -> ml.TrainResult:
    """Read the model's training rows and train on them, with its USING options."""
    options = model.training_options or {}
    using = options.get("using", {})
    frame = _read_frame(model.data_source, model.fetch_data_query, using.get("max_rows"))
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
    import pandas as pd  # on first training only: see app/ml/__init__.py

    cap = current_app.config["TRAINING_MAX_ROWS"]
    if sample_rows:
        query = f"SELECT * FROM ({query.strip().rstrip(';')}) AS training_rows " \
                f"LIMIT {min(int(sample_rows), cap)}"
    columns, rows = fetch_rows(source, query, max_rows=cap,
                               timeout_s=current_app.config["SQL_TIMEOUT_S"])
    return pd.DataFrame.from_records(rows, columns=columns)


def _set(model_id: int, owner: str, **values: Any) -> None:
    # Only while this trainer still owns the model: a model marked error by a process that
    # thought this one dead, or deleted, stays as it is.
    db.session.execute(update(MLModel)
                       .where(MLModel.id == model_id, MLModel.trainer == owner)
                       .values(updated_at=utcnow(), **values))
    db.session.commit()


def _fail(model_id: int, owner: str, message: str) -> None:
    _set(model_id, owner, status="error", error=message, trainer=None, heartbeat_at=None)
