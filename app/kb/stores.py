"""Where a knowledge base is kept: the index file (the default), or a PostgreSQL with pgvector
that an administrator configured for Quarry (KB_STORES), or Quarry's own metadata store
when it is a PostgreSQL with pgvector (the name ``quarry``).

``CREATE KNOWLEDGE_BASE … USING storage = <store>[.<table>]`` names one (MindsDB names a
vector database it connected and a table in it). Only stores Quarry owns are written to:
a data source is never a store, however it is named; data sources stay read-only.
"""

from __future__ import annotations

from typing import Any

from flask import current_app

from ..errors import Unprocessable
from .index import KbIndex, current_index
from .pgvector import TABLE_NAME, PgVectorIndex

# The name of Quarry's own metadata store as a knowledge-base store.
OWN_STORE = "quarry"
_ENGINES = "quarry.kb_stores"


class _Engines(dict):
    """This process's engines on the vector stores, by store name (made on first use), and
    the tables of each that its searches have opened (PgVectorIndex.opened)."""

    def __init__(self) -> None:
        super().__init__()
        self.opened: dict[str, set[str]] = {}

    def dispose(self) -> None:
        for engine in self.values():
            engine.dispose()
        self.clear()


def check_settings(configured: Any) -> None:
    """KB_STORES at start: a JSON object of names → PostgreSQL URLs (RuntimeError naming
    the entry, never its URL, which holds a password)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    if not isinstance(configured, dict):
        raise RuntimeError('QUARRY_KB_STORES must be a JSON object: {"name": '
                           '"postgresql://user:password@host/db"}')
    for name, url in configured.items():
        if not TABLE_NAME.fullmatch(str(name).lower()):
            raise RuntimeError(f"QUARRY_KB_STORES: '{name}' is not a plain name (letters, "
                               "digits and _)")
        try:
            backend = make_url(url).get_backend_name() if isinstance(url, str) else None
        except ArgumentError:
            backend = None
        if backend != "postgresql":
            raise RuntimeError(f"QUARRY_KB_STORES['{name}'] must be the URL of a PostgreSQL "
                               "with pgvector (postgresql://…)")


def store_urls() -> dict[str, str]:
    """The stores a knowledge base may name → their SQLAlchemy URLs."""
    config = current_app.config
    stores = {str(k).lower(): str(v) for k, v in (config["KB_STORES"] or {}).items()}
    own = config["SQLALCHEMY_DATABASE_URI"]
    if OWN_STORE not in stores and own.startswith("postgresql"):
        stores[OWN_STORE] = own
    return stores


def parse_storage(text: str) -> tuple[str, str | None]:
    """(store, table or None) of ``storage = <store>[.<table>]``; Unprocessable when it is
    not that."""
    parts = [p.strip().strip('`"').lower() for p in str(text).split(".")]
    if len(parts) > 2 or not all(parts):
        raise Unprocessable(f"storage: '{text}' is not <store> or <store>.<table>",
                            title="Invalid knowledge base", errors={"storage": ["malformed"]})
    if len(parts) == 2 and not TABLE_NAME.fullmatch(parts[1]):
        raise Unprocessable(f"storage: table '{parts[1]}' is not a plain name (letters, "
                            "digits and _, at most 63)", title="Invalid knowledge base",
                            errors={"storage": ["bad table name"]})
    return parts[0], parts[1] if len(parts) == 2 else None


def unknown_store(name: str, data_source: bool) -> Unprocessable:
    """The error for a store that is not configured, listing the ones that are."""
    known = sorted(store_urls())
    listed = ", ".join(known) if known else "none (QUARRY_KB_STORES is empty and Quarry's " \
        "own store is not PostgreSQL)"
    why = (f"'{name}' is a data source, and data sources are only read: a knowledge base is "
           "kept in a store an administrator configured for Quarry") if data_source \
        else f"'{name}' is not a vector store Quarry knows"
    if name == OWN_STORE and OWN_STORE not in known:
        why = "Quarry's own metadata store is not PostgreSQL, so it cannot hold vectors"
    return Unprocessable(f"storage: {why}; the stores configured: {listed}",
                         title="Invalid knowledge base", errors={"storage": ["unknown store"]})


def pgvector_store(name: str) -> PgVectorIndex:
    """The configured store ``name`` (its engine made on first use, in the worker)."""
    engines = current_app.extensions.get(_ENGINES)
    if engines is None:
        engines = current_app.extensions.setdefault(_ENGINES, _Engines())
    engine = engines.get(name)
    if engine is None:
        url = store_urls().get(name)
        if url is None:
            raise unknown_store(name, False)
        engine = engines.setdefault(name, _engine(url))
    return PgVectorIndex(name, engine, current_app.config["KB_HNSW_EF_SEARCH"],
                         current_app.config["KB_STORE_EXACT_CHUNKS"],
                         engines.opened.setdefault(name, set()))


def _engine(url: str) -> Any:
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    # (every URL is PostgreSQL's: check_settings, and the own store only when it is)
    parsed = make_url(url).set(drivername="postgresql+psycopg")
    timeout = current_app.config["KB_STORE_CONNECT_TIMEOUT_S"]
    # No pre-ping (a round trip per search): a connection the store ended fails its
    # statement once (503), and the pool drops it when it comes back (its reset fails).
    return create_engine(parsed, pool_size=4, max_overflow=8,
                         connect_args={"connect_timeout": max(1, round(timeout))})


def index_of(uid: str, params: dict[str, Any]) -> tuple[KbIndex | PgVectorIndex, str]:
    """The index a knowledge base is kept in and its key there (uid or table)."""
    storage = params.get("storage")
    if storage is None:
        return current_index(), uid
    return pgvector_store(storage["store"]), storage["table"]


def default_table(uid: str) -> str:
    return f"kb_{uid}"
