from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, String
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import db
from .types import UTCDateTime, utcnow


class UploadedFile(db.Model):
    """A file uploaded as the table ``files.<name>``; its bytes are the Parquet file
    ``<FILES_DIR>/<name_key>.parquet`` (app/sql/files.py)."""

    __tablename__ = "uploaded_files"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(63))
    # Lower-cased name: unique, so two racing uploads of one new name cannot both win.
    name_key: Mapped[str] = mapped_column(String(63), unique=True)
    row_count: Mapped[int] = mapped_column(BigInteger)
    columns: Mapped[list[Any]] = mapped_column(JSON)
    size: Mapped[int] = mapped_column(BigInteger)       # bytes of the stored Parquet file
    original_name: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)
