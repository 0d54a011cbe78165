from sqlalchemy import String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import db
from .types import InProject


class SqlView(InProject, db.Model):
    """A named SELECT of a project (CREATE VIEW p.v AS (…)), read as the table p.v: the
    statement is expanded where the view is named, and read with the reader's rights."""

    __tablename__ = "sql_views"
    __table_args__ = (UniqueConstraint("project_id", "name_key"),
                      {"sqlite_autoincrement": True})

    query: Mapped[str] = mapped_column(Text)
    # CREATE VIEW v FROM db (…): the data source the statement's bare table names are in.
    database: Mapped[str | None] = mapped_column(String(63))
