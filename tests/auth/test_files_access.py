"""Rights on uploaded files: reading needs the right to query the data source files,
uploading and deleting are an admin's (as for other data sources)."""

from __future__ import annotations

import io

from app.services import auth as auth_service
from tests.auth.conftest import PASSWORD
from tests.helpers import assert_problem


def _form(data: bytes = b"a,b\n1,2\n") -> dict:
    return {"file": (io.BytesIO(data), "t.csv"), "source_type": "file"}


def test_files_are_read_with_a_grant_and_changed_by_admins(make_auth_app, tmp_path):
    app = make_auth_app(FILES_DIR=str(tmp_path / "files"))
    client = app.test_client()
    with app.app_context():
        auth_service.create_user("root", PASSWORD, admin=True)
        auth_service.create_user("alice", PASSWORD)
        tokens = {n: auth_service.create_token(n, "t")[1] for n in ("root", "alice")}
    h = {n: {"Authorization": f"Bearer {t}"} for n, t in tokens.items()}

    def sql(who: str, query: str) -> dict:
        response = client.post("/api/sql/query", json={"query": query}, headers=h[who])
        assert response.status_code == 200
        return response.get_json()

    put = lambda who, name: client.put(f"/api/files/{name}", data=_form(),  # noqa: E731
                                       headers=h[who], content_type="multipart/form-data")
    assert_problem(put("alice", "t"), 403, "admin")
    assert put("root", "t").status_code == 200
    # Without a grant, files does not exist for alice: neither its rows nor their names.
    body = sql("alice", "SELECT * FROM files.t")
    assert body["type"] == "error" and "not a data source" in body["error_message"]
    assert client.get("/api/files/", headers=h["alice"]).get_json() == []
    assert ["files"] not in sql("alice", "SHOW DATABASES")["data"]
    assert sql("root", "GRANT query ON DATABASE files TO alice")["type"] == "ok"
    assert sql("alice", "SELECT a, b FROM files.t")["data"] == [[1, 2]]
    assert [f["name"] for f in client.get("/api/files/", headers=h["alice"]).get_json()] \
        == ["t"]
    assert_problem(client.delete("/api/files/t", headers=h["alice"]), 403, "admin")
    assert client.delete("/api/files/t", headers=h["root"]).status_code == 200
