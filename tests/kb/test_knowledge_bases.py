"""Knowledge bases through HTTP, on SQLite and PostgreSQL stores: CREATE / DROP / SHOW /
DESCRIBE KNOWLEDGE_BASE, INSERT (VALUES and SELECT from a data source), upsert by id,
DELETE, search by meaning, by words (hybrid) and with metadata filters, the REST routes,
rights and the audit. The embedded model runs for real (loaded once per process)."""

from __future__ import annotations

import io
import json
import threading
import time

import pytest

from app.services import auth as auth_service
from app.sql.errors import ErrorCode
from tests.auth.conftest import PASSWORD, make_auth_app  # noqa: F401 - a fixture

DOCS = [
    (1, "To reset a forgotten password, open the sign-in page and choose 'Forgot "
        "password'; a link arrives by mail.", "auth", 2024),
    (2, "Invoices are sent on the first working day of every month, as PDF files.",
     "billing", 2023),
    (3, "The printer on the second floor jams when the paper is damp; keep reams sealed.",
     "hardware", 2024),
    (4, "Refunds are paid back to the card used for the purchase within ten days.",
     "billing", 2024),
]


@pytest.fixture
def client(make_app, tmp_path):
    return make_app(DEMO_SOURCE=True, KB_DIR=str(tmp_path / "kb")).test_client()


def run(client, query: str, db: str | None = None) -> dict:
    body = {"query": query, **({"context": {"db": db}} if db else {})}
    response = client.post("/api/sql/query", json=body)
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def ok(client, query: str, db: str | None = None) -> dict:
    body = run(client, query, db)
    assert body["type"] in ("ok", "table"), body
    return body


def error(client, query: str, *words: str) -> dict:
    body = run(client, query)
    assert body["type"] == "error", body
    for word in words:
        assert word in body["error_message"], body
    return body


def rows(body: dict) -> list[dict]:
    return [dict(zip(body["column_names"], row, strict=True)) for row in body["data"]]


def make_kb(client, name: str = "kb", using: str = "") -> None:
    ok(client, f"CREATE KNOWLEDGE_BASE mindsdb.{name} USING metadata_columns = "
               f"['category', 'year']{using}")
    values = ", ".join(f"({i}, '{text.replace(chr(39), chr(39) * 2)}', '{cat}', {year})"
                       for i, text, cat, year in DOCS)
    ok(client, f"INSERT INTO mindsdb.{name} (id, content, category, year) VALUES {values}")


def test_a_knowledge_base_is_searched_by_meaning(client):
    make_kb(client)
    body = ok(client, "SELECT * FROM mindsdb.kb WHERE content = 'I cannot log in, I lost "
                      "my credentials' LIMIT 2")
    assert body["column_names"] == ["id", "chunk_id", "chunk_content", "metadata",
                                    "distance", "relevance"]
    found = rows(body)
    assert len(found) == 2 and found[0]["id"] == "1"
    assert found[0]["chunk_id"] == f"1:1of1:0to{len(DOCS[0][1])}"
    assert found[0]["metadata"] == {"category": "auth", "year": 2024}
    assert found[0]["distance"] < found[1]["distance"]
    assert found[0]["relevance"] == pytest.approx(1 / (1 + found[0]["distance"]))
    # Money questions find the billing documents first; the default LIMIT is 10.
    money = rows(ok(client, "SELECT id FROM mindsdb.kb WHERE content = 'when do I get my "
                            "money back'"))
    assert [r["id"] for r in money][0] == "4" and len(money) == 4
    # A metadata filter, a relevance floor.
    billing = rows(ok(client, "SELECT id, relevance FROM mindsdb.kb WHERE content = "
                              "'paper jam' AND category = 'billing'"))
    assert sorted(r["id"] for r in billing) == ["2", "4"]
    close = rows(ok(client, "SELECT id FROM mindsdb.kb WHERE content = 'paper jam' AND "
                            "relevance >= 0.6"))
    assert [r["id"] for r in close] == ["3"]


def test_hybrid_search_fuses_words_with_meaning(client):
    make_kb(client)
    # "PDF" is a word only document 2 has: by words alone (alpha 0) it comes first.
    words = rows(ok(client, "SELECT id FROM mindsdb.kb WHERE content = 'PDF' AND "
                            "hybrid_search_alpha = 0 LIMIT 1"))
    assert words == [{"id": "2"}]
    fused = rows(ok(client, "SELECT id, distance FROM mindsdb.kb WHERE content = 'PDF "
                            "invoices' AND hybrid_search = true"))
    assert fused[0]["id"] == "2" and all(r["distance"] is not None for r in fused)
    error(client, "SELECT * FROM mindsdb.kb WHERE content = 'x' AND hybrid_search_alpha = 2",
          "hybrid_search_alpha")
    assert ok(client, "SELECT * FROM mindsdb.kb WHERE content = 'x' LIMIT 0")["data"] == []
    error(client, "SELECT * FROM mindsdb.kb WHERE content = 'x' OR id = 1", "AND")
    error(client, "SELECT * FROM mindsdb.kb WHERE relevance >= 0.5", "content")


def test_insert_upserts_by_id_and_delete_removes(client):
    make_kb(client, using=", preprocessing = {'text_chunking_config': "
                          "{'chunk_size': 40, 'chunk_overlap': 10}}")
    listing = rows(ok(client, "SELECT id, chunk_id FROM mindsdb.kb WHERE id = 1"))
    assert len(listing) > 1
    total = len(listing)
    assert [r["chunk_id"].split(":")[1] for r in listing] == \
        [f"{n}of{total}" for n in range(1, total + 1)]
    ok(client, "INSERT INTO mindsdb.kb (id, content, category, year) VALUES "
               "(1, 'Short now.', 'auth', 2025)")
    assert rows(ok(client, "SELECT chunk_id, chunk_content, metadata FROM mindsdb.kb "
                           "WHERE id = 1")) == [
        {"chunk_id": "1:1of1:0to10", "chunk_content": "Short now.",
         "metadata": {"category": "auth", "year": 2025}}]
    ok(client, "DELETE FROM mindsdb.kb WHERE id = 1")
    assert ok(client, "SELECT * FROM mindsdb.kb WHERE id = 1")["data"] == []
    years = rows(ok(client, "SELECT DISTINCT id FROM mindsdb.kb WHERE year >= 2024"))
    assert sorted(r["id"] for r in years) == ["3", "4"]
    error(client, "DELETE FROM mindsdb.kb", "id")
    error(client, "SELECT * FROM mindsdb.kb WHERE colour = 'red'", "colour")


def test_insert_select_reads_a_data_source_with_the_callers_rights(client):
    ok(client, "CREATE KNOWLEDGE_BASE mindsdb.flowers USING content_columns = ['species'], "
               "id_column = 'rowid', metadata_columns = ['petal_length']")
    ok(client, "INSERT INTO mindsdb.flowers SELECT rowid, species, petal_length "
               "FROM demo.iris WHERE rowid <= 3")
    described = rows(ok(client, "DESCRIBE KNOWLEDGE_BASE mindsdb.flowers"))[0]
    assert described["DOCUMENTS"] == 3 and described["CONTENT_COLUMNS"] == ["species"]
    # The id column is filtered on by its own name too.
    ok(client, "DELETE FROM mindsdb.flowers WHERE rowid = 2")
    assert [r["id"] for r in rows(ok(client, "SELECT id FROM mindsdb.flowers"))] == ["1", "3"]
    error(client, "INSERT INTO mindsdb.flowers SELECT rowid, species FROM demo.iris",
          "petal_length")
    error(client, "INSERT INTO mindsdb.flowers SELECT * FROM demo.nowhere", "nowhere")


def test_insert_select_reads_views_and_uploaded_files(make_app, tmp_path):
    client = make_app(DEMO_SOURCE=True, KB_DIR=str(tmp_path / "kb"),
                      FILES_DIR=str(tmp_path / "files")).test_client()
    uploaded = client.put("/api/files/faq", content_type="multipart/form-data", data={
        "file": (io.BytesIO(b"qid,answer\n7,Parking is free after six in the evening.\n"),
                 "faq.csv"), "source_type": "file", "original_file_name": "faq.csv"})
    assert uploaded.status_code == 200, uploaded.get_data(as_text=True)
    ok(client, "CREATE VIEW mindsdb.virginica AS (SELECT rowid AS id, species AS content "
               "FROM demo.iris WHERE species = 'virginica' LIMIT 2)")
    ok(client, "CREATE KNOWLEDGE_BASE mindsdb.mixed")
    ok(client, "INSERT INTO mindsdb.mixed SELECT * FROM mindsdb.virginica")
    ok(client, "INSERT INTO mindsdb.mixed SELECT qid AS id, answer AS content FROM files.faq")
    found = rows(ok(client, "SELECT id FROM mindsdb.mixed WHERE content = 'where can I "
                            "leave my car' LIMIT 1"))
    assert found == [{"id": "7"}]
    assert len(ok(client, "SELECT * FROM mindsdb.mixed")["data"]) == 3


def test_a_running_insert_shows_its_progress_and_can_be_cancelled(client):
    ok(client, "CREATE KNOWLEDGE_BASE mindsdb.many")
    values = ", ".join(f"({i}, 'note number {i}')" for i in range(1280))
    statement = f"INSERT INTO mindsdb.many (id, content) VALUES {values}"
    answers: list[dict] = []
    worker = threading.Thread(target=lambda: answers.append(run(
        client.application.test_client(), statement)))
    worker.start()
    running, deadline = None, time.monotonic() + 120
    while running is None and time.monotonic() < deadline and worker.is_alive():
        listed = client.get("/api/sql/queries").get_json()
        running = next((q for q in listed if q["statement"] == statement
                        and q["rows_sent"] >= 64), None)
        time.sleep(0.05)
    assert running is not None, "the insert never showed its progress"
    assert client.delete(f"/api/sql/queries/{running['query_id']}").status_code == 200
    worker.join(120)
    assert answers[0]["type"] == "error", answers
    assert answers[0]["error_code"] == ErrorCode.CANCELLED
    kept = ok(client, "SELECT DISTINCT id FROM mindsdb.many")["data"]
    assert 64 <= len(kept) < 1280 and len(kept) % 64 == 0


def test_a_knowledge_base_whose_index_file_is_gone_answers_empty(make_app, tmp_path):
    first = make_app(KB_DIR=str(tmp_path / "one")).test_client()
    ok(first, "CREATE KNOWLEDGE_BASE mindsdb.moved")
    ok(first, "INSERT INTO mindsdb.moved (id, content) VALUES (1, 'kept in folder one')")
    # Another folder (a misconfigured instance): no rows, no error; an insert starts afresh.
    second = make_app(KB_DIR=str(tmp_path / "two")).test_client()
    assert ok(second, "SELECT * FROM mindsdb.moved WHERE content = 'kept'")["data"] == []
    assert ok(second, "SELECT * FROM mindsdb.moved")["data"] == []
    ok(second, "DELETE FROM mindsdb.moved WHERE id = 1")
    ok(second, "INSERT INTO mindsdb.moved (id, content) VALUES (2, 'now in folder two')")
    assert ok(second, "SELECT id FROM mindsdb.moved")["data"] == [["2"]]


def test_create_show_describe_drop_and_bad_input(client):
    ok(client, "CREATE KNOWLEDGE_BASE kb1")
    error(client, "CREATE KNOWLEDGE_BASE mindsdb.KB1", "already exists")
    ok(client, "CREATE KNOWLEDGE_BASE IF NOT EXISTS mindsdb.kb1")
    shown = rows(ok(client, "SHOW KNOWLEDGE_BASES FROM mindsdb"))
    assert [r["NAME"] for r in shown] == ["kb1"]
    assert ok(client, "SHOW KNOWLEDGE BASES")["data"] == ok(client, "SHOW KNOWLEDGE_BASES")[
        "data"]
    assert ok(client, "SELECT name, project FROM mindsdb.knowledge_bases")["data"] == [
        ["kb1", "mindsdb"]]
    ok(client, "CREATE PROJECT other")
    ok(client, "CREATE KNOWLEDGE_BASE other.kb9")
    assert ok(client, "SELECT name, project FROM information_schema.knowledge_bases "
                      "ORDER BY name")["data"] == [["kb1", "mindsdb"], ["kb9", "other"]]
    error(client, "CREATE KNOWLEDGE_BASE kb2 USING model = m1", "embedding_model")
    assert shown[0]["EMBEDDING_MODEL"] == {"provider": "quarry",
                                           "model_name": "all-MiniLM-L6-v2"}
    error(client, "CREATE KNOWLEDGE_BASE kb2 USING preprocessing = {'text_chunking_config': "
                  "{'chunk_size': 100, 'chunk_overlap': 100}}", "chunk_overlap")
    error(client, "CREATE KNOWLEDGE_BASE kb2 USING reranking_model = {'provider': 'openai'}",
          "reranking")
    error(client, "CREATE KNOWLEDGE_BASE kb2 USING colour = 'red'", "colour")
    error(client, "CREATE KNOWLEDGE_BASE kb2 USING embedding_model = {'provider': 'openai', "
                  "'model_name': 'e', 'base_url': 'http://169.254.169.254/v1'}",
          "not an embedding endpoint")
    error(client, "INSERT INTO mindsdb.kb1 (id, text) VALUES (1, 'x')", "content")
    ok(client, "DROP KNOWLEDGE_BASE mindsdb.kb1")
    error(client, "DROP KNOWLEDGE_BASE mindsdb.kb1", "not found")
    ok(client, "DROP KNOWLEDGE_BASE IF EXISTS mindsdb.kb1")
    assert ok(client, "SHOW KNOWLEDGE_BASES")["data"] == []


def test_rest_routes(client):
    base = "/api/projects/mindsdb/knowledge_bases"
    created = client.post(base, json={"knowledge_base": {
        "name": "notes", "metadata_columns": ["author"]}})
    assert created.status_code == 201, created.get_json()
    assert created.get_json()["content_columns"] == ["content"]
    assert client.post(base, json={"knowledge_base": {"name": "notes"}}).status_code == 409
    put = client.put(f"{base}/notes", json={"knowledge_base": {"rows": [
        {"id": "a", "content": "The backup runs every night at two.", "author": "ops"},
        {"id": "b", "content": "Lunch is served at noon.", "author": "hr"}]}})
    assert put.status_code == 200 and put.get_json() == {"rows": 2, "chunks": 2}
    put = client.put(f"{base}/notes", json={"knowledge_base": {
        "query": "SELECT 'c' AS id, 'Coffee machines are cleaned on Fridays.' AS content, "
                 "'hr' AS author FROM demo.iris LIMIT 1"}})
    assert put.status_code == 200, put.get_json()
    got = client.get(f"{base}/notes").get_json()
    assert got["documents"] == 3 and got["metadata_columns"] == ["author"]
    assert [k["name"] for k in client.get(base).get_json()] == ["notes"]
    bad = client.put(f"{base}/notes", json={"knowledge_base": {"rows": [{"id": 1}]}})
    assert bad.status_code == 422 and "content" in bad.get_json()["detail"]
    none = client.put(f"{base}/notes", json={"knowledge_base": {"rows": []}})
    assert none.status_code == 200 and none.get_json() == {"rows": 0, "chunks": 0}
    for columns, field in ((["author", "author"], "metadata_columns"),
                           (["content", "author"], "metadata_columns")):
        twice = client.post(base, json={"knowledge_base": {"name": "t",
                                                           "metadata_columns": columns}})
        assert twice.status_code == 400, twice.get_json()
        assert field in twice.get_json()["errors"]["knowledge_base"], twice.get_json()
    assert client.get(f"{base}/t").status_code == 404
    both = client.put(f"{base}/notes", json={"knowledge_base": {"rows": [], "query": "x"}})
    assert both.status_code == 422 and "either rows or query" in both.get_json()["detail"]
    overlap = client.post(base, json={"knowledge_base": {"name": "o", "preprocessing": {
        "text_chunking_config": {"chunk_size": 100, "chunk_overlap": 100}}}})
    assert overlap.status_code == 422 and "chunk_overlap" in overlap.get_json()["detail"]
    found = rows(ok(client, "SELECT id FROM mindsdb.notes WHERE content = 'when are backups "
                            "made' LIMIT 1"))
    assert found == [{"id": "a"}]
    assert client.delete(f"{base}/notes").status_code == 204
    assert client.get(f"{base}/notes").status_code == 404


def test_a_project_drop_takes_its_knowledge_bases(client):
    ok(client, "CREATE PROJECT p1")
    make_kb(client.application.test_client(), "kb")  # in mindsdb: stays
    ok(client, "CREATE KNOWLEDGE_BASE p1.docs")
    error(client, "DROP PROJECT p1", "knowledge_bases")
    assert client.delete("/api/projects/p1?cascade=true").status_code in (200, 204)
    ok(client, "CREATE PROJECT p1")
    assert ok(client, "SHOW KNOWLEDGE_BASES FROM p1")["data"] == []


def test_outsiders_neither_list_nor_search(make_auth_app, tmp_path):  # noqa: F811
    app = make_auth_app(KB_DIR=str(tmp_path / "kb"))
    client = app.test_client()
    with app.app_context():
        auth_service.create_user("root", PASSWORD, admin=True)
        auth_service.create_user("alice", PASSWORD)
        auth_service.create_user("bob", PASSWORD)
        tokens = {n: auth_service.create_token(n, "t")[1] for n in ("root", "alice", "bob")}

    def as_user(who: str, query: str) -> dict:
        return client.post("/api/sql/query", json={"query": query},
                           headers={"Authorization": f"Bearer {tokens[who]}"}).get_json()

    assert as_user("alice", "CREATE PROJECT secret")["type"] == "ok"
    assert as_user("alice", "CREATE KNOWLEDGE_BASE secret.kb")["type"] == "ok"
    assert as_user("alice", "INSERT INTO secret.kb (id, content) VALUES "
                            "(1, 'the launch date is May')")["type"] == "ok"
    assert as_user("alice", "SELECT id FROM secret.kb WHERE content = 'launch'")[
        "data"] == [["1"]]
    listed = client.get("/api/projects/secret/knowledge_bases",
                        headers={"Authorization": f"Bearer {tokens['bob']}"})
    assert listed.status_code == 404
    body = as_user("bob", "SELECT * FROM secret.kb WHERE content = 'launch'")
    assert body["type"] == "error" and "May" not in str(body), body
    # Joined in a statement over several tables, it is searched with the caller's rights.
    joined = ("SELECT a.id, b.chunk_content FROM secret.kb a JOIN secret.kb b ON a.id = b.id "
              "WHERE a.content = 'launch'")
    assert as_user("alice", joined)["data"] == [["1", "the launch date is May"]]
    body = as_user("bob", joined)
    assert body["type"] == "error" and "May" not in str(body), body
    body = as_user("bob", "INSERT INTO secret.kb (id, content) VALUES (2, 'x')")
    assert body["type"] == "error", body
    audit = as_user("root", "SELECT action, target, after FROM quarry.audit WHERE kind = "
                            "'knowledge_base' ORDER BY id")
    assert [(a, t) for a, t, _ in audit["data"]] == [("create", "secret.kb"),
                                                     ("insert", "secret.kb")]
    assert json.loads(audit["data"][1][2]) == {"rows": 1, "chunks": 1}
