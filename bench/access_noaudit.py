"""Quarry as ``wsgi:app``, with the statements' audit record left out: the floor that
``bench/access.py`` measures the record's cost against. A benchmark's tool, never served."""

from app.services import audit

audit.record_statement = lambda *args, **kwargs: None  # the record alone is skipped

from wsgi import app  # noqa: E402

__all__ = ["app"]
