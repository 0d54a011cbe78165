"""What a reader of the README and docs/ types works as written, from the repository's root.

A fresh clone has only what the repository ships: a `curl -F file=@<path>` must name a file
that is in it, and a URL to Quarry must name the address Quarry serves on. The federation
page's "Trying it" runs as written on the test servers: its tables made in PostgreSQL and
MariaDB, its CREATE DATABASE statements sent (with the test servers' addresses and
accounts), and its statement answering the rows it shows.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterator

import psycopg
import pymysql
import pytest
import sqlglot
from cryptography.fernet import Fernet
from sqlalchemy import make_url

from app.config import SETTINGS
from tests.conftest import MARIADB_URL, fresh_store_url, pg_database
from tests.live import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_UPLOAD = re.compile(r"^curl [^\n]*-F file=@\S+ \S+/api/files/\S+$", re.MULTILINE)
# A command, with its continuation lines ("\" at the end of a line).
_COMMAND = re.compile(r"^curl (?:[^\n]*\\\n)*[^\n]*$", re.MULTILINE)


# A URL of one of Quarry's routes: with a scheme (any host), or a bare host:port.
_QUARRY_URL = re.compile(r"(?:https?://(?P<host>[^/:\s\"'`]+)|\b(?P<bare>[\w.-]+)(?=:\d))"
                         r"(?::(?P<port>\d+))?/(?:api|mcp|console)\b")


@pytest.fixture(params=["sqlite"])
def store_url(request, tmp_path) -> str:
    return fresh_store_url(request, tmp_path)


def _file_commands(page) -> list[list[str]]:
    """The page's curl commands that upload a file or query the uploaded files."""
    return [shlex.split(c.replace("\\\n", " ")) for c in _COMMAND.findall(page.read_text())
            if "file=@" in c or "files." in c]


def _upload_pages() -> list:
    return [p for p in PAGES if _UPLOAD.search(p.read_text())]


def test_some_page_shows_an_upload():
    assert {p.name for p in _upload_pages()} >= {"README.md", "files.md"}


@pytest.mark.parametrize("page", _upload_pages(), ids=lambda p: p.name)
def test_an_upload_example_reads_a_file_the_repository_ships(make_app, tmp_path, page):
    client = make_app(FILES_DIR=str(tmp_path / "files"), DEMO_SOURCE=False).test_client()
    commands = _file_commands(page)
    uploads = [c for c in commands if any(a.startswith("file=@") for a in c)]
    assert uploads
    for command in uploads:
        path = ROOT / next(a for a in command if a.startswith("file=@"))[len("file=@"):]
        assert path.is_file(), f"{page.name}: {path.relative_to(ROOT)} is not in the repository"
        name = command[-1].rsplit("/api/files/", 1)[1]
        with path.open("rb") as handle:
            answer = client.put(f"/api/files/{name}", data={"file": (handle, path.name)},
                                content_type="multipart/form-data")
        assert answer.status_code == 200, answer.get_data(as_text=True)
        assert answer.get_json()["row_count"] > 0
    # The page's queries of what it uploaded answer rows.
    queries = [json.loads(c[c.index("-d") + 1])["query"] for c in commands
               if "-d" in c and any(a.endswith("/api/sql/query") for a in c)]
    assert queries
    for query in queries:
        answer = client.post("/api/sql/query", json={"query": query}).get_json()
        assert answer["type"] == "table" and answer["data"], (query, answer)


def test_every_url_to_quarry_names_the_address_it_serves_on():
    # docs/mcp.md once sent MCP clients to http://quarry:8000/mcp: nothing listens there.
    (bind,) = [s.default for s in SETTINGS if s.name == "BIND"]
    port = bind.rsplit(":", 1)[1]
    found = 0
    for page in PAGES:
        text = page.read_text()
        for match in re.finditer(_QUARRY_URL, text):
            host, given = match.group("host") or match.group("bare"), match.group("port")
            if host.startswith("<") or host.endswith("example.internal"):
                continue  # a placeholder, or the TLS name of the proxy in docs/deploy.md
            found += 1
            assert given == port, f"{page.name}: {match.group(0)} (Quarry serves on {port})"
    assert found > 10


@pytest.fixture
def crm_database() -> Iterator[dict]:
    """A new, empty MariaDB database on the test server; dropped afterwards."""
    server = make_url(MARIADB_URL)
    name = f"quarry_crm_{os.getpid()}"
    admin = pymysql.connect(host=server.host, port=server.port or 3306, user=server.username,
                            password=server.password or "", autocommit=True)
    try:
        with admin.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
            cursor.execute(f"CREATE DATABASE `{name}`")
        yield {"host": server.host, "port": server.port or 3306, "database": name,
               "user": server.username, "password": server.password}
        with admin.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
    finally:
        admin.close()


def _statements(block: str, dialect: str) -> list[str]:
    return [s.sql(dialect=dialect) for s in sqlglot.parse(block, read=dialect) if s]


@pytest.mark.slow  # two databases made, two data sources connected, a federated statement
def test_the_federation_page_can_be_tried_as_written(make_app, crm_database):
    page = (ROOT / "docs" / "federation.md").read_text()
    (statement,) = re.findall(r"^```sql\n(SELECT .*?)^```", page, re.M | re.S)[:1]
    section = page.split("## Trying it", 1)[1].split("\n## ", 1)[0]
    postgres, mariadb, connect = re.findall(r"^```sql\n(.*?)^```", section, re.M | re.S)
    assert postgres.startswith("-- PostgreSQL") and mariadb.startswith("-- MariaDB")
    with pg_database("quarry_shop") as shop:
        with psycopg.connect(shop.replace("+psycopg", ""), autocommit=True) as conn:
            for sql in _statements(postgres, "postgres"):
                conn.execute(sql)
        crm = crm_database
        with pymysql.connect(host=crm["host"], port=crm["port"], user=crm["user"],
                             password=crm["password"] or "", database=crm["database"],
                             autocommit=True) as conn, conn.cursor() as cursor:
            for sql in _statements(mariadb, "mysql"):
                cursor.execute(sql)
        shop_url = make_url(shop)
        servers = {"postgres": {"host": shop_url.host, "port": shop_url.port or 5432,
                                "database": shop_url.database, "user": shop_url.username,
                                "password": shop_url.password},
                   "mariadb": crm}
        app = make_app(ENCRYPTION_KEY=Fernet.generate_key().decode(), DEMO_SOURCE=False)
        client = app.test_client()
        # The page's CREATE DATABASE statements, sent as they are but for where the test's
        # servers are and who may read them there.
        for create in re.findall(r"CREATE DATABASE .*?;", connect, re.S):
            engine = re.search(r"ENGINE = '(\w+)'", create).group(1)
            shown = json.loads(re.search(r"PARAMETERS = (\{.*\})", create, re.S).group(1))
            ours = {k: v for k, v in servers[engine].items() if v is not None}
            assert set(shown) == {"host", "port", "database", "user", "password"}
            sent = re.sub(r"PARAMETERS = \{.*\}", "PARAMETERS = " + json.dumps(ours),
                          create.rstrip(";"), flags=re.S)
            answer = client.post("/api/sql/query", json={"query": sent}).get_json()
            assert answer["type"] == "ok", answer
        answer = client.post("/api/sql/query", json={"query": statement}).get_json()
        assert answer["type"] == "table", answer
        table = section.split("| country | total |", 1)[1].split("\n\n", 1)[0]
        shown = {(c.strip(), float(t)) for c, t in re.findall(r"^\| (\w+) \| ([\d.]+) \|$",
                                                              table, re.M)}
        assert len(shown) == 3
        assert {(c, float(t)) for c, t in answer["data"]} == shown
