"""The embedded default (no QUARRY_DATABASE_URL, no QUARRY_ENCRYPTION_KEY) makes its own key
in its instance folder on first start, mode 0600, and uses it afterwards: the README's
/api/databases example with a password works on a plain `make serve`."""

from __future__ import annotations

import os
import stat
import threading
from concurrent.futures import ThreadPoolExecutor

from flask_migrate import upgrade

from app import create_app
from app.services.credentials import instance_key
from tests.conftest import TEST_KEY, _dispose

from .conftest import database_body


def _default_app(instance, **settings):
    return create_app({"DATABASE_URL": None, "ENCRYPTION_KEY": None,
                       "INSTANCE_PATH": str(instance), "DEMO_SOURCE": False, **settings})


def test_the_default_store_makes_its_key_once_and_keeps_it(tmp_path, pg_db):
    app = _default_app(tmp_path)
    try:
        key_file = tmp_path / "encryption.key"
        assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
        key = key_file.read_text().strip()
        assert app.config["ENCRYPTION_KEY"] == key
        with app.app_context():
            upgrade()
        client = app.test_client()
        made = client.post("/api/databases", json=database_body("readme_db", "postgres", pg_db))
        assert made.status_code == 201, made.get_data(as_text=True)
        assert pg_db["password"] not in (tmp_path / "quarry.db").read_bytes().decode("latin-1")
    finally:
        _dispose(app)
    again = _default_app(tmp_path)  # the next start reads the same key: the password opens
    try:
        assert again.config["ENCRYPTION_KEY"] == key
        answer = again.test_client().post("/api/sql/query", json={
            "query": "SELECT count(*) AS n FROM readme_db.points"}).get_json()
        assert answer["type"] == "table", answer
    finally:
        _dispose(again)


def test_a_deployment_sets_its_own_key_and_no_file_is_made(tmp_path):
    app = _default_app(tmp_path, ENCRYPTION_KEY=TEST_KEY)
    _dispose(app)
    app = _default_app(tmp_path / "other", DATABASE_URL=f"sqlite:///{tmp_path}/own.db")
    _dispose(app)
    assert app.config["ENCRYPTION_KEY"] is None
    assert not list(tmp_path.rglob("encryption.key"))


def test_workers_starting_at_once_all_use_one_key(tmp_path):
    """Eight starts make the key at the same moment: one file, one key for all of them."""
    barrier = threading.Barrier(8)

    def start() -> str:
        barrier.wait()
        return instance_key(str(tmp_path))

    with ThreadPoolExecutor(8) as pool:
        keys = set(pool.map(lambda _: start(), range(8)))
    assert len(keys) == 1 and keys == {(tmp_path / "encryption.key").read_text().strip()}
    assert [p.name for p in tmp_path.iterdir()] == ["encryption.key"]  # no draft left
