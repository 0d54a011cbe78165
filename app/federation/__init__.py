"""Federated SELECT: one read-only statement over the tables of several data sources.

``plan.py`` splits the statement into one leg per table reference (sqlglot's qualifier
gives every column its table), ``legs.py`` runs each leg through the data path's read-only
stream (``sql/stream.py``) into the engine as Arrow batches, ``engine.py`` owns the
in-process DuckDB that joins them, and ``run.py`` ties the three under one time limit and
one cancel; ``dynamic.py`` lets a small leg's join keys cut a larger leg at its source.
docs/federation.md says why DuckDB and how a statement is split.
"""
