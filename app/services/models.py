"""Models: CREATE MODEL, list, get, delete, describe, predict — the rules and the commit.

The REST routes and the SQL endpoint (``CREATE MODEL``, ``DESCRIBE``, ``DROP MODEL``,
``SELECT … FROM p.m``) call these same functions, so each rule lives here only.
"""

from __future__ import annotations

import logging
import time
import warnings
from typing import TYPE_CHECKING, Any

from flask import current_app
from mindsdb_sql_parser import parse_sql
from mindsdb_sql_parser.ast.mindsdb import CreatePredictor
from sqlalchemy import delete, select, update

from .. import ml
from ..errors import BadRequest, Conflict, NotFound, Unprocessable
from ..extensions import db
from ..sql.errors import SqlError
from ..sql.execute import fetch_rows
from ..sql.gate import gate
from ..sql.sources import current_sources
from ..store import MLModel
from ..store.types import utcnow
from .common import Raced, commit, retried_on_race
from .lookup import taken_or_gone
from .names import id_value, is_id, name_key, validate_name
from .projects import get_project
from .trainer import trainer_alive

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

with warnings.catch_warnings():
    # sly, the parser's generator, opens its LR-table file without closing it when the
    # parser class is built (on first import): load it here, where that is not reported.
    warnings.simplefilter("ignore", ResourceWarning)
    import mindsdb_sql_parser.parser  # noqa: F401

ENGINES = ("sklearn", "lightwood")  # lightwood: MindsDB's default, trained here by sklearn
USING_KEYS = ("engine", "join_learn_process", "problem", "validation_fraction", "max_rows")
ATTRIBUTES = ("info", "features", "model")
PENDING = ("generating", "training")
DEFAULT_VALIDATION_FRACTION = 0.2


# --- CREATE MODEL -------------------------------------------------------------------------

def parse_create_model(query: str) -> CreatePredictor:
    """The parsed statement; Unprocessable when it is not a CREATE MODEL statement."""
    if not isinstance(query, str) or not query.strip():
        raise Unprocessable('Missing "query": a CREATE MODEL statement', title="Query required")
    try:
        statement = parse_sql(query)
    except Exception as exc:  # the parser raises its own assorted types
        raise Unprocessable(f"SQL CREATE statement is invalid: {query} ({exc})",
                            title="Invalid query string") from exc
    if not isinstance(statement, CreatePredictor):
        raise Unprocessable(f"SQL statement is not a CREATE MODEL statement: {query}",
                            title="Invalid CREATE SQL statement")
    return statement


def create_model(project: str, query: str | CreatePredictor) -> MLModel:
    """Record a model from a CREATE MODEL statement and train it (in the background unless
    ``USING join_learn_process = true``). A model name taken in the project → 409."""
    statement = query if isinstance(query, CreatePredictor) else parse_create_model(query)
    model, created = _record_model(statement, project)
    if not created:
        return model
    options = model.training_options
    name = model.name
    future = current_app.extensions["quarry.trainer"].submit(model.id, run_training)
    if options["using"].get("join_learn_process"):
        future.result()
        db.session.refresh(model)
        if model.status == "error":
            raise Unprocessable(f"Training of model '{name}' failed: {model.error}",
                                title="Training failed", model=name, model_status="error")
    return model


@retried_on_race
def _record_model(statement: CreatePredictor, project: str) -> tuple[MLModel, bool]:
    """The new model's record, committed, and True; or the existing one and False when the
    statement says ``IF NOT EXISTS`` and the name is taken."""
    target_project = get_project(_statement_project(statement, project))
    name = validate_name("model", statement.name.parts[-1], error=Unprocessable)
    options = _training_options(statement)
    source = _source_name(statement)
    if statement.is_replace:
        _delete_versions(target_project.id, name)
    elif statement.if_not_exists:
        existing = _find(target_project.id, name, None)
        if existing is not None:
            return existing, False

    model = MLModel(project_id=target_project.id, name=name, name_key=name_key(name),
                    version=1, active=True, status="generating", predict=options["target"],
                    engine=options["using"].get("engine", "sklearn"), data_source=source,
                    fetch_data_query=statement.query_str, training_options=options,
                    trainer=current_app.extensions["quarry.trainer"].ident,
                    heartbeat_at=utcnow())
    db.session.add(model)
    try:
        # The insert is also refused when the project was deleted meanwhile: then 404.
        commit(taken_or_gone(target_project, lambda: Conflict(
            f"Model '{name}' already exists in project '{target_project.name}'",
            title="Model already exists")))
    except Conflict:
        if statement.is_replace or statement.if_not_exists:
            # Another request created the name between the delete (or lookup) and this
            # insert: OR REPLACE replaces that model too, IF NOT EXISTS returns it.
            raise Raced from None
        raise
    return model, True


def _statement_project(statement: CreatePredictor, project: str) -> str:
    parts = statement.name.parts
    if len(parts) > 2:
        raise Unprocessable(f"Model name '{'.'.join(parts)}' has too many parts: use "
                            "project.model or model", title="Invalid model name")
    if len(parts) == 2 and name_key(parts[0]) != name_key(project):
        raise Unprocessable(f"The statement creates a model in project '{parts[0]}' but the "
                            f"request is for project '{project}'", title="Project mismatch")
    return parts[0] if len(parts) == 2 else project


def _source_name(statement: CreatePredictor) -> str:
    if not statement.query_str:
        raise Unprocessable("CREATE MODEL needs the training data: "
                            "CREATE MODEL p.m FROM <data source> (SELECT …) PREDICT <column>",
                            title="Training data missing")
    registry = current_sources()
    if statement.integration_name is None:
        # FROM (SELECT … FROM demo.iris), as mindsdb_sdk writes models.create(query="…"):
        # the data source is the one the query's qualified tables name.
        return _qualified_source(statement.query_str, registry)
    source = statement.integration_name.parts[-1]
    if registry.get(source) is None:
        raise Unprocessable(f"Data source '{source}' does not exist; configured data sources: "
                            + (", ".join(registry.names()) or "none"),
                            title="Unknown data source")
    return registry.get(source).name


def _qualified_source(query: str, registry: Any) -> str:
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


def _training_options(statement: CreatePredictor) -> dict[str, Any]:
    targets = statement.targets or []
    if len(targets) != 1:
        raise Unprocessable("PREDICT must name exactly one column", title="Invalid PREDICT")
    unsupported = [clause for clause in ("order_by", "group_by", "window", "horizon")
                   if getattr(statement, clause, None)]
    if unsupported:
        raise Unprocessable("Time-series models (ORDER BY, GROUP BY, WINDOW, HORIZON) are not "
                            "supported", title="Unsupported CREATE MODEL clause")
    using = {str(k).lower(): v for k, v in (statement.using or {}).items()}
    unknown = sorted(set(using) - set(USING_KEYS))
    if unknown:
        raise Unprocessable(f"Unknown USING key(s): {', '.join(unknown)}; accepted keys: "
                            f"{', '.join(USING_KEYS)}", title="Invalid USING",
                            errors={k: ["Unknown key."] for k in unknown})
    clean: dict[str, Any] = {}
    if "engine" in using:
        engine = str(using["engine"]).lower()
        if engine not in ENGINES:
            raise Unprocessable(f"There is no engine '{using['engine']}'; engines: sklearn "
                                "(lightwood is accepted as an alias of sklearn)",
                                title="Unknown engine", errors={"engine": ["Unknown engine."]})
        clean["engine"] = engine
    if "join_learn_process" in using:
        clean["join_learn_process"] = _boolean("join_learn_process", using["join_learn_process"])
    if "problem" in using:
        problem = str(using["problem"]).lower()
        if problem not in ml.PROBLEMS:
            raise _using_error("problem", f"must be one of {', '.join(ml.PROBLEMS)}")
        clean["problem"] = problem
    if "validation_fraction" in using:
        value = using["validation_fraction"]
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not 0.05 <= value <= 0.5:
            raise _using_error("validation_fraction", "must be a number from 0.05 to 0.5")
        clean["validation_fraction"] = float(value)
    if "max_rows" in using:
        value = using["max_rows"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise _using_error("max_rows", "must be a positive integer")
        clean["max_rows"] = value
    return {"target": targets[0].parts[-1], "using": clean}


def _boolean(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise _using_error(key, "must be true or false")


def _using_error(key: str, message: str) -> Unprocessable:
    return Unprocessable(f"USING {key} {message}", title="Invalid USING",
                         errors={key: [message[0].upper() + message[1:] + "."]})


# --- training (runs on a trainer thread, in an app context of its own) ----------------------

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
    options = model.training_options or {}
    using = options.get("using", {})
    started = time.perf_counter()
    try:
        frame = _read_frame(model.data_source, model.fetch_data_query, using.get("max_rows"))
        result = ml.train(frame, options.get("target", model.predict),
                          problem=using.get("problem"),
                          validation_fraction=using.get("validation_fraction",
                                                        DEFAULT_VALIDATION_FRACTION))
    except ml.TrainingError as exc:
        _fail(model_id, trainer, exc.message)
        return
    except SqlError as exc:
        _fail(model_id, trainer, f"Reading the training data failed: {exc.message}")
        return
    _set(model_id, trainer, status="complete", accuracy=result.accuracy, error=None,
         description=result.description, artifact=result.artifact,
         training_time=round(time.perf_counter() - started, 3), trainer=None,
         heartbeat_at=None)


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


# --- reading --------------------------------------------------------------------------------

def recover_orphans(models: list[MLModel] | None = None) -> int:
    """Mark error every pending model whose trainer process is gone; returns how many."""
    if models is None:
        models = list(db.session.scalars(select(MLModel).where(MLModel.status.in_(PENDING))))
    now = utcnow()
    dead = [m for m in models
            if m.status in PENDING and not trainer_alive(m.trainer, m.heartbeat_at, now)]
    for model in dead:
        db.session.execute(
            update(MLModel)
            .where(MLModel.id == model.id, MLModel.status.in_(PENDING),
                   MLModel.trainer.is_(None) if model.trainer is None
                   else MLModel.trainer == model.trainer)
            .values(status="error", trainer=None, heartbeat_at=None, updated_at=now,
                    error=f"Training was interrupted: the process training the model "
                          f"({model.trainer or 'unknown'}) stopped before it finished. "
                          "Drop the model and create it again."))
    if dead:
        db.session.commit()
        for model in dead:
            db.session.refresh(model)
    return len(dead)


def list_models(project: str) -> list[MLModel]:
    found = get_project(project)
    models = list(db.session.scalars(select(MLModel).where(MLModel.project_id == found.id)
                                     .order_by(MLModel.name_key, MLModel.version)))
    recover_orphans([m for m in models if m.status in PENDING])
    return models


def get_model(project: str, ref: str) -> MLModel:
    """The model named ``ref`` (case-insensitive), or version N of it with ``name.N``."""
    found = get_project(project)
    name, version = split_ref(ref)
    model = _find(found.id, name, version)
    if model is None:
        raise NotFound(f"Model '{ref}' does not exist in project '{found.name}'",
                       title="Model not found")
    if model.status in PENDING:
        recover_orphans([model])
    return model


def split_ref(ref: str) -> tuple[str, int | None]:
    name, dot, version = ref.rpartition(".")
    # ASCII digits only (int() refuses "²", which isdigit() accepts); id_value() makes an
    # over-long number one that matches no version (SQLite cannot bind it).
    if dot and name and is_id(version):
        return name, id_value(version)
    return ref, None


def _find(project_id: int, name: str, version: int | None, *options: Any) -> MLModel | None:
    query = select(MLModel).where(MLModel.project_id == project_id,
                                  MLModel.name_key == name_key(name))
    if version is not None:
        query = query.where(MLModel.version == version)
    else:
        query = query.order_by(MLModel.active.desc(), MLModel.version.desc())
    return db.session.scalars(query.options(*options).limit(1)).first()


def delete_model(project: str, ref: str) -> None:
    """Delete the model (every version, or the one ``name.N`` names) and its artifact."""
    model = get_model(project, ref)
    _, version = split_ref(ref)
    if version is None:
        ids = _delete_versions(model.project_id, model.name)
    else:
        ids = [model.id]
        db.session.execute(delete(MLModel).where(MLModel.id == model.id))
    db.session.commit()
    cache = current_app.extensions["quarry.model_cache"]
    for model_id in ids:
        cache.drop(model_id)


def _delete_versions(project_id: int, name: str) -> list[int]:
    ids = list(db.session.scalars(select(MLModel.id).where(
        MLModel.project_id == project_id, MLModel.name_key == name_key(name))))
    if ids:
        db.session.execute(delete(MLModel).where(MLModel.id.in_(ids)))
    return ids


def describe_model(project: str, ref: str, attribute: str | None = None) -> list[dict]:
    """The ``info`` (default), ``features`` or ``model`` records of a trained model."""
    model = get_model(project, ref)
    attribute = (attribute or "info").lower()
    if attribute not in ATTRIBUTES:
        raise BadRequest(f"Unknown describe attribute '{attribute}'; accepted values: "
                         f"{', '.join(ATTRIBUTES)}", title="Invalid attribute",
                         errors={"attribute": [f"Must be one of: {', '.join(ATTRIBUTES)}."]})
    _require_complete(model)
    description = model.description or {}
    records = description.get(attribute)
    return [records] if attribute == "info" else list(records or [])


def predict(project: str, ref: str, rows: list[dict[str, Any]] | dict[str, Any]) -> list[dict]:
    """The rows with the predicted column, its confidence and an explanation added."""
    model = get_model(project, ref)
    _require_complete(model)
    rows = [rows] if isinstance(rows, dict) else rows
    cache = current_app.extensions["quarry.model_cache"]
    key = (model.id, model.updated_at)
    loaded = cache.get(key)
    try:
        if loaded is None:
            loaded = ml.load_model(model.artifact)
            cache.put(key, loaded)
        return ml.predict(loaded, rows)
    except ml.PredictionError as exc:
        errors = {exc.column: [exc.message]} if exc.column else None
        raise Unprocessable(exc.message, title="Invalid prediction input", errors=errors) from exc


def _require_complete(model: MLModel) -> None:
    if model.status != "complete":
        detail = f"Model '{model.name}' is not trained: its status is {model.status}"
        if model.error:
            detail += f" ({model.error})"
        raise Conflict(detail, title="Model not ready", model_status=model.status,
                       model_error=model.error)
