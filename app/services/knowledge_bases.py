"""Knowledge bases: a project's text, searchable by meaning and by words, and their rules.

- names are unique per project (a unique key), creating, inserting and deleting need the
  right to change the project; listing, describing and searching, the right to read it (its
  members, as they use models); a user outside the project neither sees nor searches one;
- what an INSERT … SELECT reads is read with the inserter's own rights, through the one
  read-only data path (views expanded where they are named), as a training reads its rows;
- the settings are kept in the store; the chunks, their vectors and words in the index file
  (``app/kb/index.py``), or in a PostgreSQL with pgvector that an administrator configured
  (``storage = <store>``, ``app/kb/stores.py``), never in a data source; an id inserted
  again has its chunks replaced;
- embeddings come from the embedded model (no network), or from an OpenAI-compatible
  endpoint only when its base URL is one an administrator listed (EMBEDDING_ENDPOINTS): any
  other is refused before any request is made (no SSRF); its key is encrypted at rest and
  never shown;
- creations, inserts (with their row counts), deletions and drops are in the audit log.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from flask import current_app
from marshmallow import ValidationError
from sqlalchemy import and_, delete, select

from ..errors import (
    BadRequest,
    NameTaken,
    ObjectNotFound,
    ProjectNotFound,
    Unprocessable,
    VectorStoreUnavailable,
)
from ..extensions import db
from ..federation import run as federation
from ..kb import stores
from ..kb.embeddings import (
    LOCAL_MODEL,
    LOCAL_PROVIDER,
    EmbeddingError,
    EndpointModel,
    local_model,
)
from ..kb.index import Chunk, Filter, Hit, kb_folder, split_text
from ..kb.reranking import EndpointReranker
from ..rules.names import lookup_key, name_key, validate_name
from ..schemas.knowledge_bases import RerankingModel
from ..sql.errors import SqlError
from ..sql.sources import current_sources
from ..store import KnowledgeBase, Project
from . import access, audit
from . import sqlviews as view_service
from .common import commit, delete_or_gone
from .credentials import InvalidToken, current_keyring
from .projects import get_project

DEFAULT_LIMIT = 10
# The columns of a search's answer, in MindsDB's order.
HIT_COLUMNS = ("id", "chunk_id", "chunk_content", "metadata", "distance", "relevance")


class KnowledgeBaseNotFound(ObjectNotFound):
    kind = "Knowledge base"
    title = "Knowledge base not found"


def create_knowledge_base(project_name: str, name: str, options: dict[str, Any]
                          ) -> dict[str, Any]:
    """Create knowledge base ``project.name`` with ``options`` (KnowledgeBaseOptions, loaded)."""
    validate_name("knowledge base", name)
    project, existing = _lookup(project_name, name, "write")
    if existing is not None:
        raise NameTaken("Knowledge base", name, project.name)
    uid = uuid.uuid4().hex
    storage = _storage(options.get("storage"), uid)
    embedding, api_key = _embedding(options.get("embedding_model") or {})
    reranking, reranking_key = _reranking(options.get("reranking_model"))
    chunking = (options.get("preprocessing") or {}).get(
        "text_chunking_config", {"chunk_size": 1000, "chunk_overlap": 200})
    if chunking["chunk_overlap"] >= chunking["chunk_size"]:
        raise Unprocessable("preprocessing: chunk_overlap must be smaller than chunk_size",
                            title="Invalid knowledge base",
                            errors={"chunk_overlap": ["not below chunk_size"]})
    row = KnowledgeBase(
        project_id=project.id, name=name, name_key=name_key(name), uid=uid,
        params={"content_columns": options.get("content_columns") or ["content"],
                "metadata_columns": options.get("metadata_columns"),
                "id_column": options.get("id_column") or "id", **chunking,
                **({"storage": storage} if storage else {})},
        embedding=embedding, api_key=api_key, reranking=reranking,
        reranking_api_key=reranking_key)
    db.session.add(row)
    audit.record_change("knowledge_base", "create", f"{project.name}.{name}", None,
                        _settings(row))
    index, key = stores.index_of(uid, row.params)
    if storage is None:
        commit(lambda: NameTaken("Knowledge base", name, project.name))
        index.create(key)
    else:  # the table first: a name taken in the store leaves no knowledge base behind
        index.create(key)
        try:
            commit(lambda: NameTaken("Knowledge base", name, project.name))
        except BaseException:
            index.drop(key)
            raise
    return _entry(row, project, counts=(0, 0))


def _storage(given: Any, uid: str) -> dict[str, str] | None:
    """Where a new knowledge base is kept: None for the index file, else {store, table}
    of a configured vector store that has pgvector; Unprocessable for any other name."""
    if given is None or given == "":
        return None
    if isinstance(given, dict) and set(given) <= {"database", "table"} and all(
            isinstance(v, str) and v for v in given.values()) and "database" in given:
        # mindsdb_sdk's form: {"database": <store>, "table": <table>}
        given = ".".join(v for v in (given["database"], given.get("table")) if v)
    if not isinstance(given, str):
        raise Unprocessable("storage: a store name, <store>.<table>, or {\"database\": "
                            "<store>, \"table\": <table>}", title="Invalid knowledge base",
                            errors={"storage": ["not a name"]})
    store, table = stores.parse_storage(given)
    if store not in stores.store_urls():
        raise stores.unknown_store(store, current_sources().get(store) is not None)
    stores.pgvector_store(store).check()
    return {"store": store, "table": table or stores.default_table(uid)}


def _embedding(given: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The stored embedding settings and the encrypted key, or 422."""
    provider = given.get("provider", LOCAL_PROVIDER)
    model_name = given.get("model_name") or given.get("model")
    if provider == LOCAL_PROVIDER:
        if model_name not in (None, LOCAL_MODEL) or given.get("base_url"):
            raise Unprocessable(f"embedding_model: the embedded provider '{LOCAL_PROVIDER}' "
                                f"runs {LOCAL_MODEL} only, with no base_url",
                                title="Invalid embedding model")
        return {"provider": LOCAL_PROVIDER, "model_name": LOCAL_MODEL}, None
    base_url = (given.get("base_url") or "").rstrip("/")
    if not base_url or not model_name:
        raise Unprocessable("embedding_model: provider 'openai' needs model_name and base_url "
                            "(an OpenAI-compatible endpoint, e.g. http://host:11434/v1)",
                            title="Invalid embedding model")
    _require_listed(base_url, "embedding_model")
    return {"provider": "openai", "model_name": model_name, "base_url": base_url}, \
        _encrypted(given.get("api_key"), "embedding_model")


def _reranking(given: Any) -> tuple[dict[str, Any] | None, str | None]:
    """The stored reranking settings (None: no reranking) and the encrypted key, or 422."""
    if given is None or given is False:
        return None, None
    try:
        settings = RerankingModel().load(given if isinstance(given, dict) else {"": given})
    except ValidationError as exc:
        raise Unprocessable("reranking_model: false, or an object {provider, model_name, "
                            "base_url, api_key} naming a rerank endpoint",
                            title="Invalid reranking model",
                            errors={"reranking_model": exc.messages}) from None
    base_url = settings["base_url"].rstrip("/")
    _require_listed(base_url, "reranking_model")
    model_name = settings.get("model_name") or settings.get("model")
    if not model_name:
        raise Unprocessable("reranking_model: model_name is missing",
                            title="Invalid reranking model",
                            errors={"reranking_model": {"model_name": ["missing"]}})
    return {"provider": settings["provider"], "model_name": model_name,
            "base_url": base_url}, _encrypted(settings.get("api_key"), "reranking_model")


def _encrypted(api_key: str | None, field: str) -> str | None:
    """An endpoint's key as the store keeps it: encrypted (422 when no key is set up)."""
    if not api_key:
        return None
    keyring = current_keyring()
    if keyring is None:
        raise Unprocessable(f"{field}: an api_key is kept encrypted, but "
                            "QUARRY_ENCRYPTION_KEY is not set (see the README)",
                            title=f"Invalid {field.replace('_', ' ')}")
    return keyring.encrypt(api_key)


def _require_listed(base_url: str, field: str = "embedding_model") -> None:
    # The model endpoint the administrator set for agents (QUARRY_LLM_BASE_URL) is listed too.
    configured = [current_app.config["EMBEDDING_ENDPOINTS"] or "",
                  current_app.config["LLM_BASE_URL"] or ""]
    listed = [u.strip().rstrip("/") for text in configured for u in text.split(",")
              if u.strip()]
    if base_url not in listed:
        kind = "an embedding" if field == "embedding_model" else "a reranking"
        raise Unprocessable(f"{field}: base_url {base_url} is not {kind} "
                            "endpoint the administrator listed (QUARRY_EMBEDDING_ENDPOINTS: "
                            f"{', '.join(listed) or 'none'})", title="Endpoint not allowed",
                            errors={"base_url": ["not listed"]})


def drop_knowledge_base(project_name: str, name: str) -> None:
    project, row = _require(project_name, name, "write")
    index, key = stores.index_of(row.uid, row.params)
    in_store = bool(row.params.get("storage"))
    if in_store:  # first: a store that cannot be reached leaves the base as it was
        index.drop(key)
    audit.record_change("knowledge_base", "drop", f"{project.name}.{row.name}",
                        _settings(row), None)
    delete_or_gone(delete(KnowledgeBase).where(KnowledgeBase.id == row.id),
                   lambda: KnowledgeBaseNotFound(name, project.name))
    if not in_store:
        index.drop(key)


def list_knowledge_bases(project_name: str) -> list[dict[str, Any]]:
    project = get_project(project_name, "read")
    rows = db.session.scalars(select(KnowledgeBase).where(KnowledgeBase.project_id ==
                                                          project.id)
                              .order_by(KnowledgeBase.name_key)).all()
    counts = _counts(rows, lenient=True)
    return [_entry(row, project, counts[row.uid]) for row in rows]


def _counts(rows: Sequence[KnowledgeBase], lenient: bool = False
            ) -> dict[str, tuple[int | None, int | None]]:
    """(documents, chunks) of each knowledge base by uid: one statement per store. With
    ``lenient``, the bases of a store that cannot be reached (or is no longer configured)
    count None, so that a listing still shows the others."""
    by_store: dict[str | None, list[KnowledgeBase]] = {}
    for row in rows:
        by_store.setdefault((row.params.get("storage") or {}).get("store"), []).append(row)
    counts: dict[str, tuple[int | None, int | None]] = {}
    for group in by_store.values():
        try:
            index = stores.index_of(group[0].uid, group[0].params)[0]
            keyed = {stores.index_of(r.uid, r.params)[1]: r.uid for r in group}
            found = index.counts(list(keyed))
        except (VectorStoreUnavailable, Unprocessable):
            if not lenient:
                raise
            found, keyed = {}, {}
            counts.update({r.uid: (None, None) for r in group})
        counts.update({uid: found[key] for key, uid in keyed.items()})
    return counts


def get_knowledge_base(project_name: str, name: str) -> dict[str, Any]:
    project, row = _require(project_name, name, "read")
    return _entry(row, project)


def is_knowledge_base(project_name: str, name: str) -> bool:
    """Whether the caller may read a knowledge base ``project.name`` (a name it cannot see
    is then read as something else)."""
    return find_readable(project_name, name) is not None


# A knowledge base the caller may read, with its project, as ``find_readable`` found it.
Readable = tuple[Project, KnowledgeBase]


def find_readable(project_name: str, name: str) -> Readable | None:
    """The knowledge base ``project.name`` when the caller may read it, else None; given
    to ``search`` (``found``), it spares the search a second lookup."""
    if not lookup_key(name):
        return None
    project, row = _lookup(project_name, name, "read")
    return None if row is None else (project, row)


Progress = Callable[[int], None]


def insert(project_name: str, name: str, *, rows: Any = None, query: str | None = None
           ) -> dict[str, int]:
    """PUT …/knowledge_bases/<kb>: ``rows`` (an object or a list of them) or ``query``."""
    if (rows is None) == (query is None):
        raise Unprocessable("Give either rows or query (not both)", title="Invalid insert")
    if query is not None:
        return insert_query(project_name, name, query)
    return insert_rows(project_name, name, [rows] if isinstance(rows, dict) else rows)


def insert_rows(project_name: str, name: str, rows: Sequence[dict[str, Any]],
                progress: Progress | None = None) -> dict[str, int]:
    """Insert (upsert by id) ``rows``; {"rows": n, "chunks": m}. ``progress`` is called
    with the rows written after each batch (and may raise to stop the insert there)."""
    project, row = _require(project_name, name, "write")
    cap = current_app.config["KB_INSERT_MAX_ROWS"]
    if len(rows) > cap:
        raise Unprocessable(f"{len(rows)} rows given; one insert takes at most {cap} "
                            "(QUARRY_KB_INSERT_MAX_ROWS)", title="Too many rows")
    if not rows:  # nothing to write (an empty DataFrame from mindsdb_sdk): nothing written
        return {"rows": 0, "chunks": 0}
    columns = list(dict.fromkeys(k for r in rows for k in r))
    return _ingest(project, row, columns, [[[r.get(c) for c in columns] for r in rows]],
                   progress)


def insert_query(project_name: str, name: str, query: str, context: str | None = None,
                 progress: Progress | None = None) -> dict[str, int]:
    """Insert the rows of ``query`` (a SELECT on data sources, files or views), read with
    the caller's rights; ``context``: the database bare table names are in. The rows are
    streamed from the data path and embedded a batch at a time: memory stays bounded."""
    project, row = _require(project_name, name, "write")
    registry = access.queryable_sources()
    source = context if context is not None and registry.get(context) is not None else None
    expanded = view_service.expand(query, None if source else context, registry) or query
    cap = current_app.config["KB_INSERT_MAX_ROWS"]
    try:
        stream = federation.stream_rows(expanded, registry, source, max_rows=cap,
                                        timeout_s=current_app.config["KB_INSERT_TIMEOUT_S"])
    except SqlError as exc:
        raise Unprocessable(f"The rows to insert cannot be read: {exc.message}",
                            title="Invalid insert") from None
    try:
        return _ingest(project, row, list(stream.columns), _read(stream), progress)
    finally:
        stream.close()


class _ReadStopped(Exception):
    """The rows to insert stopped coming: ``message`` says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _read(stream: Any) -> Iterator[list[Any]]:
    """The stream's batches, until one that goes past its row cap (not inserted)."""
    try:
        for batch in stream.batches():
            if stream.truncated:
                cap = current_app.config["KB_INSERT_MAX_ROWS"]
                raise _ReadStopped(f"The query returns more than {cap} rows, the most one "
                                   "insert takes (QUARRY_KB_INSERT_MAX_ROWS); narrow it "
                                   "down (WHERE, LIMIT)")
            yield batch
    except SqlError as exc:
        raise _ReadStopped(f"The rows to insert could not be read on: {exc.message}") \
            from None


def _ingest(project: Project, row: KnowledgeBase, columns: list[str],
            batches: Iterable[Sequence[Sequence[Any]]], progress: Progress | None
            ) -> dict[str, int]:
    """Embed and write the records of ``batches`` (read one at a time), KB_INSERT_BATCH_ROWS
    documents per transaction; a failure keeps the transactions before it and says so."""
    embedder = _embedder(row)
    index, key = stores.index_of(row.uid, row.params)
    size = current_app.config["KB_INSERT_BATCH_ROWS"]
    done = {"rows": 0, "chunks": 0}

    def stopped(message: str, title: str) -> Unprocessable:
        _audit_insert(project, row, done["rows"], done["chunks"])
        where = f" ({done['rows']} rows were inserted before it)" if done["rows"] \
            else " (no row was inserted)"
        return Unprocessable(message + where, title=title)

    try:
        for records in batches:
            documents = _documents(row.params, columns, records)
            for start in range(0, len(documents), size):
                batch = documents[start:start + size]
                chunks = [c for doc_id, text, meta in batch
                          for c in _chunks(doc_id, text, meta, row.params)]
                vectors = embedder.embed([c.content for c in chunks])
                index.upsert(key, chunks, vectors)
                done["rows"] += len(batch)
                done["chunks"] += len(chunks)
                if progress is not None:
                    progress(done["rows"])
    except EmbeddingError as exc:
        raise stopped(exc.message, "Embedding failed") from None
    except _ReadStopped as exc:
        raise stopped(exc.message, "Invalid insert") from None
    except Unprocessable:
        raise
    except BaseException:  # stopped (cancelled) or failed: what was written is audited
        _audit_insert(project, row, done["rows"], done["chunks"])
        raise
    _audit_insert(project, row, done["rows"], done["chunks"])
    return {"rows": done["rows"], "chunks": done["chunks"]}


def _audit_insert(project: Project, row: KnowledgeBase, rows: int, chunks: int) -> None:
    audit.record_change("knowledge_base", "insert", f"{project.name}.{row.name}", None,
                        {"rows": rows, "chunks": chunks})
    db.session.commit()


def _documents(params: dict[str, Any], columns: list[str],
               records: Sequence[Sequence[Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    """(id, text, metadata) of each record, the last of each id only."""
    position = {c.lower(): i for i, c in enumerate(columns)}
    content = params["content_columns"]
    missing = [c for c in content + (params["metadata_columns"] or [])
               if c.lower() not in position]
    if missing:
        raise Unprocessable(f"Column(s) {', '.join(missing)} of the knowledge base are not "
                            f"among the columns inserted: {', '.join(columns) or 'none'}",
                            title="Invalid insert")
    id_at = position.get(params["id_column"].lower())
    content_at = [position[c.lower()] for c in content]
    named = params["metadata_columns"]
    meta_at = [(c, position[c.lower()]) for c in named] if named is not None else \
        [(c, i) for i, c in enumerate(columns) if i not in content_at and i != id_at]
    documents: dict[str, tuple[str, str, dict[str, Any]]] = {}
    for record in records:
        parts = [str(record[i]) for i in content_at if record[i] is not None]
        text = "\n".join(parts)
        # Without an id column, a document is known by its text (as MindsDB does).
        doc_id = str(record[id_at]) if id_at is not None and record[id_at] is not None \
            else hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()
        documents[doc_id] = (doc_id, text, {c: record[i] for c, i in meta_at})
    return list(documents.values())


def _chunks(doc_id: str, text: str, metadata: dict[str, Any], params: dict[str, Any]
            ) -> list[Chunk]:
    spans = split_text(text, params["chunk_size"], params["chunk_overlap"])
    return [Chunk(doc_id, n, len(spans), start, end, text[start:end], metadata)
            for n, (start, end) in enumerate(spans, 1)]


def _embedder(row: KnowledgeBase) -> Any:
    settings = row.embedding
    if settings["provider"] == LOCAL_PROVIDER:
        return local_model(current_app.config.get("KB_MODEL_DIR") or kb_folder())
    _require_listed(settings["base_url"])  # the list may have changed since the create
    return EndpointModel(settings["base_url"], settings["model_name"],
                         _decrypted(row.api_key, "embedding"),
                         current_app.config["EMBEDDING_TIMEOUT_S"])


def _reranker(row: KnowledgeBase) -> EndpointReranker:
    settings = row.reranking
    _require_listed(settings["base_url"], "reranking_model")
    return EndpointReranker(settings["base_url"], settings["model_name"],
                            _decrypted(row.reranking_api_key, "reranking"),
                            current_app.config["EMBEDDING_TIMEOUT_S"])


def _decrypted(stored: str | None, kind: str) -> str | None:
    if not stored:
        return None
    keyring = current_keyring()
    try:
        api_key = keyring.decrypt(stored) if keyring is not None else None
    except InvalidToken:
        api_key = None
    if api_key is None:
        raise BadRequest(f"The {kind} endpoint's key cannot be decrypted: "
                         "QUARRY_ENCRYPTION_KEY lacks the key that encrypted it",
                         title="Credentials unreadable")
    return api_key


def delete_documents(project_name: str, name: str, filters: Sequence[Filter]) -> int:
    """Delete the documents the filters (on id and metadata) keep; how many."""
    project, row = _require(project_name, name, "write")
    filters = _checked(row, filters)
    index, key = stores.index_of(row.uid, row.params)
    doc_ids = sorted({hit.chunk.doc_id for hit in index.listing(key, filters, None)})
    count = index.delete(key, doc_ids)
    audit.record_change("knowledge_base", "delete", f"{project.name}.{row.name}", None,
                        {"rows": count})
    db.session.commit()
    return count


def search(project_name: str, name: str, *, content: str | None,
           filters: Sequence[Filter] = (), min_relevance: float | None = None,
           alpha: float | None = None, limit: int | None = None,
           reranking: bool | None = None, found: Readable | None = None,
           words: str | None = None) -> list[dict[str, Any]]:
    """The chunks best matching ``content`` (by meaning; with ``alpha``, fused with the
    BM25 ranking of its words, or of ``words`` when given; then reranked when the knowledge
    base has a reranking model and ``reranking`` is not False), or without it, the chunks
    the filters keep. ``found``: the knowledge base as ``find_readable`` answered it in
    this statement."""
    project, row = found if found is not None else _require(project_name, name, "read")
    filters = _checked(row, filters)
    if reranking and row.reranking is None:
        raise Unprocessable(f"Knowledge base {project.name}.{row.name} has no "
                            "reranking_model: leave reranking out or write reranking = false",
                            title="No reranking model")
    index, key = stores.index_of(row.uid, row.params)
    if limit == 0:
        return []
    if content is None:
        answer = [_hit(hit) for hit in index.listing(key, filters, limit)]
    else:
        try:
            vector = _embedder(row).embed([content])[0]
        except EmbeddingError as exc:
            raise Unprocessable(exc.message, title="Embedding failed") from None
        wanted = DEFAULT_LIMIT if limit is None else limit
        rerank = row.reranking is not None and reranking is not False
        hits = index.search(key, vector, words or content, filters, alpha=alpha,
                            limit=_rerank_depth(wanted) if rerank else wanted)
        answer = [_hit(hit) for hit in hits]
        if rerank:
            answer = _reranked(row, content, answer)[:wanted]
    if min_relevance is not None:
        answer = [h for h in answer if h["relevance"] is not None
                  and h["relevance"] >= min_relevance]
    return answer


def _rerank_depth(limit: int) -> int:
    """How many of the search's best chunks the reranker scores: four times the answer, at
    least 40, at most 200 (unless the answer itself is longer)."""
    return max(limit, min(max(4 * limit, 40), 200))


def _reranked(row: KnowledgeBase, content: str, hits: list[dict[str, Any]]
              ) -> list[dict[str, Any]]:
    """``hits`` ordered by the reranking model's scores, which become their relevance (the
    distance stays the vector search's)."""
    try:
        scores = _reranker(row).scores(content, [h["chunk_content"] for h in hits])
    except EmbeddingError as exc:
        raise Unprocessable(exc.message, title="Reranking failed") from None
    for hit, score in zip(hits, scores, strict=True):
        hit["relevance"] = score
    return sorted(hits, key=lambda h: -h["relevance"])


def _hit(hit: Hit) -> dict[str, Any]:
    distance = hit.distance
    return {"id": hit.chunk.doc_id, "chunk_id": hit.chunk.chunk_id,
            "chunk_content": hit.chunk.content, "metadata": hit.chunk.metadata,
            "distance": distance,
            # MindsDB's relevance of a distance
            "relevance": None if distance is None else 1 / (1 + distance)}


def _checked(row: KnowledgeBase, filters: Sequence[Filter]) -> list[Filter]:
    """The filters, a condition on the id column (by its own name too) made one on the id;
    Unprocessable for a column that is neither the id nor metadata."""
    id_column = row.params["id_column"].lower()
    named = row.params["metadata_columns"]
    allowed = None if named is None else {c.lower() for c in named}
    checked = []
    for item in filters:
        key = item.field.lower()
        if key in ("id", id_column):
            checked.append(Filter("id", item.op, item.value))
            continue
        if allowed is not None and key not in allowed:
            raise Unprocessable(f"Column '{item.field}' is neither the id nor a metadata "
                                f"column of the knowledge base ({', '.join(named) or 'none'})",
                                title="Unknown column")
        checked.append(item)
    return checked


def _lookup(project_name: str, name: str, need: str
            ) -> tuple[Project, KnowledgeBase | None]:
    """The project (when the caller may ``need`` it, as ``get_project``) and its knowledge
    base ``name`` or None, in one statement (a search pays for each round trip)."""
    found = db.session.execute(
        select(Project, KnowledgeBase).outerjoin(KnowledgeBase, and_(
            KnowledgeBase.project_id == Project.id,
            KnowledgeBase.name_key == lookup_key(name)))
        .where(Project.name_key == lookup_key(project_name))).first()
    if found is None:
        raise ProjectNotFound(project_name)
    return access.require_project(found[0], need), found[1]


def _require(project_name: str, name: str, need: str) -> tuple[Project, KnowledgeBase]:
    project, row = _lookup(project_name, name, need)
    if row is None:
        raise KnowledgeBaseNotFound(name, project.name)
    return project, row


def _settings(row: KnowledgeBase) -> dict[str, Any]:
    return {"params": row.params, "embedding_model": row.embedding,
            "reranking_model": row.reranking}


def _entry(row: KnowledgeBase, project: Project,
           counts: tuple[int | None, int | None] | None = None) -> dict[str, Any]:
    documents, chunks = counts if counts is not None else _counts([row])[row.uid]
    params = row.params
    storage = params.get("storage") or {}
    return {"name": row.name, "project": project.name, "embedding_model": row.embedding,
            "reranking_model": row.reranking, "vector_database": storage.get("store"),
            "vector_database_table": storage.get("table"),
            "content_columns": params["content_columns"],
            "metadata_columns": params["metadata_columns"], "id_column": params["id_column"],
            "params": {"preprocessing": {"text_chunking_config": {
                "chunk_size": params["chunk_size"],
                "chunk_overlap": params["chunk_overlap"]}}},
            "documents": documents, "chunks": chunks,
            "created_at": row.created_at, "updated_at": row.updated_at}
