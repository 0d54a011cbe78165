from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from ..extensions import db


class CatalogVersion(db.Model):
    """The version of one kind of object that processes keep built in memory (the data
    sources and their pools): a new random stamp, written in the same transaction as every
    change of that kind. Each request reads it (one row by its key) and rebuilds what it
    holds only when it moved, so a change made through one worker or instance is seen by the
    very next request on every other."""

    __tablename__ = "catalog_versions"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    version: Mapped[str] = mapped_column(String(32))
