"""Knowledge bases' fast paths through HTTP: INSERT … SELECT streamed from the data path in
batches (rows written before the whole answer is read, the row cap), each worker's copy of
the vectors kept up to date with what other workers write, and the listing's counts."""

from __future__ import annotations

import threading

from tests.kb.test_knowledge_bases import error, ok, rows, run


def test_insert_select_streams_and_stops_at_the_row_cap(make_app, tmp_path):
    client = make_app(DEMO_SOURCE=True, KB_DIR=str(tmp_path / "kb"),
                      KB_INSERT_MAX_ROWS=1500, KB_INSERT_BATCH_ROWS=500).test_client()
    ok(client, "CREATE KNOWLEDGE_BASE mindsdb.pairs USING metadata_columns = []")
    # 150 × 150 rows: more than the cap. The first batch of the stream (1 000 rows) is
    # written before the rest is read; the batch that goes past the cap is not.
    body = error(client, "INSERT INTO mindsdb.pairs SELECT a.rowid * 1000 + b.rowid AS id, "
                         "a.species AS content FROM demo.iris a JOIN demo.iris b",
                 "more than 1500 rows", "1000 rows were inserted before it")
    assert body["error_code"]
    described = rows(ok(client, "DESCRIBE KNOWLEDGE_BASE mindsdb.pairs"))[0]
    assert described["DOCUMENTS"] == 1000
    # Within the cap it all goes in, in batches of KB_INSERT_BATCH_ROWS.
    ok(client, "INSERT INTO mindsdb.pairs SELECT rowid AS id, species AS content "
               "FROM demo.iris WHERE rowid <= 120")
    assert rows(ok(client, "SELECT id, chunk_content FROM mindsdb.pairs WHERE id = 7")) == [
        {"id": "7", "chunk_content": "setosa"}]
    found = rows(ok(client, "SELECT id FROM mindsdb.pairs WHERE content = 'virginica' "
                            "AND id IN (1, 120) LIMIT 1"))
    assert found == [{"id": "120"}]


def test_each_worker_sees_what_the_others_write(make_app, tmp_path):
    # Two apps on one store and one index file stand for two workers: each keeps its own
    # copy of the vectors (faiss indexes), and catches up from the index's log before a
    # search. The first picks candidates by bits beyond 0 chunks (faiss's IndexLSH,
    # re-ranking 2 of them exactly): its first search there makes the bits, so the
    # removals it catches up with later go through that index too.
    one = make_app(KB_DIR=str(tmp_path / "kb"), KB_EXACT_CHUNKS=0,
                   KB_RERANK_CANDIDATES=2).test_client()
    two = make_app(KB_DIR=str(tmp_path / "kb")).test_client()
    ok(one, "CREATE KNOWLEDGE_BASE mindsdb.shared")
    ok(one, "INSERT INTO mindsdb.shared (id, content) VALUES (1, 'The cat sleeps on the "
            "sofa.'), (2, 'Invoices are due in thirty days.'), (4, 'Rain is expected "
            "tomorrow.')")
    search = "SELECT id, distance FROM mindsdb.shared WHERE content = '{}' LIMIT 1"
    assert rows(ok(two, search.format("a pet resting")))[0]["id"] == "1"
    assert rows(ok(one, search.format("a pet resting")))[0]["id"] == "1"
    # Written by two: an upsert of 1, a new document, a deletion; one sees them all
    # (three chunks: still more than the two candidates).
    ok(two, "INSERT INTO mindsdb.shared (id, content) VALUES (1, 'Payment terms for "
            "suppliers.'), (3, 'The dog naps in the garden.')")
    ok(two, "DELETE FROM mindsdb.shared WHERE id = 2")
    pet = rows(ok(one, search.format("a pet resting")))
    assert pet[0]["id"] == "3"
    money = rows(ok(one, "SELECT id FROM mindsdb.shared WHERE content = 'when must an "
                         "invoice be paid'"))
    assert money[0]["id"] == "1" and sorted(r["id"] for r in money) == ["1", "3", "4"]
    # The distance of the copy is the index's own (vec0's cosine, through a filter).
    exact = rows(ok(one, "SELECT id, distance FROM mindsdb.shared WHERE content = 'a pet "
                         "resting' AND id != 'none' LIMIT 1"))
    assert exact[0]["id"] == "3"
    assert abs(exact[0]["distance"] - pet[0]["distance"]) < 1e-5
    # Dropped and made again under the same name: a new base, nothing of the old one.
    ok(two, "DROP KNOWLEDGE_BASE mindsdb.shared")
    ok(two, "CREATE KNOWLEDGE_BASE mindsdb.shared")
    assert ok(one, search.format("a pet resting"))["data"] == []


def test_the_listing_counts_each_knowledge_base(make_app, tmp_path):
    client = make_app(KB_DIR=str(tmp_path / "kb")).test_client()
    for name, count in (("a", 3), ("b", 1), ("c", 0)):
        ok(client, f"CREATE KNOWLEDGE_BASE mindsdb.{name}")
        if count:
            values = ", ".join(f"({i}, 'text {i}')" for i in range(count))
            ok(client, f"INSERT INTO mindsdb.{name} (id, content) VALUES {values}")
    listed = client.get("/api/projects/mindsdb/knowledge_bases").get_json()
    assert [(k["name"], k["documents"], k["chunks"]) for k in listed] == [
        ("a", 3, 3), ("b", 1, 1), ("c", 0, 0)]


def test_concurrent_inserts_neither_lose_nor_duplicate_chunks(make_app, tmp_path):
    # Two workers insert into one base at once (each batch takes SQLite's write lock at its
    # start, so the rowids one picks are never the other's); a third searches meanwhile.
    apps = [make_app(KB_DIR=str(tmp_path / "kb"), KB_INSERT_BATCH_ROWS=5) for _ in range(3)]
    ok(apps[0].test_client(), "CREATE KNOWLEDGE_BASE mindsdb.busy")
    answers: list[dict] = []

    def insert(app, first: int) -> None:
        values = ", ".join(f"({i}, 'ticket {i} about item {i % 7}')"
                           for i in range(first, first + 40))
        answers.append(run(app.test_client(),
                           f"INSERT INTO mindsdb.busy (id, content) VALUES {values}"))

    def search() -> None:
        for _ in range(5):
            answers.append(run(apps[2].test_client(), "SELECT id FROM mindsdb.busy WHERE "
                                                      "content = 'item 3' LIMIT 3"))

    workers = [threading.Thread(target=insert, args=(apps[0], 0)),
               threading.Thread(target=insert, args=(apps[1], 1000)),
               threading.Thread(target=search)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(300)
    assert all(a["type"] in ("ok", "table") for a in answers), answers
    ids = [r["id"] for r in rows(ok(apps[2].test_client(), "SELECT id FROM mindsdb.busy"))]
    assert sorted(ids, key=int) == [str(i) for i in [*range(40), *range(1000, 1040)]]
    found = rows(ok(apps[2].test_client(), "SELECT id FROM mindsdb.busy WHERE content = "
                                           "'ticket 1039 about item 3' LIMIT 80"))
    assert sorted((r["id"] for r in found), key=int) == sorted(ids, key=int)
