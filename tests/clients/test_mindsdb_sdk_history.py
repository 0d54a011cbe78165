"""mindsdb_sdk 3.4.10, unchanged, signed in as a user of a live Quarry (gunicorn, two workers,
sign-in on): what it runs lands in that user's history, which the console lists."""

from __future__ import annotations

import time

import pytest
import requests

from tests.live import serving_admins

mindsdb_sdk = pytest.importorskip("mindsdb_sdk")

pytestmark = pytest.mark.slow
PASSWORD = "sdk history password"


@pytest.fixture(scope="module")
def url(tmp_path_factory, sqlite_template):
    with serving_admins(tmp_path_factory.mktemp("sdk_history"), sqlite_template,
                        ("carol", "dave"), PASSWORD) as server:
        yield server.url


def _history(url: str, user: str, search: str) -> list[dict]:
    token = requests.post(url + "/api/login", json={"username": user, "password": PASSWORD},
                          timeout=30).json()["token"]
    answer = requests.get(url + "/api/console/history", params={"q": search},
                          headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert answer.status_code == 200
    return answer.json()


def test_what_the_sdk_runs_is_in_its_users_history(url):
    server = mindsdb_sdk.connect(url, login="carol", password=PASSWORD)
    frame = server.query("SELECT species, sepal_length FROM demo.iris LIMIT 5").fetch()
    assert len(frame) == 5
    with pytest.raises(RuntimeError):
        server.query("SELECT no_such_column FROM demo.iris").fetch()
    # Two workers: the one that ran a statement writes its history within about a second.
    deadline = time.monotonic() + 5
    while len(found := _history(url, "carol", "demo.iris")) < 2:
        assert time.monotonic() < deadline, found
        time.sleep(0.2)
    failed, read = found
    assert (read["statement"], read["outcome"], read["row_count"]) == (
        "SELECT species, sepal_length FROM demo.iris LIMIT 5", "table", 5)
    assert read["database"] == "demo" and read["duration_ms"] > 0
    assert (failed["outcome"], failed["error_code"]) == ("error", 15)
    assert "no_such_column" in failed["error_message"]
    # Another user's history does not hold them.
    assert _history(url, "dave", "demo.iris") == []
