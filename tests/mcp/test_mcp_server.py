"""The MCP endpoint through the official ``mcp`` client, over HTTP, against Quarry served by
gunicorn with sign-in on and real data sources (PostgreSQL, MariaDB)."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import mindsdb_sdk
import psycopg
import pymysql
import pytest
import requests
from mcp.client import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from app import create_app
from app.config import load_settings
from app.extensions import db
from tests.conftest import PG_ADMIN_URL
from tests.live import quarry_env, serving, sqlite_store

pytestmark = pytest.mark.slow

PID = os.getpid()
PG_DB = f"mcp_src_{PID}"
MARIA_TABLE = f"mcp_hidden_{PID}"
PASSWORD = "mcp test password"
# A one-second budget (the default search of a small table takes 6 s): the tools need a
# trained model to describe and ask, not the best one.
CREATE_MODEL = ("CREATE MODEL mindsdb.flowers FROM demo (SELECT * FROM iris) PREDICT species "
                "USING join_learn_process = true, time_budget_s = 1")


def _pg(database: str = "postgres") -> psycopg.Connection:
    url = PG_ADMIN_URL.replace("postgresql+psycopg://", "postgresql://")
    return psycopg.connect(url.rsplit("/", 1)[0] + "/" + database, autocommit=True)


def _maria() -> pymysql.Connection:
    return pymysql.connect(host="127.0.0.1", port=3306, user="root", database="test",
                           autocommit=True)


def _users(env: dict) -> dict[str, str]:
    """alice (admin) and bob (member, granted the pg source only), with API tokens."""
    app = create_app(load_settings(env))
    runner = app.test_cli_runner()
    tokens = {}
    for user, extra in (("alice", ["--admin"]), ("bob", [])):
        made = runner.invoke(args=["users", "create", user, *extra], input=PASSWORD + "\n")
        assert made.exit_code == 0, made.output
        token = runner.invoke(args=["tokens", "create", "--user", user, "--label", "mcp"])
        assert token.exit_code == 0, token.output
        tokens[user] = token.stdout.strip()
    with app.app_context():
        db.engine.dispose()
    return tokens


@pytest.fixture(scope="module")
def server(tmp_path_factory, sqlite_template, demo_db):
    tmp = tmp_path_factory.mktemp("mcp")
    with _pg() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{PG_DB}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{PG_DB}"')
    with _pg(PG_DB) as conn:
        conn.execute("CREATE TABLE orders (id integer PRIMARY KEY, item text, amount "
                     "numeric(8,2))")
        conn.execute("INSERT INTO orders SELECT g, 'item ' || g, g * 1.5 "
                     "FROM generate_series(1, 30) g")
        conn.execute("CREATE TABLE salaries (who text, pay integer)")
        conn.execute("INSERT INTO salaries VALUES ('ceo', 1000000)")
    with _maria() as conn, conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {MARIA_TABLE}")
        cur.execute(f"CREATE TABLE {MARIA_TABLE} (secret VARCHAR(20))")
        cur.execute(f"INSERT INTO {MARIA_TABLE} VALUES ('hidden')")
    pg_url = PG_ADMIN_URL.replace("postgresql+psycopg://", "postgresql://").rsplit("/", 1)[0]
    env = quarry_env(QUARRY_DATABASE_URL=sqlite_store(sqlite_template, tmp),
                     QUARRY_INSTANCE_PATH=str(tmp), QUARRY_DEMO_SOURCE="true",
                     QUARRY_DEMO_PATH=demo_db, QUARRY_AUTH_REQUIRED="true",
                     QUARRY_SECRET_KEY="mcp-secret-" + "k" * 32,
                     QUARRY_WORKERS="2", QUARRY_THREADS="4", QUARRY_MCP_MAX_ROWS="10",
                     QUARRY_DATA_SOURCES=json.dumps({
                         "pg": f"{pg_url}/{PG_DB}",
                         "maria": "mysql+pymysql://root@127.0.0.1:3306/test"}))
    tokens = _users(env)
    try:
        with serving(env, tmp) as live:
            admin = {"Authorization": f"Bearer {tokens['alice']}"}
            for statement in ("GRANT query ON DATABASE pg TO bob",
                              "GRANT viewer ON PROJECT mindsdb TO bob", CREATE_MODEL,
                              "CREATE KNOWLEDGE_BASE mindsdb.handbook",
                              "INSERT INTO mindsdb.handbook (id, content) VALUES "
                              "(1, 'Refunds are paid back within ten days.'), "
                              "(2, 'The office opens at eight in the morning.')"):
                answer = requests.post(live.url + "/api/sql/query", headers=admin,
                                       json={"query": statement}, timeout=120).json()
                assert answer["type"] != "error", answer
            for path, body in (
                    ("/api/projects/mindsdb/skills", {"skill": {
                        "name": "orders_sql", "type": "sql",
                        "params": {"database": "pg", "tables": ["orders"]}}}),
                    ("/api/projects/mindsdb/skills", {"skill": {
                        "name": "docs", "type": "retrieval", "params": {"source": "kb"}}}),
                    ("/api/projects/mindsdb/skills", {"skill": {
                        "name": "handbook", "type": "knowledge_base",
                        "params": {"source": "handbook"}}}),
                    ("/api/projects/mindsdb/agents", {"agent": {
                        "name": "analyst", "model_name": "m",
                        "skills": ["orders_sql", "docs", "handbook"]}})):
                made = requests.post(live.url + path, headers=admin, json=body, timeout=30)
                assert made.status_code == 201, made.text
            yield {"url": live.url, "tokens": tokens}
    finally:
        with _pg() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{PG_DB}" WITH (FORCE)')
        with _maria() as conn, conn.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {MARIA_TABLE}")


@asynccontextmanager
async def _client(server, user: str, path: str = "/mcp", mode: str = "auto"):
    """The official client in its default mode (auto: the 2026 probe, then the handshake),
    signed in with the user's API token."""
    async with create_mcp_http_client(headers={"X-Api-Key": server["tokens"][user]}) as http, \
            Client(streamable_http_client(server["url"] + path, http_client=http),
                   mode=mode) as client:
        yield client


async def _calls(server, user: str, calls: list[tuple[str, dict]], **kwargs) -> list:
    async with _client(server, user, **kwargs) as client:
        return [await client.call_tool(name, arguments) for name, arguments in calls]


def _table(result) -> dict:
    assert not result.is_error, result.content
    return result.structured_content


def _error(result) -> str:
    assert result.is_error, result.structured_content
    return result.content[0].text


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_official_client_connects_and_lists_the_tools(server, mode):
    async def run():
        async with _client(server, "bob", mode=mode) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            return client.session.protocol_version, names  # noqa: B023
    version, names = asyncio.run(run())
    if mode == "auto":  # the server/discover probe is answered: the stateless revision
        assert version == MODERN_PROTOCOL_VERSIONS[-1] == "2026-07-28"
    else:
        assert version in HANDSHAKE_PROTOCOL_VERSIONS
    assert names == ["list_databases", "query", "list_tables", "describe_model",
                     "search_knowledge_base", "predict"]


def _modern(server, body: dict, headers: dict | None = None, version: str = "2026-07-28"):
    """POST one stateless-era request as the wire has it: revision and capabilities in
    _meta, the routing headers beside them."""
    params = body.setdefault("params", {})
    params.setdefault("_meta", {"io.modelcontextprotocol/protocolVersion": version,
                                "io.modelcontextprotocol/clientCapabilities": {}})
    sent = {"X-Api-Key": server["tokens"]["bob"], "MCP-Protocol-Version": version,
            "Mcp-Method": body["method"], **(headers or {})}
    if body["method"] == "tools/call":
        sent.setdefault("Mcp-Name", params["name"])
    return requests.post(server["url"] + "/mcp", headers=sent, timeout=30,
                         json={"jsonrpc": "2.0", "id": 5, **body})


def test_the_stateless_revision_on_the_wire(server):
    discovered = _modern(server, {"method": "server/discover"})
    assert discovered.status_code == 200, discovered.text
    result = discovered.json()["result"]
    assert result["supportedVersions"] == [*HANDSHAKE_PROTOCOL_VERSIONS, "2026-07-28"]
    assert result["capabilities"]["tools"] == {"listChanged": False}
    assert result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "quarry"
    # No handshake: a tool is called straight away, the request signed in on its own.
    found = _modern(server, {"method": "tools/call", "params": {
        "name": "search_knowledge_base",
        "arguments": {"knowledge_base": "handbook", "text": "opening hours", "limit": 1}}})
    called = found.json()["result"]
    assert called["resultType"] == "complete" and called.get("isError") is not True
    assert called["structuredContent"]["rows"][0][0] == "2"
    # The envelope is checked: headers that disagree with the body, a missing _meta, a
    # revision not served (its answer lists every one served), a removed method.
    mismatch = _modern(server, {"method": "tools/list"}, {"Mcp-Method": "tools/call"})
    assert mismatch.status_code == 400 and mismatch.json()["error"]["code"] == -32020
    renamed = _modern(server, {"method": "tools/call", "params": {
        "name": "query", "arguments": {"query": "SELECT 1"}}}, {"Mcp-Name": "predict"})
    assert renamed.status_code == 400 and renamed.json()["error"]["code"] == -32020
    bare = requests.post(server["url"] + "/mcp", timeout=10, headers={
        "X-Api-Key": server["tokens"]["bob"], "Mcp-Method": "server/discover"},
        json={"jsonrpc": "2.0", "id": 1, "method": "server/discover"})
    assert bare.status_code == 400 and bare.json()["error"]["code"] == -32602
    future = _modern(server, {"method": "tools/list"}, version="2099-01-01")
    assert future.status_code == 400 and future.json()["error"]["code"] == -32022
    assert future.json()["error"]["data"]["supported"] == \
        [*HANDSHAKE_PROTOCOL_VERSIONS, "2026-07-28"]
    for removed in ("initialize", "ping"):
        gone = _modern(server, {"method": removed})
        assert gone.status_code == 404 and gone.json()["error"]["code"] == -32601
    nope = _modern(server, {"method": "tools/call", "params": {"name": "nope"}})
    assert nope.json()["result"]["isError"] is True


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
def test_each_handshake_revision_is_answered_with_itself(server, version):
    headers = {"X-Api-Key": server["tokens"]["bob"], "Accept": "application/json, "
               "text/event-stream"}
    init = requests.post(server["url"] + "/mcp", headers=headers, timeout=10, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}}})
    assert init.status_code == 200 and init.headers["Content-Type"] == "application/json"
    assert init.json()["result"]["protocolVersion"] == version
    note = requests.post(server["url"] + "/mcp", timeout=10,
                         headers={**headers, "MCP-Protocol-Version": version},
                         json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert note.status_code == 202 and note.content == b""
    ping = requests.post(server["url"] + "/mcp", timeout=10,
                         headers={**headers, "MCP-Protocol-Version": version},
                         json={"jsonrpc": "2.0", "id": 2, "method": "ping"})
    assert ping.json() == {"jsonrpc": "2.0", "id": 2, "result": {}}


def test_an_unknown_revision_gets_the_newest_and_a_get_is_refused(server):
    headers = {"X-Api-Key": server["tokens"]["bob"]}
    init = requests.post(server["url"] + "/mcp", headers=headers, timeout=10, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "1999-01-01", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}}})
    assert init.json()["result"]["protocolVersion"] == HANDSHAKE_PROTOCOL_VERSIONS[-1]
    bad_header = requests.post(server["url"] + "/mcp", timeout=10,
                               headers={**headers, "MCP-Protocol-Version": "1999-01-01"},
                               json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert bad_header.status_code == 400
    assert bad_header.headers["Content-Type"] == "application/problem+json"
    assert "1999-01-01" in bad_header.json()["detail"]
    assert requests.get(server["url"] + "/mcp", headers=headers, timeout=10).status_code == 405
    broken = requests.post(server["url"] + "/mcp", headers=headers, data=b"{not json",
                           timeout=10)
    assert broken.status_code == 400 and broken.json()["title"] == "Invalid JSON"
    for body in ("5", "[]", '"text"'):
        refused = requests.post(server["url"] + "/mcp", headers=headers, data=body, timeout=10)
        assert refused.status_code == 400 and refused.json()["title"] == "Not JSON-RPC"
    batch = requests.post(server["url"] + "/mcp", headers=headers, timeout=10, json=[
        {"jsonrpc": "2.0", "id": 7, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 8, "method": "nope"}])
    assert [a["id"] for a in batch.json()] == [7, 8]
    assert batch.json()[1]["error"]["code"] == -32601


def test_without_credentials_401(server):
    answer = requests.post(server["url"] + "/mcp", timeout=10,
                           json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert answer.status_code == 401
    assert answer.headers["Content-Type"] == "application/problem+json"

    async def run():
        async with create_mcp_http_client() as http, \
                Client(streamable_http_client(server["url"] + "/mcp", http_client=http)):
            pass
    with pytest.raises(Exception):  # noqa: B017 - the client reports a 401 its own way
        asyncio.run(run())


def test_each_tool_as_a_member(server):
    # The official client's default mode: the stateless revision (the handshake era runs
    # the same tools: test_the_official_client_connects_and_lists_the_tools, and below).
    results = asyncio.run(_calls(server, "bob", mode="2026-07-28", calls=[
        ("list_databases", {}),
        ("list_tables", {"database": "pg"}),
        ("query", {"query": "SELECT id, item, amount FROM orders WHERE id <= 3 ORDER BY id",
                   "context": {"db": "pg"}}),
        ("query", {"query": "SELECT id FROM pg.orders ORDER BY id"}),
        ("describe_model", {"model": "flowers"}),
        ("predict", {"model": "flowers", "data": {"sepal_length": 5.1, "sepal_width": 3.5,
                                                  "petal_length": 1.4, "petal_width": 0.2}}),
        ("search_knowledge_base", {"knowledge_base": "handbook", "text": "opening hours",
                                   "hybrid_search_alpha": 0.5}),
        ("search_knowledge_base", {"knowledge_base": "nowhere", "text": "x"}),
        ("search_knowledge_base", {"knowledge_base": "handbook", "text": "x", "limit": 0}),
        ("search_knowledge_base", {"knowledge_base": "handbook", "text": "x",
                                   "reranking": True}),
        ("search_knowledge_base", {"knowledge_base": "handbook", "text": "opening hours",
                                   "reranking": False, "limit": 1}),
    ]))
    databases = _table(results[0])
    assert databases["columns"] == ["Database"]  # SHOW DATABASES, as MindsDB answers it
    names = [row[0] for row in databases["rows"]]
    assert "pg" in names and "maria" not in names  # a source bob may not query: not there
    tables = _table(results[1])
    assert tables["columns"] == ["database", "table", "column", "type"]
    assert ["pg", "orders", "amount", "numeric"] in tables["rows"]
    small = _table(results[2])
    assert small == {"columns": ["id", "item", "amount"], "truncated": False,
                     "rows": [[1, "item 1", 1.5], [2, "item 2", 3.0],
                              [3, "item 3", 4.5]]}
    big = _table(results[3])
    assert big["truncated"] is True and big["rows"] == [[i] for i in range(1, 11)]
    described = _table(results[4])
    assert described["rows"] and "accuracies" in described["columns"]
    predicted = _table(results[5])
    assert predicted["rows"][0][predicted["columns"].index("species")] == "setosa"
    found = _table(results[6])
    assert found["rows"][0][:2] == ["2", "2:1of1:0to41"] and len(found["rows"]) == 2
    assert "nowhere" in _error(results[7]) and "limit" in _error(results[8])
    assert "no reranking_model" in _error(results[9])
    assert _table(results[10])["rows"] == found["rows"][:1]


def test_errors_are_tool_errors_with_the_sql_endpoints_message(server):
    statement = "SELECT nope FROM orders"
    endpoint = requests.post(server["url"] + "/api/sql/query", timeout=10,
                             headers={"X-Api-Key": server["tokens"]["bob"]},
                             json={"query": statement, "context": {"db": "pg"}}).json()
    assert endpoint["type"] == "error"
    results = asyncio.run(_calls(server, "bob", mode="legacy", calls=[  # the handshake era
        ("query", {"query": statement, "context": {"db": "pg"}}),
        ("query", {"query": f"SELECT * FROM maria.{MARIA_TABLE}"}),
        ("list_tables", {"database": "maria"}),
        ("query", {"query": "DROP DATABASE pg"}),
        ("query", {"query": "SELECT pg_read_file('/etc/passwd')", "context": {"db": "pg"}}),
        ("describe_model", {"model": "nothing"}),
        ("nope", {}),
    ]))
    assert _error(results[0]) == endpoint["error_message"]
    # A source bob may not query answers as a missing one, on both paths.
    hidden = requests.post(server["url"] + "/api/sql/query", timeout=10,
                           headers={"X-Api-Key": server["tokens"]["bob"]},
                           json={"query": f"SELECT * FROM maria.{MARIA_TABLE}"}).json()
    assert _error(results[1]) == hidden["error_message"]
    assert "'maria' in maria." in _error(results[1])
    assert "is not a data source" in _error(results[1])
    assert "does not exist" in _error(results[2])
    assert "Only statements that read" in _error(results[3])
    assert "pg_read_file" in _error(results[4])
    assert "nothing" in _error(results[5])
    assert "No tool named" in _error(results[6])


def test_a_delete_is_refused_and_nothing_written(server):
    results = asyncio.run(_calls(server, "alice", [
        ("query", {"query": "DELETE FROM orders", "context": {"db": "pg"}}),
        ("query", {"query": "WITH gone AS (DELETE FROM orders RETURNING *) SELECT * FROM gone",
                   "context": {"db": "pg"}}),
        ("query", {"query": "CREATE PROJECT from_mcp"}),
    ]))
    for result in results:
        assert result.is_error
    with _pg(PG_DB) as conn:
        assert conn.execute("SELECT count(*) FROM orders").fetchone()[0] == 30
    projects = requests.get(server["url"] + "/api/projects", timeout=10,
                            headers={"X-Api-Key": server["tokens"]["alice"]}).json()
    assert "from_mcp" not in [p["name"] for p in projects]


def test_each_call_is_in_the_audit_log_with_who_asked(server):
    marker = f"SELECT {PID} AS audited"
    asyncio.run(_calls(server, "bob", [("query", {"query": marker}),
                                       ("describe_model", {"model": "flowers"})]))
    admin = {"X-Api-Key": server["tokens"]["alice"]}
    deadline = time.monotonic() + 10
    while True:  # statements' records are written in batches, within about a second
        records = requests.get(server["url"] + "/api/audit", headers=admin, timeout=10,
                               params={"user": "bob", "limit": "50"}).json()
        statements = [r.get("statement") for r in records.get("records", records)]
        if marker in statements and any("describe_model mindsdb.flowers" in (s or "")
                                        for s in statements) or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert marker in statements
    assert any("describe_model mindsdb.flowers" in (s or "") for s in statements)


def test_the_legacy_session_api(server):
    async def run():
        token = server["tokens"]["bob"]
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) \
                as http, streamable_http_client(server["url"] + "/mcp", http_client=http) \
                as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await session.call_tool("query", {"query": "SELECT 1 AS one"})
    assert _table(asyncio.run(run())) == {"columns": ["one"], "rows": [[1]],
                                          "truncated": False}


AGENT = "/mcp/projects/mindsdb/agents/analyst"


def test_an_agents_skills_are_its_tools(server):
    async def run():
        async with _client(server, "bob", AGENT) as client:
            return (await client.list_tools()).tools
    tools = {t.name: t for t in asyncio.run(run())}
    assert sorted(tools) == ["query_orders_sql", "search_handbook", "skill_docs"]
    # Described with its tables' columns, so that a model can write SQL for them.
    assert "orders(id integer, item text, amount numeric)" in tools["query_orders_sql"].description
    assert "cannot run" in tools["skill_docs"].description
    results = asyncio.run(_calls(server, "bob", [
        ("query_orders_sql", {"query": "SELECT count(*) AS n FROM orders"}),
        ("query_orders_sql", {"query": "SELECT o.id FROM public.orders o WHERE o.id = 2"}),
        ("skill_docs", {}),
        ("search_handbook", {"text": "when do I get my money back", "limit": 1}),
    ], path=AGENT))
    assert _table(results[0])["rows"] == [[30]]
    assert _table(results[1])["rows"] == [[2]]
    assert "cannot run yet" in _error(results[2])
    found = _table(results[3])
    assert found["columns"][:3] == ["id", "chunk_id", "chunk_content"]
    assert [row[0] for row in found["rows"]] == ["1"]


@pytest.mark.parametrize("statement", [
    "SELECT * FROM salaries",
    "SELECT * FROM public.salaries",
    "SELECT o.id, s.pay FROM orders o JOIN salaries s ON true",
    "SELECT id FROM orders WHERE id < (SELECT max(pay) FROM salaries)",
    "WITH orders AS (SELECT * FROM salaries) SELECT * FROM orders",
    "SELECT * FROM information_schema.tables",
    "SELECT * FROM orders UNION ALL SELECT who, pay, NULL FROM salaries",
])
def test_a_skill_reads_only_its_tables(server, statement):
    result, = asyncio.run(_calls(server, "alice", [("query_orders_sql", {"query": statement})],
                                 path=AGENT))
    assert "This skill reads only orders in pg" in _error(result)


def test_a_hostile_statement_through_a_skill_changes_nothing(server):
    results = asyncio.run(_calls(server, "alice", [
        ("query_orders_sql", {"query": "DELETE FROM orders"}),
        ("query_orders_sql", {"query": "SELECT pg_read_file('/etc/passwd')"}),
        ("query_orders_sql", {"query": "DROP TABLE orders"}),
    ], path=AGENT))
    assert all(r.is_error for r in results)
    assert "pg_read_file" in _error(results[1])
    with _pg(PG_DB) as conn:
        assert conn.execute("SELECT count(*) FROM orders").fetchone()[0] == 30


# --- agent completions ------------------------------------------------------------------------
# The one scripted part: a small HTTP server speaking OpenAI's chat-completions protocol whose
# "model" answers a script of tool calls. Everything between it and the databases is real.

LLM_KEY = "sk-test-never-shown-0123"


def _call(query: str, call_id: str = "c1") -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [{
        "id": call_id, "type": "function",
        "function": {"name": "query_orders_sql", "arguments": json.dumps({"query": query})}}]}


def _say(text: str) -> dict:
    return {"role": "assistant", "content": text}


class ScriptedModel:
    """Answers each model name's script in turn; a script that runs out repeats its last
    message (a model that loops)."""

    def __init__(self) -> None:
        self.scripts: dict[str, list[dict]] = {}
        self.seen: list[dict] = []  # (headers, body) of every request
        model = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                model.seen.append({"auth": self.headers.get("Authorization"), "body": body})
                script = model.scripts[body["model"]]
                message = script.pop(0) if len(script) > 1 else script[0]
                status = message.get("status", 200)  # an error answer, as OpenAI's
                payload = json.dumps({"error": message["error"]} if status != 200 else {
                    "id": "x", "object": "chat.completion", "choices": [
                        {"index": 0, "message": message, "finish_reason": "stop"}]}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def llm(server):
    model = ScriptedModel()
    admin = {"X-Api-Key": server["tokens"]["alice"]}
    for name, base_url in (("talker", model.url), ("unreachable", "http://127.0.0.1:9/v1")):
        made = requests.post(server["url"] + "/api/projects/mindsdb/agents", headers=admin,
                             timeout=30, json={"agent": {
                                 "name": name, "model_name": "m", "skills": ["orders_sql"],
                                 "model": {"base_url": base_url, "model_name": name,
                                           "api_key": LLM_KEY}}})
        assert made.status_code == 201, made.text
        assert LLM_KEY not in made.text  # write-only, as other secrets
    yield model
    model.httpd.shutdown()
    model.httpd.server_close()


def _complete(server, agent: str, question: str, user: str = "bob", stream: bool = False):
    path = f"/api/projects/mindsdb/agents/{agent}/completions" + ("/stream" if stream else "")
    return requests.post(server["url"] + path, timeout=60,
                         headers={"X-Api-Key": server["tokens"][user]},
                         json={"messages": [{"question": question, "answer": None}]})


def test_an_agent_searches_its_knowledge_base_in_the_completion_loop(server, llm):
    made = requests.post(server["url"] + "/api/projects/mindsdb/agents", timeout=30,
                         headers={"X-Api-Key": server["tokens"]["alice"]},
                         json={"agent": {"name": "reader", "model_name": "m",
                                         "skills": ["handbook"],
                                         "model": {"base_url": llm.url, "model_name": "reader",
                                                   "api_key": LLM_KEY}}})
    assert made.status_code == 201, made.text
    llm.scripts["reader"] = [
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "k1", "type": "function", "function": {
                "name": "search_handbook",
                "arguments": json.dumps({"text": "money back", "limit": 1})}}]},
        _say("Within ten days.")]
    answer = _complete(server, "reader", "When are refunds paid?")
    assert answer.status_code == 200, answer.text
    # The chunk went back to the model with its document id.
    tool_messages = [m for m in llm.seen[-1]["body"]["messages"] if m["role"] == "tool"]
    assert tool_messages and "Refunds are paid back within ten days." in \
        tool_messages[-1]["content"] and '"1:1of1:0to38"' in tool_messages[-1]["content"]


def test_an_agent_answers_through_its_model_and_shows_its_statements(server, llm):
    llm.scripts["talker"] = [_call("SELECT count(*) AS n FROM orders"),
                             _say("There are 30 orders.")]
    answer = _complete(server, "talker", "How many orders?")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"message": {
        "role": "assistant", "content": "There are 30 orders.",
        "statements": [{"tool": "query_orders_sql", "query": "SELECT count(*) AS n FROM orders",
                        "rows": 1, "truncated": False}]}}
    # The model got the tools, the question, the key, and the statement's result.
    first, second = llm.seen[-2:]
    assert first["auth"] == f"Bearer {LLM_KEY}"
    assert [t["function"]["name"] for t in first["body"]["tools"]] == ["query_orders_sql"]
    assert first["body"]["messages"][-1] == {"role": "user", "content": "How many orders?"}
    assert json.loads(second["body"]["messages"][-1]["content"])["rows"] == [[30]]
    # mindsdb_sdk reads the answer unchanged.
    llm.scripts["talker"] = [_say("Hello.")]
    sdk = mindsdb_sdk.connect(server["url"], api_key=server["tokens"]["bob"])
    assert sdk.agents.get("talker").completion(
        [{"question": "Hi", "answer": None}]).content == "Hello."


def test_a_hostile_model_gets_refusals_and_truncation_and_writes_nothing(server, llm):
    llm.scripts["talker"] = [
        _call("DELETE FROM orders"),
        _call("SELECT * FROM salaries"),
        _call("SELECT pg_read_file('/etc/passwd')"),
        _call("SELECT a.id FROM orders a, orders b, orders c, orders d, orders e"),
        _say("done")]
    answer = _complete(server, "talker", "Do harm")
    assert answer.status_code == 200, answer.text
    ran = answer.json()["message"]["statements"]
    assert "error" in ran[0]
    assert "This skill reads only orders in pg" in ran[1]["error"]
    assert "pg_read_file" in ran[2]["error"]
    assert ran[3]["rows"] == 10 and ran[3]["truncated"] is True  # 24 M rows: cut
    with _pg(PG_DB) as conn:
        assert conn.execute("SELECT count(*) FROM orders").fetchone()[0] == 30


def test_a_model_that_loops_stops_at_the_step_limit(server, llm):
    llm.scripts["talker"] = [_call("SELECT 1")]
    answer = _complete(server, "talker", "Loop")
    assert answer.status_code == 502
    assert answer.headers["Content-Type"] == "application/problem+json"
    assert "within 8 steps" in answer.json()["detail"]


def test_completion_errors_are_problems_without_the_key(server, llm):
    none = _complete(server, "analyst", "Hi")
    assert none.status_code == 422
    assert "QUARRY_LLM_BASE_URL" in none.json()["detail"]
    down = _complete(server, "unreachable", "Hi")
    assert down.status_code == 502
    assert "http://127.0.0.1:9/v1" in down.json()["detail"] and LLM_KEY not in down.text
    llm.scripts["talker"] = [{"status": 503, "error": {"message": "model is loading"}}]
    failing = _complete(server, "talker", "Hi")
    assert failing.status_code == 502
    assert failing.json()["detail"] == (f"The model endpoint {llm.url} (model talker) answered "
                                        "HTTP 503: model is loading")
    missing = _complete(server, "nobody", "Hi")
    assert missing.status_code == 404
    empty = requests.post(server["url"] + "/api/projects/mindsdb/agents/talker/completions",
                          headers={"X-Api-Key": server["tokens"]["bob"]}, timeout=10,
                          json={"messages": []})
    assert empty.status_code == 400
    llm.scripts["talker"] = [_say("Hello again.")]
    answered = requests.post(server["url"] + "/api/projects/mindsdb/agents/talker/completions",
                             headers={"X-Api-Key": server["tokens"]["bob"]}, timeout=10,
                             json={"messages": [{"question": "Hi", "answer": "Hello"}]})
    assert answered.status_code == 200  # the last one's question is asked (its answer ignored)
    assert llm.seen[-1]["body"]["messages"][-1] == {"role": "user", "content": "Hi"}
    no_question = requests.post(
        server["url"] + "/api/projects/mindsdb/agents/talker/completions",
        headers={"X-Api-Key": server["tokens"]["bob"]}, timeout=10,
        json={"messages": [{"question": None, "answer": "Hello"}]})
    assert no_question.status_code == 422 and no_question.json()["title"] == "No question"


def test_the_stream_sends_each_statement_then_the_answer(server, llm):
    llm.scripts["talker"] = [_call("SELECT id FROM orders WHERE id = 7"), _say("Seven.")]
    answer = _complete(server, "talker", "Order 7?", stream=True)
    assert answer.status_code == 200
    assert answer.headers["Content-Type"].startswith("text/event-stream")
    events = [json.loads(line[len("data: "):]) for line in answer.text.splitlines()
              if line.startswith("data: ")]
    assert [e["type"] for e in events] == ["statement", "answer"]
    assert events[0]["rows"] == 1 and events[1]["answer"] == "Seven."


def test_an_agent_answers_in_sql(server, llm):
    llm.scripts["talker"] = [_call("SELECT max(id) AS top FROM orders"), _say("Order 30.")]

    def sql(query: str) -> dict:
        return requests.post(server["url"] + "/api/sql/query", timeout=60,
                             headers={"X-Api-Key": server["tokens"]["bob"]},
                             json={"query": query}).json()
    answer = sql("SELECT answer, statements FROM mindsdb.talker WHERE question = 'Last order?'")
    assert answer["type"] == "table", answer
    assert answer["column_names"] == ["answer", "statements"]
    text, ran = answer["data"][0]
    assert text == "Order 30."
    assert json.loads(ran) == [{"tool": "query_orders_sql", "rows": 1, "truncated": False,
                                "query": "SELECT max(id) AS top FROM orders"}]
    no_endpoint = sql("SELECT answer FROM mindsdb.analyst WHERE question = 'Hi'")
    assert no_endpoint["type"] == "error" and "No model endpoint" in no_endpoint["error_message"]
    no_question = sql("SELECT answer FROM mindsdb.talker")
    assert no_question["type"] == "error" and "WHERE question" in no_question["error_message"]


@pytest.mark.skipif(not os.environ.get("QUARRY_TEST_LLM_URL"),
                    reason="set QUARRY_TEST_LLM_URL (an OpenAI-compatible …/v1 with tool calls) "
                           "and QUARRY_TEST_LLM_MODEL to run against a real model")
def test_a_real_model_answers_from_the_data(server):
    admin = {"X-Api-Key": server["tokens"]["alice"]}
    made = requests.post(server["url"] + "/api/projects/mindsdb/agents", headers=admin,
                         timeout=30, json={"agent": {
                             "name": "real_model", "model_name": "m", "skills": ["orders_sql"],
                             "model": {"base_url": os.environ["QUARRY_TEST_LLM_URL"],
                                       "model_name": os.environ.get("QUARRY_TEST_LLM_MODEL",
                                                                    ""),
                                       "api_key": os.environ.get("QUARRY_TEST_LLM_KEY", "")}}})
    assert made.status_code == 201, made.text
    answer = _complete(server, "real_model", "How many orders are there? Use the tool to "
                       "count the rows of the orders table, then answer with the number.")
    assert answer.status_code == 200, answer.text
    message = answer.json()["message"]
    assert any(s.get("rows") for s in message["statements"]), message
    assert "30" in message["content"]
    with _pg(PG_DB) as conn:
        assert conn.execute("SELECT count(*) FROM orders").fetchone()[0] == 30


def test_an_admin_lists_the_columns_of_every_engine(server):
    everything, maria, demo = asyncio.run(_calls(server, "alice", [
        ("list_tables", {}), ("list_tables", {"database": "maria"}),
        ("list_tables", {"database": "demo"})]))
    assert _table(everything)["truncated"] is True  # QUARRY_MCP_MAX_ROWS=10 here
    assert ["maria", MARIA_TABLE, "secret", "varchar"] in _table(maria)["rows"]
    assert {r[0] for r in _table(demo)["rows"]} == {"demo"}  # the SQLite demo source
