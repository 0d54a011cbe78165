from typing import Any

from sqlalchemy import JSON, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import db
from .types import InProject


class KnowledgeBase(InProject, db.Model):
    """A project's knowledge base: its settings here; its chunks, vectors and words in the
    index file (app/kb/index.py), in the tables named by ``uid``, or in a table of a
    configured pgvector store (``params["storage"]``: store and table; app/kb/pgvector.py)."""

    __tablename__ = "knowledge_bases"
    __table_args__ = (UniqueConstraint("project_id", "name_key"),
                      {"sqlite_autoincrement": True})

    # Names the base's tables in the index file: never reused, so a base dropped with its
    # project (the store's cascade) cannot leave rows a new base would read.
    uid: Mapped[str] = mapped_column(String(32), unique=True)
    # content_columns, metadata_columns, id_column, chunk_size, chunk_overlap[, storage]
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # provider, model_name, base_url (the key is apart, encrypted)
    embedding: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    api_key: Mapped[str | None] = mapped_column(Text)
    # A rerank endpoint's provider, model_name, base_url (None: no reranking); its key apart
    reranking: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    reranking_api_key: Mapped[str | None] = mapped_column(Text)
