"""Uploaded files through HTTP, on SQLite and PostgreSQL stores: upload, list, query,
replace, delete; malformed, oversized and badly named uploads refused with nothing stored."""

from __future__ import annotations

import io
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from werkzeug.datastructures import FileStorage
from werkzeug.test import encode_multipart

from tests.helpers import assert_problem

RENTALS = (b"sqft,rooms,location,rent\n1088,4,good,2759\n1347,4,great,3544\n"
           b"921,4,great,2666\n")


@pytest.fixture
def files_dir(tmp_path) -> str:
    return str(tmp_path / "files")


@pytest.fixture
def client(make_app, files_dir):
    return make_app(FILES_DIR=files_dir, SQL_MAX_ROWS=100).test_client()


def put(client, name: str, data: bytes, filename: str = "rentals.csv", query: str = "",
        **fields: str):
    form = {"file": (io.BytesIO(data), filename), "source_type": "file",
            "original_file_name": filename, **fields}
    return client.put(f"/api/files/{name}{query}", data=form,
                      content_type="multipart/form-data")


def sql(client, query: str) -> dict:
    response = client.post("/api/sql/query", json={"query": query})
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def stored(files_dir: str) -> list[str]:
    return sorted(os.listdir(files_dir)) if os.path.isdir(files_dir) else []


def test_upload_list_and_query_as_mindsdb_answers(client, files_dir):
    response = put(client, "rentals", RENTALS)
    assert response.status_code == 200, response.get_data(as_text=True)
    listed = client.get("/api/files/").get_json()
    assert [{k: f[k] for k in ("name", "row_count", "columns")} for f in listed] == [
        {"name": "rentals", "row_count": 3, "columns": ["sqft", "rooms", "location", "rent"]}]
    assert listed[0]["size"] > 0 and listed[0]["created_at"]
    body = sql(client, "SELECT * FROM files.rentals LIMIT 2")
    assert body["column_names"] == ["sqft", "rooms", "location", "rent"]
    assert body["data"] == [[1088, 4, "good", 2759], [1347, 4, "great", 3544]]
    grouped = sql(client, "SELECT location, count(*) AS n, sum(rent) AS total "
                          "FROM files.rentals GROUP BY location ORDER BY location")
    assert grouped["data"] == [["good", 1, 2759], ["great", 2, 6210]]
    # Nothing but the stored Parquet in the folder (no temporary file left behind).
    assert stored(files_dir) == ["rentals.parquet"]


def test_an_existing_name_is_refused_and_overwrite_replaces_it(client):
    assert put(client, "rentals", RENTALS).status_code == 200
    again = put(client, "Rentals", b"a\n1\n")
    problem = assert_problem(again, 409)
    assert problem["detail"] == "File with name 'Rentals' already exists"
    assert problem["title"] == "File already exists"  # the console offers Replace on it
    assert sql(client, "SELECT count(*) AS n FROM files.rentals")["data"] == [[3]]
    replaced = put(client, "rentals", b"a;b\n1;x\n2;y\n", query="?overwrite=true")
    assert replaced.status_code == 200, replaced.get_data(as_text=True)
    assert replaced.get_json()["columns"] == ["a", "b"]
    assert sql(client, "SELECT * FROM files.rentals ORDER BY a")["data"] == [[1, "x"],
                                                                           [2, "y"]]
    assert [f["row_count"] for f in client.get("/api/files/").get_json()] == [2]


@pytest.mark.parametrize(("data", "filename", "words"), [
    (b"a,b,c\n1,2,3\n4,5\n6,7,8\n", "r.csv", ("CSV", "Line: 3", "Expected Number of Columns: 3")),
    (b"a,b,c\n1,2,3\n4,5,6,7\n", "r.csv", ("CSV", "Line: 3")),
    (b"", "e.csv", ("empty",)),
    (b"PAR1 this is no parquet", "p.parquet", ("Parquet",)),
    (b"PK\x03\x04 not a workbook", "w.xlsx", ("XLSX",)),
    (b'[{"a": 1}, {"a": ', "j.json", ("JSON",)),
])
def test_a_malformed_file_is_refused_saying_what_and_nothing_is_stored(client, files_dir,
                                                                      data, filename, words):
    problem = assert_problem(put(client, "bad", data, filename), 422, *words)
    assert files_dir not in problem["detail"]  # the server's paths are not shown
    assert client.get("/api/files/").get_json() == []
    assert stored(files_dir) == []


@pytest.mark.parametrize("name", ["..%2Fx", "a%00b", "a.b", "9abc"])
def test_a_bad_name_is_refused_before_the_file_system(client, files_dir, name):
    assert_problem(put(client, name, RENTALS), 400, "Invalid file name")
    assert stored(files_dir) == []


def test_a_file_beyond_the_limit_is_413_and_nothing_is_stored(make_app, files_dir):
    client = make_app(FILES_DIR=files_dir, FILES_MAX_BYTES=1000).test_client()
    big = b"a,b\n" + b"1,2\n" * 2000
    assert_problem(put(client, "big", big), 413, "QUARRY_FILES_MAX_BYTES")
    assert client.get("/api/files/").get_json() == []
    assert stored(files_dir) == []
    assert put(client, "small", b"a,b\n1,2\n").status_code == 200


def test_an_upload_cut_off_by_its_client_leaves_nothing(client, files_dir):
    """The console's Stop (or a dropped connection) ends the body before its Content-Length:
    the part written so far is removed, and the answer is a 400."""
    boundary, body = encode_multipart({"file": FileStorage(io.BytesIO(RENTALS * 2000),
                                                           "rentals.csv")})
    content_type = f"multipart/form-data; boundary={boundary}"
    end = body.rindex(b"\r\n--")  # the closing boundary
    for sent, words in ((body[:end], ["nothing was stored"]), (body[: len(body) // 2], [])):
        cut = client.put("/api/files/cut", data=sent, headers={"Content-Type": content_type},
                         environ_overrides={"CONTENT_LENGTH": str(len(body))})
        assert_problem(cut, 400, *words)
        assert stored(files_dir) == []
    assert client.get("/api/files/").get_json() == []


def test_a_url_source_is_refused_unless_its_host_is_allowed(client, files_dir):
    response = client.put("/api/files/remote", data={
        "source_type": "url", "source": "http://127.0.0.1:6379/x.csv", "name": "remote"},
        content_type="multipart/form-data")
    assert_problem(response, 422, "QUARRY_FILES_URL_ALLOW", "127.0.0.1")
    assert stored(files_dir) == []


def test_formats_are_sniffed_from_their_bytes(client, tmp_path):
    table = pa.table({"id": [1, 2, 3], "name": ["a", "b", None], "x": [0.5, 1.5, 2.5]})
    path = tmp_path / "t.parquet"
    pq.write_table(table, path)
    assert put(client, "pq", path.read_bytes(), "t.parquet").status_code == 200
    # mindsdb_sdk sends a DataFrame as a part named after the file, without an extension.
    assert put(client, "lines", b'{"id": 1, "v": "x"}\n{"id": 2, "v": "y"}\n',
               "lines").status_code == 200
    assert put(client, "arr", b'[{"id": 1, "v": "x"}]', "arr").status_code == 200
    assert put(client, "tabs", b"k\tv\nq\t1\nr\t2\n", "t.tsv").status_code == 200
    assert put(client, "latin", "k;v\nq;é\n".encode("latin-1"), "l.csv").status_code == 200
    assert sql(client, "SELECT name, x FROM files.pq ORDER BY id")["data"] == [
        ["a", 0.5], ["b", 1.5], [None, 2.5]]
    assert sql(client, "SELECT v FROM files.lines ORDER BY id")["data"] == [["x"], ["y"]]
    assert sql(client, "SELECT v FROM files.arr")["data"] == [["x"]]
    assert sql(client, "SELECT sum(v) AS s FROM files.tabs")["data"] == [[3]]
    assert sql(client, "SELECT v FROM files.latin")["data"] == [["é"]]


def test_delete_removes_the_file_then_404(client, files_dir):
    assert put(client, "rentals", RENTALS).status_code == 200
    deleted = client.delete("/api/files/rentals")
    # 200 and an empty JSON string, as MindsDB answers (its tests check for 200).
    assert deleted.status_code == 200 and deleted.get_json() == ""
    assert stored(files_dir) == []
    assert_problem(client.delete("/api/files/rentals"), 404, "rentals")
    body = sql(client, "SELECT * FROM files.rentals")
    assert body["type"] == "error" and "files.rentals" in body["error_message"]


def test_drop_table_in_files_deletes_the_file_as_mindsdb_sdk_sends_it(client, files_dir):
    assert put(client, "rentals", RENTALS).status_code == 200
    assert sql(client, "DROP TABLE files.rentals")["type"] == "ok"
    assert stored(files_dir) == [] and client.get("/api/files/").get_json() == []
    missing = sql(client, "DROP TABLE files.rentals")
    assert missing["type"] == "error" and "rentals" in missing["error_message"], missing
    assert sql(client, "DROP TABLE IF EXISTS files.rentals")["type"] == "ok"
    assert put(client, "rentals", RENTALS).status_code == 200
    refused = sql(client, "DROP TABLE demo.iris")
    assert refused["type"] == "error" and "read-only" in refused["error_message"], refused
    response = client.post("/api/sql/query", json={"query": "DROP TABLE rentals",
                                                   "context": {"db": "files"}})
    assert response.get_json()["type"] == "ok"
    assert stored(files_dir) == []


def test_uploads_and_deletes_are_in_the_audit_log(client):
    assert put(client, "rentals", RENTALS).status_code == 200
    assert client.delete("/api/files/rentals").status_code == 200
    body = sql(client, "SELECT kind, action, target FROM quarry.audit WHERE kind = 'file' "
                       "ORDER BY at")
    assert body["data"] == [["file", "upload", "rentals"], ["file", "delete", "rentals"]]
    records = client.get("/api/audit", query_string={"kind": "file"}).get_json()
    assert [r["action"] for r in records["records"]] == ["delete", "upload"]


@pytest.mark.parametrize("query", [
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM files.rentals, read_csv('/etc/passwd') AS p",
    "SELECT * FROM files.rentals WHERE location IN (SELECT * FROM read_text('/etc/passwd'))",
    "SELECT * FROM files.rentals WHERE location IN "
    "(SELECT content FROM read_blob('/etc/passwd'))",
])
def test_the_sql_cannot_read_server_files(client, query):
    assert put(client, "rentals", RENTALS).status_code == 200
    for db in (None, "files"):
        response = client.post("/api/sql/query", json={"query": query,
                                                       **({"context": {"db": db}} if db else {})})
        body = response.get_json()
        assert response.status_code == 200 and body["type"] == "error", body
        assert "root:" not in str(body)


@pytest.mark.parametrize("query", [
    "SELECT * FROM read_parquet('{files}/rentals.parquet')",
    "SELECT * FROM files.rentals r JOIN read_parquet('{files}/*.parquet') p ON true",
    "SELECT * FROM glob('{files}/*')",
    "SELECT * FROM parquet_metadata('{files}/rentals.parquet')",
    "SELECT * FROM files.rentals WHERE location IN (SELECT file FROM glob('{files}/*'))",
    "COPY (SELECT 1) TO '{files}/planted.parquet'",
    "SELECT * FROM files.rentals; COPY (SELECT 1) TO '{files}/planted.parquet'",
])
def test_the_sql_cannot_name_the_files_folder_the_engine_reads(client, files_dir, query):
    """The engine may read the files folder (DuckDB scans the files there): no statement
    may name a path in it, nor write there."""
    assert put(client, "rentals", RENTALS).status_code == 200
    response = client.post("/api/sql/query", json={"query": query.format(files=files_dir)})
    body = response.get_json()
    assert body["type"] == "error", body
    assert sorted(os.listdir(files_dir)) == ["rentals.parquet"]


def test_the_row_cap_holds_with_truncated(make_app, files_dir):
    client = make_app(FILES_DIR=files_dir, SQL_MAX_ROWS=2).test_client()
    assert put(client, "rentals", RENTALS).status_code == 200
    body = sql(client, "SELECT rent FROM files.rentals ORDER BY rent")
    assert body["data"] == [[2666], [2759]] and body["truncated"] is True


def test_files_is_a_data_source_whose_tables_are_the_files(client):
    assert ["files"] in sql(client, "SHOW DATABASES")["data"]
    assert put(client, "rentals", RENTALS).status_code == 200
    assert put(client, "b2", b"a\n1\n").status_code == 200
    body = sql(client, "SHOW TABLES FROM files")
    assert body["column_names"] == ["Tables_in_files"]
    assert body["data"] == [["b2"], ["rentals"]]


def test_files_are_listed_with_their_columns_for_the_console_and_databases(client):
    assert put(client, "rentals", RENTALS).status_code == 200
    schema = client.get("/api/console/schema").get_json()
    files = next(s for s in schema["data_sources"] if s["name"] == "files")
    assert files["tables"] == [{"name": "rentals", "columns": [
        {"name": "sqft", "type": "int64"}, {"name": "rooms", "type": "int64"},
        {"name": "location", "type": "string"}, {"name": "rent", "type": "int64"}]}]
    tables = client.get("/api/databases/files/tables").get_json()
    assert tables == [{"name": "rentals", "type": "data"}]


def test_a_file_larger_than_the_form_buffers_uploads(client):
    # Several MiB: beyond werkzeug's form-field memory limit, which must not apply to it.
    data = b"id,grp\n" + b"".join(b"%d,%d\n" % (i, i % 7) for i in range(300_000))
    # The body built here: the test client's own builder spools a large one to a temporary
    # file that it leaves open.
    boundary, body = encode_multipart({"file": FileStorage(io.BytesIO(data), "big.csv")})
    response = client.put("/api/files/big", data=body,
                          content_type=f"multipart/form-data; boundary={boundary}")
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.get_json()["row_count"] == 300_000
    assert sql(client, "SELECT count(DISTINCT grp) AS n FROM files.big")["data"] == [[7]]


def test_a_csv_of_wide_rows_is_stored_in_row_groups_of_bounded_size(client, files_dir):
    # DuckDB's row groups (122 880 rows) of rows of ~1.2 KB would be ~140 MiB each, held in
    # memory whole while written: beyond the converter's limit (the upload was refused).
    def row(i: int) -> bytes:
        return b"%d,%s\n" % (i, b"%010d" % i * 120)

    data = b"id,text\n" + b"".join(row(i) for i in range(16_000))
    boundary, body = encode_multipart({"file": FileStorage(io.BytesIO(data), "wide.csv")})
    response = client.put("/api/files/wide", data=body,
                          content_type=f"multipart/form-data; boundary={boundary}")
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.get_json()["row_count"] == 16_000
    meta = pq.ParquetFile(os.path.join(files_dir, "wide.parquet")).metadata
    groups = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert sum(groups) == 16_000 and len(groups) > 1, groups
    # ~8 MiB of the CSV's text each, give or take the last chunk (2 048 rows) DuckDB adds.
    assert max(groups) * len(row(0)) <= (8 << 20) + 2048 * len(row(0)), groups
    got = sql(client, "SELECT count(*), sum(id), min(length(text)), max(text) FROM files.wide")
    assert got["data"] == [[16_000, 16_000 * 15_999 // 2, 1200, f"{15_999:010d}" * 120]]


def test_a_model_is_trained_from_a_file(client):
    rows = "".join(f"{800 + i * 13},{1 + i % 5},{['good', 'great', 'poor'][i % 3]},"
                   f"{1500 + i * 20 + (i % 5) * 100}\n" for i in range(60))
    assert put(client, "rentals", ("sqft,rooms,location,rent\n" + rows).encode()
               ).status_code == 200
    body = sql(client, "CREATE MODEL mindsdb.rent_m FROM files (SELECT * FROM rentals) "
                       "PREDICT rent USING join_learn_process = true, time_budget_s = 1")
    assert body["type"] == "table", body
    status = sql(client, "SELECT status FROM mindsdb.models WHERE name = 'rent_m'")
    assert status["data"] == [["complete"]]
    predicted = sql(client, "SELECT rent FROM mindsdb.rent_m WHERE sqft = 1000 AND "
                            "rooms = 2 AND location = 'good'")["data"]
    assert 1500 < predicted[0][0] < 4000


def test_an_xlsx_workbook_first_sheet_or_the_one_named(client, tmp_path):
    import openpyxl

    book = openpyxl.Workbook()
    first = book.active
    first.title = "targets"
    first.append(["country", "goal"])
    first.append(["FR", 500])
    first.append(["SE", 100])
    other = book.create_sheet("notes")
    other.append(["note"])
    other.append(["hello"])
    path = tmp_path / "t.xlsx"
    book.save(path)
    data = path.read_bytes()
    assert put(client, "targets", data, "t.xlsx").status_code == 200
    assert sql(client, "SELECT country, goal FROM files.targets ORDER BY goal")["data"] == [
        ["SE", 100], ["FR", 500]]
    assert put(client, "notes", data, "t.xlsx", query="?sheet=notes").status_code == 200
    assert sql(client, "SELECT note FROM files.notes")["data"] == [["hello"]]
    assert_problem(put(client, "nope", data, "t.xlsx", query="?sheet=nope"), 422,
                   "no sheet 'nope'", "targets, notes")


def test_racing_uploads_of_one_new_name_store_one_file(make_app, files_dir):
    import threading

    app = make_app(FILES_DIR=files_dir)
    barrier = threading.Barrier(8)
    statuses: list[int] = []

    def upload(i: int) -> None:
        client = app.test_client()
        data = f"who\n{i}\n".encode()
        barrier.wait()
        statuses.append(put(client, "race", data).status_code)

    threads = [threading.Thread(target=upload, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [200] + [409] * 7
    client = app.test_client()
    assert [f["name"] for f in client.get("/api/files/").get_json()] == ["race"]
    assert len(sql(client, "SELECT who FROM files.race")["data"]) == 1
    assert stored(files_dir) == ["race.parquet"]


NUMBERS = "".join(f"{i},{i / 2},{i % 2}\n" for i in range(1, 31)).encode()


def test_a_csv_without_a_header_keeps_its_first_row_and_header_forces_it(client):
    """DuckDB's sniffer decides: a first row whose values fit the types of the rows below is
    data (named column0, column1 …); ?header=true|false overrides it."""
    assert put(client, "nums", NUMBERS).get_json()["row_count"] == 30
    body = sql(client, "SELECT * FROM files.nums ORDER BY column0 LIMIT 2")
    assert body["column_names"] == ["column0", "column1", "column2"]
    assert body["data"] == [[1, 0.5, 1], [2, 1.0, 0]]
    # A header of numbers (years) would be read as data, unless the upload says otherwise.
    years = b"2020,2021\n1,2\n3,4\n"
    assert put(client, "years", years).get_json()["columns"] == ["column0", "column1"]
    forced = put(client, "years2", years, query="?header=true").get_json()
    assert (forced["columns"], forced["row_count"]) == (["2020", "2021"], 2)
    # Text rows under a text first row: a header by default, data with header=false.
    names = b"bob,paris\nann,rome\n"
    assert put(client, "names", names).get_json()["columns"] == ["bob", "paris"]
    kept = put(client, "names2", names, query="?header=false").get_json()
    assert (kept["columns"], kept["row_count"]) == (["column0", "column1"], 2)
    assert put(client, "rentals", RENTALS).get_json()["columns"] == [
        "sqft", "rooms", "location", "rent"]
    assert_problem(put(client, "j", b'[{"a": 1}]', "j.json", query="?header=false"), 422,
                   "header applies to CSV")
    assert_problem(put(client, "x", NUMBERS, query="?header=maybe"), 400, "header")


def test_columns_keep_their_case_through_sql(client):
    assert put(client, "movies", b"movieId,Title\n1,Heat\n2,Alien\n").status_code == 200
    for query in ("SELECT * FROM files.movies ORDER BY movieId",
                  "SELECT movieId, Title FROM files.movies ORDER BY 1",
                  'SELECT "movieId", "Title" FROM files.movies ORDER BY "movieId"',
                  "SELECT m.movieid, m.title FROM files.movies AS m ORDER BY m.movieid",
                  "SELECT * FROM (SELECT movieId, Title FROM files.movies) AS s ORDER BY 1"):
        body = sql(client, query)
        assert body["column_names"] == ["movieId", "Title"], (query, body)
        assert body["data"] == [[1, "Heat"], [2, "Alien"]], query
    # An alias the statement writes is its own, in its own case.
    body = sql(client, 'SELECT movieId AS movieid, Title AS "Name" FROM files.movies LIMIT 1')
    assert body["column_names"] == ["movieid", "Name"]
    joined = sql(client, "SELECT m.movieId, count(*) AS n FROM files.movies AS m "
                         "JOIN files.movies AS o ON o.movieId = m.movieId GROUP BY m.movieId "
                         "ORDER BY m.movieId")
    assert joined["column_names"] == ["movieId", "n"], joined


def test_a_conversion_beyond_the_time_limit_is_413_and_nothing_is_stored(make_app, files_dir,
                                                                         tmp_path):
    client = make_app(FILES_DIR=files_dir, FILES_TIMEOUT_S=0.01).test_client()
    data = b"id,grp\n" + b"".join(b"%d,%d\n" % (i, i % 7) for i in range(50_000))
    import openpyxl

    book = openpyxl.Workbook()
    book.active.append(["a"])
    book.save(tmp_path / "t.xlsx")
    for body, filename in ((data, "big.csv"), ((tmp_path / "t.xlsx").read_bytes(), "t.xlsx")):
        assert_problem(put(client, "slow", body, filename), 413, "time limit of 0.01 s",
                       "QUARRY_FILES_TIMEOUT_S")
        assert stored(files_dir) == []
    assert client.get("/api/files/").get_json() == []
