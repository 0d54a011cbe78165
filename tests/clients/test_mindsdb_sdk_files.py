"""mindsdb_sdk 3.4.10, unchanged, against a live Quarry (gunicorn): upload a DataFrame as a
file, list and query it, join it with a PostgreSQL table, train a model from it; malformed
and oversized uploads refused with nothing stored; and create, list, read, train from and
drop views."""

from __future__ import annotations

import os

import pandas as pd
import pytest
import requests
from cryptography.fernet import Fernet

from tests.databases.conftest import PG_ROWS, pg_db  # noqa: F401 - a fixture
from tests.live import migrated_sqlite_env, serving

mindsdb_sdk = pytest.importorskip("mindsdb_sdk")

pytestmark = pytest.mark.slow

LIMIT = 200_000  # QUARRY_FILES_MAX_BYTES of this server


@pytest.fixture(scope="module")
def served(tmp_path_factory, session_dir, sqlite_template):
    tmp = tmp_path_factory.mktemp("sdk_files")
    env = migrated_sqlite_env(tmp, sqlite_template, QUARRY_DEMO_PATH=f"{session_dir}/demo.db",
                              QUARRY_FILES_MAX_BYTES=str(LIMIT),
                              QUARRY_ENCRYPTION_KEY=Fernet.generate_key().decode())
    with serving(env, tmp) as server:
        yield server.url, tmp / "files"


@pytest.fixture(scope="module")
def url(served):
    return served[0]


def _stored(folder) -> list[str]:
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


def _rentals(rows: int) -> pd.DataFrame:
    return pd.DataFrame({
        "sqft": [800 + i * 13 for i in range(rows)],
        "location": [["good", "great", "poor"][i % 3] for i in range(rows)],
        "point": [1 + i % 60 for i in range(rows)],
        "rent": [1500 + i * 20 + (i % 5) * 100 for i in range(rows)]})


def test_sdk_uploads_lists_and_queries_a_file(url):
    server = mindsdb_sdk.connect(url)
    frame = pd.DataFrame({"sqft": [1088, 1347, 921], "location": ["good", "great", "great"],
                          "rent": [2759, 3544, 2666]})
    files = server.get_database("files")
    files.tables.create("rentals", frame)  # PUT /api/files/rentals, a CSV part
    assert [t.name for t in files.tables.list()] == ["rentals"]
    assert server.api.get_file_metadata("rentals")["row_count"] == 3
    result = files.query("SELECT location, sum(rent) AS total FROM rentals "
                         "GROUP BY location ORDER BY location").fetch()
    assert result.to_dict("records") == [{"location": "good", "total": 2759},
                                         {"location": "great", "total": 6210}]
    files.tables.drop("rentals")  # DROP TABLE files.rentals
    assert files.tables.list() == []


def test_sdk_sees_a_file_s_columns_in_their_own_case(url):
    server = mindsdb_sdk.connect(url)
    files = server.get_database("files")
    files.tables.create("movies", pd.DataFrame({"movieId": [2, 1], "Title": ["Heat", "Up"]}))
    assert list(files.tables.get("movies").fetch().columns) == ["movieId", "Title"]
    picked = files.query("SELECT movieId FROM movies ORDER BY movieId").fetch()
    assert picked.to_dict("records") == [{"movieId": 1}, {"movieId": 2}]
    files.tables.drop("movies")


def test_sdk_joins_a_file_with_postgresql_and_trains_from_it(url, pg_db):  # noqa: F811
    server = mindsdb_sdk.connect(url)
    server.create_database("sdk_pg", engine="postgres", connection_args=pg_db)
    files = server.get_database("files")
    files.tables.create("homes", _rentals(90))
    joined = server.query("SELECT p.kind, count(*) AS n, max(h.rent) AS top "
                          "FROM files.homes h JOIN sdk_pg.points p ON p.id = h.point "
                          "GROUP BY p.kind ORDER BY p.kind").fetch()
    kinds = {k for *_, k in PG_ROWS}
    assert list(joined["kind"]) == sorted(kinds) and joined["n"].sum() == 90
    project = server.get_project("mindsdb")
    model = project.models.create("rent_m", predict="rent",
                                  query=files.query("SELECT * FROM homes"),
                                  options={"join_learn_process": True})
    assert model.get_status() == "complete"
    predicted = model.predict(pd.DataFrame([{"sqft": 1000, "location": "good", "point": 3}]))
    assert 1500 < float(predicted["rent"][0]) < 4000


def test_sdk_malformed_and_oversized_uploads_store_nothing(served):
    url, folder = served
    server = mindsdb_sdk.connect(url)
    before = _stored(folder)
    listed = [f["name"] for f in requests.get(f"{url}/api/files/", timeout=30).json()]
    ragged = pd.DataFrame({"a": ["1", "2"], "b": ["x", "y,z"]})
    with pytest.raises(requests.HTTPError) as refused:
        # A CSV whose second row has a field too many (written as is, unquoted).
        server.api.upload_data("ragged", b"a,b\n1,x\n2,y,z\n")
    assert refused.value.response.status_code == 422
    assert "Line: 3" in refused.value.response.json()["detail"]
    with pytest.raises(requests.HTTPError) as refused:
        server.get_database("files").tables.create(
            "huge", pd.concat([ragged] * (LIMIT // 8), ignore_index=True))
    assert refused.value.response.status_code == 413
    # Refused before the body is all read, the connection is closed: a new one follows.
    server = mindsdb_sdk.connect(url)
    with pytest.raises(requests.HTTPError) as refused:
        server.api.upload_data("empty", b"")
    assert refused.value.response.status_code == 422
    assert _stored(folder) == before
    assert [f["name"] for f in requests.get(f"{url}/api/files/", timeout=30).json()] == listed


def test_sdk_creates_lists_reads_trains_from_and_drops_views(url):
    server = mindsdb_sdk.connect(url)
    project = server.get_project("mindsdb")
    demo = server.get_database("demo")
    project.views.create("setosa", demo.query("SELECT * FROM iris WHERE species = 'setosa'"))
    assert [v.name for v in project.views.list()] == ["setosa"]
    view = project.views.get("setosa")
    assert len(view.fetch()) == 50
    assert len(view.filter(sepal_width=3.4).fetch()) > 0
    model = project.models.create("petal_m", predict="petal_length", query=view,
                                  options={"join_learn_process": True})
    assert model.get_status() == "complete"
    assert len(model.predict(view.limit(5))) == 5
    with pytest.raises(Exception, match="nosuch"):
        project.views.create("broken", demo.query("SELECT nosuch FROM iris"))
    project.models.drop("petal_m")
    project.views.drop("setosa")
    assert project.views.list() == []
