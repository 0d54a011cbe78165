"""Models: list, get, delete, describe and predict — the rules and the commit.

The REST routes and the SQL adapter (``DESCRIBE``, ``DROP MODEL``, ``SELECT … FROM p.m``) call
these same functions, so each rule lives here only. Creating and training a model is
``training.py``; a model whose trainer died is found by ``trainer.recover_orphans``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from flask import current_app
from sqlalchemy import Connection, bindparam, delete, select, update

from .. import ml
from ..errors import ActiveVersion, BadRequest, ModelNotFound, ModelNotReady, Unprocessable
from ..extensions import db
from ..rules.names import id_value, is_id, lookup_key, name_key
from ..store import MLModel, Project
from . import access, audit
from .projects import get_project
from .trainer import MODEL_CACHE_SIZE, PENDING, recover_orphans

ATTRIBUTES = ("info", "features", "model")


def list_models(project: str) -> list[MLModel]:
    found = get_project(project)
    models = list(db.session.scalars(select(MLModel).where(MLModel.project_id == found.id)
                                     .order_by(MLModel.name_key, MLModel.version)))
    recover_orphans([m for m in models if m.status in PENDING])
    return models


def get_model(project: str, ref: str) -> MLModel:
    """The model named ``ref`` (case-insensitive), or version N of it with ``name.N``."""
    found = get_project(project)
    model = model_of(found, ref)
    if model is None:
        raise ModelNotFound(ref, found.name)
    return model


def model_of(project: Project, ref: str) -> MLModel | None:
    """``get_model`` in a project the caller has already looked up (``get_project``), or
    None: one query fewer for a statement that resolved its project already."""
    name, version = split_ref(ref)
    model = find_model(project.id, name, version)
    if model is not None and model.status in PENDING:
        recover_orphans([model])
    return model


def split_ref(ref: str) -> tuple[str, int | None]:
    name, dot, version = ref.rpartition(".")
    # ASCII digits only (int() refuses "²", which isdigit() accepts); id_value() makes an
    # over-long number one that matches no version (SQLite cannot bind it).
    if dot and name and is_id(version):
        return name, id_value(version)
    return ref, None


def find_model(project_id: int, name: str, version: int | None, *options: Any) -> MLModel | None:
    query = select(MLModel).where(MLModel.project_id == project_id,
                                  MLModel.name_key == lookup_key(name))
    if version is not None:
        query = query.where(MLModel.version == version)
    else:
        query = query.order_by(MLModel.active.desc(), MLModel.version.desc())
    return db.session.scalars(query.options(*options).limit(1)).first()


def lock_versions(project_id: int, name: str) -> list[MLModel]:
    """Every version of a model, oldest first, locked until the commit.

    RETRAIN and DROP MODEL both take these locks first: a DROP that waited for a RETRAIN's
    insert then deletes the new version too (its DELETE is a later statement and sees it),
    and a RETRAIN that waited for a DROP finds no version (404) — never an orphan. The lock
    is a write that changes nothing: on PostgreSQL it locks the rows, and on SQLite (where
    FOR UPDATE is ignored) it takes the database's write lock before anything is read.
    """
    db.session.execute(update(MLModel)
                       .where(MLModel.project_id == project_id,
                              MLModel.name_key == name_key(name))
                       .values(active=MLModel.active)
                       .execution_options(synchronize_session=False))
    return list(db.session.scalars(
        select(MLModel).where(MLModel.project_id == project_id,
                              MLModel.name_key == name_key(name))
        .order_by(MLModel.version).with_for_update()
        .execution_options(populate_existing=True)))  # as they are now, not as first read


def delete_model(project: str, ref: str) -> None:
    """Delete the model (every version, or the one ``name.N`` names) and its artifact.

    The active version of a model with other versions cannot be dropped alone (409):
    predictions without a version would have none to use. A model's only version can (the
    model goes with it, as DROP MODEL m).
    """
    get_project(project, "write")
    model = get_model(project, ref)
    _, version = split_ref(ref)
    audit.record_change("model", "delete", f"{project}.{ref}",
                        {"name": model.name, "version": model.version,
                         "data_source": model.data_source}, None)
    if version is None:
        ids = delete_versions(model.project_id, model.name)
    else:
        versions = lock_versions(model.project_id, model.name)
        if model.active and len(versions) > 1 and model in versions:
            db.session.rollback()
            raise ActiveVersion(f"Version {model.version} is the active version of model "
                                f"'{model.name}': make another version active first (SET "
                                f"model_active = {model.name}.N) or drop the whole model",
                                model=model.name, version=model.version)
        ids = list(db.session.scalars(delete(MLModel).where(MLModel.id == model.id)
                                      .returning(MLModel.id)))
    if not ids:
        # Deleted by another request since it was looked up: only that one answers 204.
        db.session.rollback()
        raise ModelNotFound(ref, get_project(project).name)
    db.session.commit()
    cache = current_app.extensions["quarry.model_cache"]
    for model_id in ids:
        cache.pop(model_id)


def delete_versions(project_id: int, name: str) -> list[int]:
    """Delete every version of the model; the ids this statement deleted."""
    where = (MLModel.project_id == project_id, MLModel.name_key == name_key(name))
    if db.session.scalar(select(MLModel.id).where(*where).limit(1)) is None:
        return []  # no write at all (on SQLite even a DELETE of nothing locks the store)
    lock_versions(project_id, name)
    # The DELETE is a later statement than the lock: a version a RETRAIN inserted while
    # this waited for its lock is seen, and deleted with the others.
    return list(db.session.scalars(delete(MLModel).where(*where).returning(MLModel.id)))


def set_active_version(project: str, name: str, version: int) -> MLModel:
    """Make version ``version`` the one that answers predictions made without a version."""
    found = get_project(project, "write")
    model_name, _ = split_ref(name)
    versions = lock_versions(found.id, model_name)
    if not versions:
        raise ModelNotFound(name, found.name)
    chosen = next((v for v in versions if v.version == version), None)
    if chosen is None:
        db.session.rollback()
        raise ModelNotFound(f"{versions[0].name}.{version}", found.name)
    if chosen.status != "complete":
        db.session.rollback()
        raise ModelNotReady(f"Version {version} of model '{chosen.name}' is not trained (status "
                            f"{chosen.status}): only a complete version can be active",
                            model_status=chosen.status)
    before = next((v.version for v in versions if v.active), None)
    for each in versions:
        each.active = each.id == chosen.id
    audit.record_change("model", "update", f"{found.name}.{chosen.name}",
                        {"active_version": before}, {"active_version": chosen.version})
    db.session.commit()
    return chosen


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


def predict(project: str, ref: str, rows: list[dict[str, Any]] | dict[str, Any], *,
            whole_columns: bool = False) -> list[dict]:
    """The rows with the predicted column, its confidence and an explanation added.

    ``whole_columns``: the rows are a table's (a JOIN), which must have every input column.
    """
    rows = [rows] if isinstance(rows, dict) else rows
    try:
        return ml.predict(_complete_loaded(project, ref) or _found_loaded(project, ref), rows,
                          whole_columns=whole_columns)
    except ml.PredictionError as exc:
        errors = {exc.column: [exc.message]} if exc.column else None
        raise Unprocessable(exc.message, title="Invalid prediction input", errors=errors) from exc


def _found_loaded(project: str, ref: str) -> ml.LoadedModel:
    """The unpacked model ``ref`` when the predict path's lookup missed it: the errors of
    get_model (404) and of a model not trained (409), or the model completed since."""
    model = get_model(project, ref)
    _require_complete(model)
    with _store_reader() as conn:
        loaded = _loaded(conn, model.id, model.updated_at)
    if loaded is None:
        raise ModelNotFound(ref, get_project(project).name)  # dropped since
    return loaded


def _complete_loaded(project: str, ref: str) -> ml.LoadedModel | None:
    """The unpacked complete model (version) ``ref`` of ``project`` — the predict path's;
    None when that is not simply found (get_model then says what is missing).

    One narrow statement finds the version's id and stamp, which is all this process's
    cache needs to tell whether what it holds is current; the artifact (MBs) is read only
    when it is not. Every predict asks the store, so a version made active anywhere (another
    worker, another instance on the same store) answers the next predict.
    """
    name, version = split_ref(ref)
    query = _VERSION_QUERY if version is not None else _ACTIVE_QUERY
    if (visible := access.visible_project_filter()) is not None:
        query = query.where(visible)  # not seen: get_model says so (404), as for the rest
    with _store_reader() as conn:
        found = conn.execute(query, {"project": lookup_key(project), "name": lookup_key(name),
                                     "version": version}).first()
        if found is None:
            return None
        return _loaded(conn, found.id, found.updated_at)


@contextmanager
def _store_reader() -> Iterator[Connection]:
    """A store connection for the predict path's reads.

    The request's own transaction when it has one (a signed-in caller's token was read in
    it); else a pooled connection outside the ORM session, which spares the session's
    set-up and its rollback at the end of the request. Where the store opens transactions
    over the wire (PostgreSQL), that connection reads in autocommit: one round trip instead
    of BEGIN … ROLLBACK. SQLite's driver begins no transaction for a SELECT.
    """
    if db.session.registry.has() and db.session().in_transaction():
        yield db.session.connection()
        return
    conn = db.engine.connect()
    if conn.dialect.name != "sqlite":
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
    with conn:
        yield conn


# Built once (values are bound per call): building the expression cost as much as running it.
# Table columns, not the mapped class: rows, not ORM objects, so no session work per predict.
_MODELS, _PROJECTS = MLModel.__table__, Project.__table__
_COMPLETE_QUERY = (select(_MODELS.c.id, _MODELS.c.updated_at)
                   .select_from(_MODELS.join(_PROJECTS, _PROJECTS.c.id == _MODELS.c.project_id))
                   .where(_PROJECTS.c.name_key == bindparam("project"),
                          _MODELS.c.name_key == bindparam("name"),
                          _MODELS.c.status == "complete")
                   .limit(1))
_VERSION_QUERY = _COMPLETE_QUERY.where(_MODELS.c.version == bindparam("version"))
_ACTIVE_QUERY = _COMPLETE_QUERY.where(_MODELS.c.active.is_(True))
_ARTIFACT_QUERY = (select(_MODELS.c.artifact, _MODELS.c.updated_at)
                   .where(_MODELS.c.id == bindparam("id"), _MODELS.c.status == "complete"))


def preload_models() -> int:
    """Unpack the active complete models into this process's cache (up to its size): in a
    gunicorn master before forking, so workers share them. Returns how many.

    scikit-learn, pandas and numpy are imported only when there is a model to unpack: a
    store without models would make every deployment hold them (134 MiB in the master,
    shared) for predictions that cannot come before a model is trained; each worker then
    imports them on its first prediction or training, and the next start shares them again.
    """
    models = db.session.execute(select(MLModel.id, MLModel.updated_at)
                                .where(MLModel.active.is_(True), MLModel.status == "complete")
                                .order_by(MLModel.updated_at.desc())
                                .limit(MODEL_CACHE_SIZE)).all()
    if not models:
        db.session.rollback()
        return 0
    ml.preload()
    count = 0
    with _store_reader() as conn:
        for model_id, updated_at in models:
            try:
                count += _loaded(conn, model_id, updated_at) is not None
            except ml.PredictionError:
                pass  # written by an incompatible version: its predict says so
    db.session.rollback()
    return count


def _loaded(conn: Connection, model_id: int, updated_at: datetime) -> ml.LoadedModel | None:
    """Model ``model_id``'s unpacked artifact: from this process's cache while the model is
    unchanged (same ``updated_at``), else read and unpacked; None when it is no longer
    a complete model (dropped since it was found)."""
    cache = current_app.extensions["quarry.model_cache"]
    cached = cache.get(model_id)
    if cached is not None and cached[0] == updated_at:
        return cached[1]
    row = conn.execute(_ARTIFACT_QUERY, {"id": model_id}).first()
    if row is None:
        return None
    loaded = ml.load_model(row.artifact)
    # The stamp read with the artifact: a change in between is not cached under the old one.
    cache.put(model_id, (row.updated_at, loaded))
    return loaded


def _require_complete(model: MLModel) -> None:
    if model.status != "complete":
        detail = f"Model '{model.name}' is not trained: its status is {model.status}"
        if model.error:
            detail += f" ({model.error})"
        raise ModelNotReady(detail, model_status=model.status, model_error=model.error,
                            model_progress=model.progress)
