"""Knowledge bases kept in a real PostgreSQL with pgvector (``storage = <store>``), through
HTTP: the answers the index file gives, upserts, deletes, drops, a second instance, rights,
the stores that may be named and a store that cannot be reached."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest
from psycopg import sql
from sqlalchemy.engine import make_url

from app import create_app
from app.services import auth as auth_service
from tests.auth.conftest import PASSWORD, make_auth_app  # noqa: F401 - a fixture
from tests.conftest import _migrate, fresh_store_url
from tests.helpers import assert_problem
from tests.kb.scripted import endpoint_pair
from tests.kb.test_knowledge_bases import DOCS, error, make_kb, ok, rows
from tests.pgvector_server import database, server_uri


@pytest.fixture(scope="session")
def pgvector_uri() -> str:
    return server_uri()


@pytest.fixture(scope="session")
def vectors_url(pgvector_uri):
    """A database of the pgvector server, without the extension created (the first
    knowledge base creates it)."""
    with database(pgvector_uri, "quarry_kb") as url:
        yield url


@pytest.fixture
def store_url(request, tmp_path) -> str:
    # The metadata store is not what these tests are about: SQLite, unless a test asks.
    request.param = getattr(request, "param", "sqlite")
    return fresh_store_url(request, tmp_path)


@pytest.fixture
def client(make_app, tmp_path, vectors_url):
    return make_app(DEMO_SOURCE=True, KB_DIR=str(tmp_path / "kb"),
                    KB_STORES={"vectors": vectors_url}).test_client()


def tables(url: str) -> set[str]:
    """The tables of a database on the pgvector server."""
    with psycopg.connect(make_url(url).set(drivername="postgresql").render_as_string(
            hide_password=False)) as conn:
        return {r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}


QUESTIONS = [
    "SELECT * FROM mindsdb.{kb} WHERE content = 'I cannot log in, I lost my credentials'",
    "SELECT * FROM mindsdb.{kb} WHERE content = 'when do I get my money back' LIMIT 3",
    "SELECT * FROM mindsdb.{kb} WHERE content = 'paper jam' AND category = 'billing'",
    "SELECT * FROM mindsdb.{kb} WHERE content = 'paper jam' AND year >= 2024 "
    "AND category IN ('hardware', 'billing')",
    "SELECT * FROM mindsdb.{kb} WHERE content = 'paper jam' AND relevance >= 0.6",
    "SELECT * FROM mindsdb.{kb} WHERE content = 'PDF' AND hybrid_search_alpha = 0 LIMIT 1",
    "SELECT * FROM mindsdb.{kb} WHERE content = 'PDF invoices' AND hybrid_search = true",
    "SELECT * FROM mindsdb.{kb} WHERE category LIKE 'bill%' AND id != 2",
]


def test_pgvector_answers_what_the_index_file_answers(client, vectors_url):
    make_kb(client, "local")
    make_kb(client, "vec", ", storage = vectors")
    assert {"kb_" in t for t in tables(vectors_url)} == {True}
    for question in QUESTIONS:
        local = rows(ok(client, question.format(kb="local")))
        kept = rows(ok(client, question.format(kb="vec")))
        assert local, question
        assert [r["chunk_id"] for r in kept] == [r["chunk_id"] for r in local], question
        for mine, theirs in zip(kept, local, strict=True):
            assert mine["metadata"] == theirs["metadata"]
            assert mine["chunk_content"] == theirs["chunk_content"]
            assert mine["distance"] == pytest.approx(theirs["distance"], abs=1e-5)
            assert mine["relevance"] == pytest.approx(theirs["relevance"], abs=1e-5)
    # by words alone, the one document with the word comes first
    assert rows(ok(client, QUESTIONS[5].format(kb="vec")))[0]["id"] == "2"
    described = rows(ok(client, "DESCRIBE KNOWLEDGE_BASE mindsdb.vec"))[0]
    assert described["DOCUMENTS"] == len(DOCS) and described["STORAGE"].startswith("vectors.kb_")


def test_upsert_delete_rest_and_drop(client, vectors_url):
    ok(client, "CREATE KNOWLEDGE_BASE mindsdb.notes USING storage = vectors.team_notes, "
               "metadata_columns = ['author'], preprocessing = {'text_chunking_config': "
               "{'chunk_size': 40, 'chunk_overlap': 10}}")
    assert "team_notes" in tables(vectors_url)
    base = "/api/projects/mindsdb/knowledge_bases"
    put = client.put(f"{base}/notes", json={"knowledge_base": {"rows": [
        {"id": "a", "content": "The backup runs every night at two, and the copies are "
                               "kept for thirty days.", "author": "ops"},
        {"id": "b", "content": "Lunch is served at noon.", "author": "hr"}]}})
    assert put.status_code == 200, put.get_json()
    assert put.get_json()["rows"] == 2 and put.get_json()["chunks"] > 2
    got = client.get(f"{base}/notes").get_json()
    assert (got["vector_database"], got["vector_database_table"]) == ("vectors", "team_notes")
    # mindsdb_sdk names the storage as {"database", "table"}
    made = client.post(base, json={"knowledge_base": {
        "name": "sdk", "storage": {"database": "vectors", "table": "sdk_chunks"}}})
    assert made.status_code == 201, made.get_json()
    assert made.get_json()["vector_database_table"] == "sdk_chunks"
    assert "sdk_chunks" in tables(vectors_url)
    listing = rows(ok(client, "SELECT chunk_id FROM mindsdb.notes WHERE id = 'a'"))
    total = len(listing)
    assert total > 1 and [r["chunk_id"].split(":")[1] for r in listing] == \
        [f"{n}of{total}" for n in range(1, total + 1)]
    # an id inserted again has its chunks replaced
    ok(client, "INSERT INTO mindsdb.notes (id, content, author) VALUES ('a', 'Short now.', "
               "'dev')")
    assert rows(ok(client, "SELECT chunk_id, metadata FROM mindsdb.notes WHERE id = 'a'")) == [
        {"chunk_id": "a:1of1:0to10", "metadata": {"author": "dev"}}]
    found = rows(ok(client, "SELECT id FROM mindsdb.notes WHERE content = 'when is food "
                            "served' LIMIT 1"))
    assert found == [{"id": "b"}]
    ok(client, "DELETE FROM mindsdb.notes WHERE author = 'hr'")
    assert [r["id"] for r in rows(ok(client, "SELECT id FROM mindsdb.notes"))] == ["a"]
    assert client.get(f"{base}/notes").get_json()["documents"] == 1
    # a table of that name is taken: the store's table is never shared
    error(client, "CREATE KNOWLEDGE_BASE mindsdb.again USING storage = vectors.team_notes",
          "team_notes", "already has")
    assert client.delete(f"{base}/notes").status_code == 204
    assert "team_notes" not in tables(vectors_url)
    ok(client, "CREATE KNOWLEDGE_BASE mindsdb.again USING storage = vectors.team_notes")
    # a table gone from the store (dropped by hand): empty answers, and an insert makes it
    with psycopg.connect(make_url(vectors_url).set(drivername="postgresql").render_as_string(
            hide_password=False), autocommit=True) as conn:
        conn.execute("DROP TABLE team_notes")
    assert ok(client, "SELECT * FROM mindsdb.again WHERE content = 'x'")["data"] == []
    ok(client, "INSERT INTO mindsdb.again (id, content) VALUES (1, 'back again')")
    assert ok(client, "SELECT id FROM mindsdb.again WHERE content = 'x'")["data"] == [["1"]]


def test_concurrent_inserts_of_one_id_leave_one_copy(client):
    ok(client, "CREATE KNOWLEDGE_BASE mindsdb.race USING storage = vectors")
    app = client.application
    answers: list[dict] = []

    def insert(n: int) -> None:
        answers.append(app.test_client().post("/api/sql/query", json={
            "query": f"INSERT INTO mindsdb.race (id, content) VALUES (1, 'version {n}'), "
                     f"({10 + n}, 'other {n}')"}).get_json())

    workers = [threading.Thread(target=insert, args=(n,)) for n in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [a["type"] for a in answers] == ["ok"] * 4, answers
    assert len(rows(ok(client, "SELECT chunk_id FROM mindsdb.race WHERE id = 1"))) == 1
    assert len(ok(client, "SELECT id FROM mindsdb.race")["data"]) == 5


def test_a_second_instance_sees_the_same_knowledge_base(make_app, tmp_path, vectors_url):
    first = make_app(KB_DIR=str(tmp_path / "one"),
                     KB_STORES={"vectors": vectors_url}).test_client()
    ok(first, "CREATE KNOWLEDGE_BASE mindsdb.shared USING storage = vectors")
    ok(first, "INSERT INTO mindsdb.shared (id, content) VALUES (1, 'The office closes at "
              "six on Fridays.')")
    # another instance on the same metadata store, with another index folder
    second = make_app(KB_DIR=str(tmp_path / "two"),
                      KB_STORES={"vectors": vectors_url}).test_client()
    found = rows(ok(second, "SELECT id, chunk_content FROM mindsdb.shared WHERE content = "
                            "'opening hours at the end of the week'"))
    assert found == [{"id": "1", "chunk_content": "The office closes at six on Fridays."}]
    ok(second, "INSERT INTO mindsdb.shared (id, content) VALUES (2, 'Parking is free.')")
    assert len(ok(first, "SELECT id FROM mindsdb.shared")["data"]) == 2


def test_the_stores_that_may_be_named(client, make_app, tmp_path, vectors_url, pg_store):
    error(client, "CREATE KNOWLEDGE_BASE mindsdb.k USING storage = elsewhere",
          "'elsewhere' is not a vector store", "vectors")
    # a data source is read, never written: it is no store, even under the name MindsDB uses
    error(client, "CREATE KNOWLEDGE_BASE mindsdb.k USING storage = demo.kb_table",
          "'demo' is a data source", "vectors")
    # Quarry's own store is SQLite here
    error(client, "CREATE KNOWLEDGE_BASE mindsdb.k USING storage = quarry", "not PostgreSQL")
    error(client, "CREATE KNOWLEDGE_BASE mindsdb.k USING storage = vectors.`bad-name`",
          "not a plain name")
    created = client.post("/api/projects/mindsdb/knowledge_bases", json={"knowledge_base": {
        "name": "k", "storage": "nowhere"}})
    assert_problem(created, 422, "nowhere", "vectors")
    assert client.post("/api/projects/mindsdb/knowledge_bases", json={"knowledge_base": {
        "name": "k", "storage": ["vectors"]}}).status_code == 422
    # the machine's PostgreSQL has no pgvector: said so, nothing made
    plain = make_app(KB_DIR=str(tmp_path / "kb"),
                     KB_STORES={"plain": pg_store}).test_client()
    error(plain, "CREATE KNOWLEDGE_BASE mindsdb.k USING storage = plain",
          "'plain'", "without the pgvector extension")
    assert ok(plain, "SHOW KNOWLEDGE_BASES")["data"] == []


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_quarrys_own_postgresql_without_pgvector_says_so(client):
    error(client, "CREATE KNOWLEDGE_BASE mindsdb.k USING storage = quarry",
          "'quarry'", "without the pgvector extension")


def test_quarrys_own_postgresql_with_pgvector_keeps_them(make_app, pgvector_uri, tmp_path):
    with database(pgvector_uri, "quarry_own") as url:
        _migrate(url, str(tmp_path))
        # (the app's connections are closed by the database's forced drop at the end)
        client = make_app(DATABASE_URL=url, KB_DIR=str(tmp_path / "kb")).test_client()
        make_kb(client, "own", ", storage = quarry")
        found = rows(ok(client, "SELECT id FROM mindsdb.own WHERE content = 'when do I get "
                                "my money back' LIMIT 1"))
        assert found == [{"id": "4"}]
        assert any(t.startswith("kb_") for t in tables(url))
        ok(client, "DROP KNOWLEDGE_BASE mindsdb.own")
        assert not any(t.startswith("kb_") for t in tables(url))


def test_a_store_that_cannot_be_reached_is_named_never_its_password(make_app, tmp_path,
                                                                     vectors_url):
    down = "postgresql://kbuser:s3cret-pw@127.0.0.1:9/vectors"
    client = make_app(KB_DIR=str(tmp_path / "kb"), KB_STORES={"vectors": vectors_url,
                                                              "down": down}).test_client()
    created = client.post("/api/projects/mindsdb/knowledge_bases", json={"knowledge_base": {
        "name": "k", "storage": "down"}})
    body = assert_problem(created, 503, "down", "cannot be reached")
    assert "s3cret" not in str(body) and "127.0.0.1" not in str(body)
    ok(client, "CREATE KNOWLEDGE_BASE mindsdb.moved USING storage = vectors")
    ok(client, "INSERT INTO mindsdb.moved (id, content) VALUES (1, 'x')")
    # the administrator points the store elsewhere, where nothing answers
    moved = make_app(KB_DIR=str(tmp_path / "kb"),
                     KB_STORES={"vectors": down}).test_client()
    searched = moved.get("/api/projects/mindsdb/knowledge_bases/moved")
    body = assert_problem(searched, 503, "'vectors'", "cannot be reached")
    assert "s3cret" not in str(body)
    answer = error(moved, "SELECT * FROM mindsdb.moved WHERE content = 'x'", "'vectors'")
    assert "s3cret" not in str(answer)
    # a listing still shows it (its counts unknown); a drop leaves it as it was
    shown = rows(ok(moved, "SHOW KNOWLEDGE_BASES"))
    assert [(r["NAME"], r["DOCUMENTS"]) for r in shown] == [("moved", None)]
    assert_problem(moved.delete("/api/projects/mindsdb/knowledge_bases/moved"), 503,
                   "'vectors'")
    assert len(ok(client, "SELECT id FROM mindsdb.moved")["data"]) == 1
    # a store no longer configured at all
    gone = make_app(KB_DIR=str(tmp_path / "kb")).test_client()
    error(gone, "SELECT * FROM mindsdb.moved WHERE content = 'x'", "'vectors'")


def test_outsiders_neither_list_nor_search(make_auth_app, tmp_path, vectors_url):  # noqa: F811
    app = make_auth_app(KB_DIR=str(tmp_path / "kb"), KB_STORES={"vectors": vectors_url})
    client = app.test_client()
    with app.app_context():
        auth_service.create_user("alice", PASSWORD)
        auth_service.create_user("bob", PASSWORD)
        tokens = {n: auth_service.create_token(n, "t")[1] for n in ("alice", "bob")}

    def as_user(who: str, query: str) -> dict:
        return client.post("/api/sql/query", json={"query": query},
                           headers={"Authorization": f"Bearer {tokens[who]}"}).get_json()

    assert as_user("alice", "CREATE PROJECT secret")["type"] == "ok"
    assert as_user("alice", "CREATE KNOWLEDGE_BASE secret.kb USING storage = vectors"
                   )["type"] == "ok"
    assert as_user("alice", "INSERT INTO secret.kb (id, content) VALUES "
                            "(1, 'the launch date is May')")["type"] == "ok"
    assert as_user("alice", "SELECT id FROM secret.kb WHERE content = 'launch'")[
        "data"] == [["1"]]
    body = as_user("bob", "SELECT * FROM secret.kb WHERE content = 'launch'")
    assert body["type"] == "error" and "May" not in str(body), body
    listed = client.get("/api/projects/secret/knowledge_bases",
                        headers={"Authorization": f"Bearer {tokens['bob']}"})
    assert listed.status_code == 404
    body = as_user("bob", "DELETE FROM secret.kb WHERE id = 1")
    assert body["type"] == "error", body
    assert as_user("alice", "SELECT id FROM secret.kb")["data"] == [["1"]]


def test_connections_the_store_ended_are_replaced(client, vectors_url):
    ok(client, "CREATE KNOWLEDGE_BASE mindsdb.kept USING storage = vectors")
    ok(client, "INSERT INTO mindsdb.kept (id, content) VALUES (1, 'still here')")
    search = "SELECT id FROM mindsdb.kept WHERE content = 'here'"
    assert ok(client, search)["data"] == [["1"]]
    # The store ends every session of Quarry's (as a restart does).
    url = make_url(vectors_url)
    with psycopg.connect(url.set(drivername="postgresql").render_as_string(
            hide_password=False), autocommit=True) as admin:
        ended = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                              "WHERE datname = %s AND pid <> pg_backend_pid()",
                              (url.database,)).fetchone()[0]
    assert ended >= 1
    # A pooled connection may learn it only when used (a 503 naming the store) ...
    first = run_body(client, search)
    assert first["type"] == "ok" or "'vectors'" in first["error_message"], first
    # ... and the pool makes new ones: the next searches answer.
    assert ok(client, search)["data"] == [["1"]]
    assert ok(client, search)["data"] == [["1"]]


def run_body(client, query: str) -> dict:
    response = client.post("/api/sql/query", json={"query": query})
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def test_a_project_drop_takes_its_tables(client, vectors_url):
    ok(client, "CREATE PROJECT p1")
    ok(client, "CREATE KNOWLEDGE_BASE p1.docs USING storage = vectors.p1_docs")
    ok(client, "INSERT INTO p1.docs (id, content) VALUES (1, 'kept in the store')")
    assert "p1_docs" in tables(vectors_url)
    assert client.delete("/api/projects/p1?cascade=true").status_code in (200, 204)
    assert "p1_docs" not in tables(vectors_url)


@pytest.mark.parametrize(("stores", "words"), [
    (["postgresql://u:pw@h/db"], "JSON object"),
    ({"bad-name": "postgresql://u:pw@h/db"}, "'bad-name'"),
    ({"maria": "mysql+pymysql://u:hidden-pw@h/db"}, "maria"),
    ({"junk": "not a url hidden-pw"}, "junk"),
])
def test_kb_stores_is_checked_at_start(stores, words, tmp_path):
    with pytest.raises(RuntimeError) as caught:
        create_app({"DATABASE_URL": f"sqlite:///{tmp_path}/s.db", "KB_STORES": stores,
                    "INSTANCE_PATH": str(tmp_path), "DEMO_SOURCE": False})
    assert words in str(caught.value) and "hidden-pw" not in str(caught.value)


def _clustered(count: int, dimension: int) -> tuple[Any, Any]:
    """``count`` unit vectors around 50 centres, and 20 questions near some of them
    (seeded)."""
    import numpy as np

    rng = np.random.default_rng(0)
    centres = rng.normal(size=(50, dimension))
    documents = centres[rng.integers(0, 50, count)] + 0.6 * rng.normal(size=(count, dimension))
    questions = documents[rng.integers(0, count, 20)] + 0.1 * rng.normal(size=(20, dimension))
    return tuple(m / np.linalg.norm(m, axis=1, keepdims=True) for m in (documents, questions))


def _executed_indexes(plan: dict) -> set[str]:
    """The indexes the nodes of an EXPLAIN ANALYZE plan that ran read."""
    ran = plan.get("Actual Loops", 0) > 0
    names = {plan["Index Name"]} if ran and "Index Name" in plan else set()
    for child in plan.get("Plans", []):
        names |= _executed_indexes(child)
    return names


def _cte_rows(plan: dict, name: str) -> int:
    """The rows the CTE ``name`` of an EXPLAIN ANALYZE plan gave (0 if it never ran)."""
    if plan.get("Subplan Name") == f"CTE {name}":
        return plan["Actual Rows"] if plan.get("Actual Loops", 0) > 0 else 0
    return sum(_cte_rows(child, name) for child in plan.get("Plans", []))


def test_a_selective_filter_answers_the_nearest_passing_rows_exactly_or_by_the_index(
        make_app, tmp_path, vectors_url):
    # 12 000 chunks, a filter that keeps a hundredth of them (120 rows), HNSW's candidate
    # list 40 long. PostgreSQL's planner expects about 120 rows to pass (the table is
    # analysed after the large inserts), at most twice KB_STORE_EXACT_CHUNKS: they are
    # found through the metadata index and ranked exactly, the HNSW index unread (EXPLAIN
    # ANALYZE of the statement sent). With KB_STORE_EXACT_CHUNKS 100, 120 are still near
    # enough to be collected, but more pass than the bound: the other side of the statement
    # answers, the walk (at this size PostgreSQL's planner prefers reading the table to
    # walking the graph for 40 rows; at 100 000 chunks it walks: bench/kb_pgvector.py),
    # and its ten are the ten nearest too. A filter expected to keep far more than twice
    # the bound (600 rows) is walked at once, nothing collected; one expected to keep many
    # that keeps 5 (a range, which the planner guesses at a third) is walked, the walk
    # gives up short of the rows it looked for, and those 5 are collected and ranked.
    from app.kb.index import Filter
    from app.kb.pgvector import vector_text
    from app.kb.stores import pgvector_store

    documents, questions = _clustered(12_000, 32)

    def answer(body):
        def vector(text: str) -> list[float]:
            kind, n = text.split()
            return (documents if kind == "doc" else questions)[int(n)].tolist()
        return 200, {"data": [{"index": i, "embedding": vector(text)}
                              for i, text in enumerate(body["input"])]}

    with endpoint_pair(answer) as (urls, _):
        settings = {"KB_DIR": str(tmp_path / "kb"), "KB_STORES": {"vectors": vectors_url},
                    "EMBEDDING_ENDPOINTS": urls[0], "KB_HNSW_EF_SEARCH": 40,
                    "KB_INSERT_BATCH_ROWS": 3000}
        exact = make_app(**settings)
        walked = make_app(**settings, KB_STORE_EXACT_CHUNKS=100)  # the same stores
        client = exact.test_client()
        ok(client, f"CREATE KNOWLEDGE_BASE mindsdb.narrow USING storage = vectors, "
                   f"metadata_columns = ['bucket'], embedding_model = {{'provider': "
                   f"'openai', 'model_name': 'clustered', 'base_url': '{urls[0]}'}}")
        # Through REST, in one body: 12 000 rows of VALUES are slow for the SQL parser.
        put = client.put("/api/projects/mindsdb/knowledge_bases/narrow", json={
            "knowledge_base": {"rows": [{"id": i, "content": f"doc {i}", "bucket": i % 100}
                                        for i in range(len(documents))]}})
        assert put.status_code == 200 and put.get_json()["rows"] == len(documents), put.text
        table = rows(ok(client, "DESCRIBE KNOWLEDGE_BASE mindsdb.narrow"))[0][
            "STORAGE"].split(".")[1]
        kept = [i for i in range(len(documents)) if i % 100 == 42]
        for app in (exact, walked):
            for n, question in enumerate(questions):
                nearest = sorted(kept, key=lambda i: -documents[i] @ question)[:10]
                found = rows(ok(app.test_client(), f"SELECT id, distance FROM "
                                f"mindsdb.narrow WHERE content = 'question {n}' AND "
                                "bucket = 42 LIMIT 10"))
                assert [r["id"] for r in found] == [str(i) for i in nearest], (app, n)
                assert [r["distance"] for r in found] == pytest.approx(
                    [1 - documents[i] @ question for i in nearest], abs=1e-5)
            # The statement those searches sent, explained as it runs: which indexes it read
            with app.app_context():
                store = pgvector_store("vectors")
                statement, values = store.ranking_statement(
                    store._table(table), [Filter("bucket", "=", 42)],
                    vector_text(questions[0]), 10)
                with store._transaction(read=True) as conn:
                    conn.execute("SET hnsw.iterative_scan = relaxed_order")
                    plan = conn.execute(sql.SQL(
                        "EXPLAIN (ANALYZE, FORMAT JSON) {}").format(statement),
                        values).fetchone()[0][0]["Plan"]
            if app is exact:  # the passing rows found through the metadata index
                read = _executed_indexes(plan)
                assert f"{table}_meta" in read and f"{table}_vec" not in read, plan
                assert _cte_rows(plan, "first") == len(kept), plan
                assert _cte_rows(plan, "walked") == 0, plan
            else:  # collected (the estimate is near the bound), then walked
                assert _cte_rows(plan, "first") == 101, plan
                assert _cte_rows(plan, "walked") >= 10, plan

        def explained(filters, vector):
            with walked.app_context():
                store = pgvector_store("vectors")
                statement, values = store.ranking_statement(
                    store._table(table), filters, vector_text(vector), 10)
                with store._transaction(read=True) as conn:
                    conn.execute("SET hnsw.iterative_scan = relaxed_order")
                    return conn.execute(sql.SQL(
                        "EXPLAIN (ANALYZE, FORMAT JSON) {}").format(statement),
                        values).fetchone()[0][0]["Plan"]

        # Broad: 600 rows pass, expected far more than twice 100: walked, nothing collected.
        broad = list(range(40, 45))
        passing = [i for i in range(len(documents)) if i % 100 in broad]
        for n, question in enumerate(questions[:5]):
            found = rows(ok(walked.test_client(), f"SELECT id FROM mindsdb.narrow WHERE "
                            f"content = 'question {n}' AND bucket IN (40, 41, 42, 43, 44) "
                            "LIMIT 10"))
            nearest = sorted(passing, key=lambda i: -documents[i] @ question)[:10]
            assert [r["id"] for r in found] == [str(i) for i in nearest], n
        plan = explained([Filter("bucket", "in", broad)], questions[0])
        assert _cte_rows(plan, "first") == 0 and _cte_rows(plan, "second") == 0, plan
        assert _cte_rows(plan, "walked") >= 10, plan
        assert f"{table}_meta" not in _executed_indexes(plan), plan

        # Expected many, passed by few: five more chunks, the only ones past bucket 500.
        put = client.put("/api/projects/mindsdb/knowledge_bases/narrow", json={
            "knowledge_base": {"rows": [{"id": f"x{i}", "content": f"doc {i}",
                                         "bucket": 1000 + i} for i in range(5)]}})
        assert put.status_code == 200, put.text
        for n, question in enumerate(questions[:5]):
            found = rows(ok(walked.test_client(), f"SELECT id, distance FROM "
                            f"mindsdb.narrow WHERE content = 'question {n}' AND "
                            "bucket > 500 LIMIT 10"))
            nearest = sorted(range(5), key=lambda i: -documents[i] @ question)
            assert [r["id"] for r in found] == [f"x{i}" for i in nearest], n
            assert [r["distance"] for r in found] == pytest.approx(
                [1 - documents[i] @ question for i in nearest], abs=1e-5)
        plan = explained([Filter("bucket", ">", 500)], questions[0])
        assert _cte_rows(plan, "first") == 0, plan
        assert _cte_rows(plan, "walked") == 5 and _cte_rows(plan, "second") == 5, plan


def test_a_table_without_the_metadata_index_gets_it_at_the_first_filtered_search(
        client, make_app, tmp_path, vectors_url):
    make_kb(client, "older", ", storage = vectors.older_chunks")
    url = make_url(vectors_url).set(drivername="postgresql").render_as_string(
        hide_password=False)
    with psycopg.connect(url, autocommit=True) as conn:  # as a table made before it was
        conn.execute("DROP INDEX older_chunks_meta")
    question = ("SELECT id FROM mindsdb.older WHERE content = 'paper jam' AND category = "
                "'hardware'")
    # a worker that has not opened the table yet
    fresh = make_app(KB_DIR=str(tmp_path / "kb"), KB_STORES={"vectors": vectors_url})
    assert {r["id"] for r in rows(ok(fresh.test_client(), question))} == {"3"}
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = "
                            "'older_chunks_meta'").fetchone()[0].endswith(
            "USING gin (metadata jsonb_path_ops)")
