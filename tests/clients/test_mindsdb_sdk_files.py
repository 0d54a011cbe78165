"""mindsdb_sdk 3.4.10, unchanged, against a live Quarry (gunicorn): upload a DataFrame as a
file, list and query it, and create, list, read and drop views."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.live import migrated_sqlite_env, serving

mindsdb_sdk = pytest.importorskip("mindsdb_sdk")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def url(tmp_path_factory, session_dir):
    tmp = tmp_path_factory.mktemp("sdk_files")
    env = migrated_sqlite_env(tmp, QUARRY_DEMO_PATH=f"{session_dir}/demo.db")
    with serving(env, tmp) as server:
        yield server.url


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


def test_sdk_creates_lists_reads_and_drops_views(url):
    server = mindsdb_sdk.connect(url)
    project = server.get_project("mindsdb")
    demo = server.get_database("demo")
    project.views.create("setosa", demo.query("SELECT * FROM iris WHERE species = 'setosa'"))
    assert [v.name for v in project.views.list()] == ["setosa"]
    view = project.views.get("setosa")
    assert len(view.fetch()) == 50
    project.views.drop("setosa")
    assert project.views.list() == []
