from datetime import datetime
from typing import Any

from sqlalchemy import JSON, LargeBinary, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, deferred, mapped_column

from ..extensions import db
from .types import InProject, UTCDateTime


class MLModel(InProject, db.Model):
    """A trained (or training) machine-learning model: the resource, not an ORM model."""

    __tablename__ = "ml_models"
    __table_args__ = (UniqueConstraint("project_id", "name_key", "version"),
                      {"sqlite_autoincrement": True})

    version: Mapped[int] = mapped_column(default=1)
    active: Mapped[bool] = mapped_column(default=True)
    status: Mapped[str] = mapped_column(String(16), default="generating")
    predict: Mapped[str] = mapped_column(String(255))
    accuracy: Mapped[float | None]
    error: Mapped[str | None] = mapped_column(Text)
    engine: Mapped[str] = mapped_column(String(32), default="sklearn")
    data_source: Mapped[str] = mapped_column(String(255))
    fetch_data_query: Mapped[str] = mapped_column(Text)
    training_options: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    training_time: Mapped[float | None]
    # Which process trains it and when it last said so: a model whose trainer died is
    # found by a stale heartbeat and marked error, never left "training" forever.
    trainer: Mapped[str | None] = mapped_column(String(255))
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # While it trains: {"phase": …, "rows_read": …}; what a describe shows of a running job.
    progress: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # How many times a trainer started this version: a Celery task redelivered after its
    # worker died counts again, and past TRAINING_MAX_ATTEMPTS the version is marked error.
    attempts: Mapped[int] = mapped_column(default=0, server_default="0")
    # FINETUNE: the version whose training rows and options this one started from.
    base_version: Mapped[int | None]
    description: Mapped[dict[str, Any] | None] = deferred(mapped_column(JSON))
    # The fitted pipeline (joblib bytes): in the store, so every worker on every host has it.
    artifact: Mapped[bytes | None] = deferred(mapped_column(LargeBinary))
