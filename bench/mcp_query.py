"""Benchmark of the MCP ``query`` tool against POST /api/sql/query, side by side (issue 23).

    .venv/bin/python bench/mcp_query.py [--iterations 200]

Makes a PostgreSQL database quarry_bench_mcp_<pid> (10 000 rows), serves Quarry with gunicorn
(2 gthread workers, SQLite store), and for each statement times, alternately over two
keep-alive connections: the statement on POST /api/sql/query, and the same statement as an
MCP ``tools/call`` of ``query`` (one JSON-RPC POST to /mcp, what a Streamable HTTP client
sends once connected). Then the same tool call through the official ``mcp`` client
(``ClientSession.call_tool`` on an open session), which adds the client's own work.
Prints medians, p99 and the ratios MCP / SQL endpoint. Aim: ≤ 1.5×.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _server import migrate, pg_database, points_table, quarry_env, serving  # noqa: E402

DB = f"quarry_bench_mcp_{os.getpid()}"
CASES = [
    ("SELECT 1", "SELECT 1"),
    ("point lookup", "SELECT * FROM bench.points WHERE id = 4242"),
    ("1 000 rows", "SELECT * FROM bench.points WHERE id <= 1000"),
]
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           "MCP-Protocol-Version": "2025-11-25"}


def _post(conn: http.client.HTTPConnection, path: str, body: bytes) -> tuple[float, dict]:
    started = time.perf_counter()
    conn.request("POST", path, body, HEADERS)
    response = conn.getresponse()
    payload = response.read()
    elapsed = time.perf_counter() - started
    return elapsed, json.loads(payload)


def time_pair(port: int, sql: str, iterations: int) -> tuple[list[float], list[float]]:
    sql_conn = http.client.HTTPConnection("127.0.0.1", port)
    mcp_conn = http.client.HTTPConnection("127.0.0.1", port)
    sql_body = json.dumps({"query": sql}).encode()
    mcp_body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": "query", "arguments": {"query": sql}}}).encode()
    on_sql, on_mcp = [], []
    for i in range(iterations + 5):
        a, answer = _post(sql_conn, "/api/sql/query", sql_body)
        b, reply = _post(mcp_conn, "/mcp", mcp_body)
        if answer.get("type") != "table" or reply["result"].get("isError"):
            raise SystemExit(f"unexpected answers: {answer} / {reply}")
        if i >= 5:  # warm-up
            on_sql.append(a)
            on_mcp.append(b)
    sql_conn.close()
    mcp_conn.close()
    return on_sql, on_mcp


async def time_client(url: str, sql: str, iterations: int) -> list[float]:
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    samples = []
    async with create_mcp_http_client() as http, \
            streamable_http_client(url + "/mcp", http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        for i in range(iterations + 5):
            started = time.perf_counter()
            result = await session.call_tool("query", {"query": sql})
            elapsed = time.perf_counter() - started
            if result.is_error:
                raise SystemExit(f"tool error: {result.content}")
            if i >= 5:
                samples.append(elapsed)
    return samples


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work, \
            pg_database(DB, *points_table(10_000)) as url:
        env = quarry_env(QUARRY_INSTANCE_PATH=work, QUARRY_WORKERS="2", QUARRY_THREADS="4",
                         QUARRY_DATABASE_URL=f"sqlite:///{work}/store.db",
                         QUARRY_DATA_SOURCES=json.dumps({"bench": url}))
        migrate(env)
        with serving(env, work) as server:
            print(f"{'statement':16} {'SQL ms':>8} {'p99':>7} {'MCP ms':>8} {'p99':>7} "
                  f"{'MCP/SQL':>8} {'client ms':>10} {'client/SQL':>11}")
            for label, sql in CASES:
                on_sql, on_mcp = time_pair(server.port, sql, args.iterations)
                on_client = asyncio.run(time_client(server.url, sql, args.iterations))
                base = statistics.median(on_sql)
                print(f"{label:16} {base * 1e3:8.2f} {p99(on_sql) * 1e3:7.2f} "
                      f"{statistics.median(on_mcp) * 1e3:8.2f} {p99(on_mcp) * 1e3:7.2f} "
                      f"{statistics.median(on_mcp) / base:8.2f} "
                      f"{statistics.median(on_client) * 1e3:10.2f} "
                      f"{statistics.median(on_client) / base:11.2f}")


if __name__ == "__main__":
    main()
