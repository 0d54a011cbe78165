"""CRUD benchmark of issue 2: skills and agents served by gunicorn on SQLite and PostgreSQL.

For each store it builds a fresh, migrated database, serves Quarry with gunicorn
(``-c gunicorn.conf.py``, 2 workers), creates 1 000 skills and 200 agents with 5 skills each
in project ``mindsdb``, and then measures over keep-alive HTTP the median and p99 latency of
list skills, list agents, get skill by name and create skill. Beside each read it times the
raw-driver equivalent (sqlite3 / psycopg + json.dumps, no HTTP) and prints Quarry/raw. The SQL
statements each request runs are counted in-process (Flask test client, same store) with a
``before_cursor_execute`` listener. If ``wrk`` is installed, it reports get-skill req/s with 8
connections. Aims (issue 2): get one <= 2 ms median, list of 1 000 skills <= 15 ms median.

    .venv/bin/python bench/crud.py [--stores sqlite,postgresql] [--samples 200]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _server import ROOT, migrate, quarry_env, serving  # noqa: E402

PROJECT = "mindsdb"
N_SKILLS = 1000
N_AGENTS = 200
SKILLS_PER_AGENT = 5
PG_ADMIN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres"
AIM_MS = {"get skill": 2.0, "list skills": 15.0}


# --- stores ------------------------------------------------------------------------------

@contextlib.contextmanager
def sqlite_store(workdir: str) -> Iterator[dict[str, Any]]:
    path = os.path.join(workdir, "bench.db")
    yield {"name": "sqlite", "url": "sqlite:///" + path,
           "raw_connect": lambda: sqlite3.connect(path), "param": "?"}


@contextlib.contextmanager
def postgresql_store(workdir: str) -> Iterator[dict[str, Any]]:
    import psycopg

    # A unique name: other people run tests on this server at the same time.
    dbname = f"quarry_bench_{os.getpid()}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{dbname}"')
    dsn = f"host=127.0.0.1 port=5432 user=postgres dbname={dbname}"
    try:
        yield {"name": "postgresql",
               "url": f"postgresql+psycopg://postgres@127.0.0.1:5432/{dbname}",
               "raw_connect": lambda: psycopg.connect(dsn), "param": "%s"}
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


STORES: dict[str, Callable[[str], contextlib.AbstractContextManager]] = {
    "sqlite": sqlite_store, "postgresql": postgresql_store}


def store_env(store: dict[str, Any], workdir: str) -> dict[str, str]:
    return quarry_env(QUARRY_DATABASE_URL=store["url"], QUARRY_INSTANCE_PATH=workdir,
                      QUARRY_DEMO_SOURCE="0", QUARRY_WORKERS="2")


# --- HTTP client -------------------------------------------------------------------------

class Client:
    """One keep-alive connection (http.client: far less client overhead than requests)."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def call(self, method: str, path: str, body: Any = None, expect: int = 200) -> bytes:
        headers = {}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            self.conn.request(method, path, body=data, headers=headers)
            response = self.conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            # gunicorn closes a connection idle for `keepalive` (5 s), e.g. during the raw
            # timings; reconnect once (the next case's warm-up absorbs it).
            self.conn.close()
            self.conn.request(method, path, body=data, headers=headers)
            response = self.conn.getresponse()
        payload = response.read()
        if response.status != expect:
            raise RuntimeError(f"{method} {path} -> {response.status}: {payload[:300]!r}")
        return payload


def skill_body(i: int) -> dict[str, Any]:
    return {"skill": {"name": f"skill_{i:05d}", "type": "retrieval",
                      "params": {"source": f"kb_{i}", "description": f"Knowledge base {i}"}}}


def seed(client: Client) -> None:
    base = f"/api/projects/{PROJECT}"
    for i in range(N_SKILLS):
        client.call("POST", f"{base}/skills", skill_body(i), expect=201)
    for a in range(N_AGENTS):
        skills = [f"skill_{(a * SKILLS_PER_AGENT + k) % N_SKILLS:05d}"
                  for k in range(SKILLS_PER_AGENT)]
        client.call("POST", f"{base}/agents", {"agent": {
            "name": f"agent_{a:04d}", "model_name": "gpt-4o", "provider": "openai",
            "skills": skills, "params": {"temperature": 0.1},
            "prompt_template": "Answer the question using the skills."}}, expect=201)


def timed(fn: Callable[[int], Any], samples: int, warmup: int) -> list[float]:
    for i in range(warmup):
        fn(i)
    times = []
    for i in range(samples):
        t0 = time.perf_counter()
        fn(warmup + i)
        times.append((time.perf_counter() - t0) * 1000)
    return times


def summary(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
    return statistics.median(ordered), p99


# --- raw-driver equivalents --------------------------------------------------------------

SKILL_COLS = "id, name, project_id, type, params, created_at, updated_at"
AGENT_COLS = ("id, name, project_id, model_name, provider, params, model, data, "
              "prompt_template, created_at, updated_at")


def _skill_dict(row: tuple, agent_ids: list[int]) -> dict[str, Any]:
    params = row[4]
    return {"id": row[0], "name": row[1], "project_id": row[2], "type": row[3],
            "params": json.loads(params) if isinstance(params, str) else params,
            "agent_ids": agent_ids, "created_at": str(row[5]), "updated_at": str(row[6])}


class Raw:
    """What each read costs through the bare driver: the same rows, dicts and json.dumps."""

    def __init__(self, store: dict[str, Any]) -> None:
        self.conn = store["raw_connect"]()
        self.p = store["param"]
        self.project_id = self._one(f"SELECT id FROM projects WHERE name_key = {self.p}",
                                    (PROJECT,))[0]

    def _rows(self, sql: str, args: tuple = ()) -> list[tuple]:
        cur = self.conn.cursor()
        cur.execute(sql, args)
        rows = cur.fetchall()
        cur.close()
        return rows

    def _one(self, sql: str, args: tuple = ()) -> tuple:
        return self._rows(sql, args)[0]

    def _links(self, where: str, args: tuple) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for skill_id, agent_id in self._rows(
                f"SELECT skill_id, agent_id FROM agent_skills WHERE {where}", args):
            out.setdefault(skill_id, []).append(agent_id)
        return out

    def get_skill(self, name: str) -> bytes:
        p = self.p
        row = self._one(f"SELECT {SKILL_COLS} FROM skills WHERE project_id = {p} "
                        f"AND name_key = {p}", (self.project_id, name.lower()))
        links = self._links(f"skill_id = {p}", (row[0],))
        body = json.dumps(_skill_dict(row, sorted(links.get(row[0], []))))
        self.conn.commit()  # end the read transaction, as the app does per request
        return body.encode()

    def list_skills(self) -> bytes:
        p = self.p
        rows = self._rows(f"SELECT {SKILL_COLS} FROM skills WHERE project_id = {p} "
                          f"ORDER BY id", (self.project_id,))
        links = self._links(f"skill_id IN (SELECT id FROM skills WHERE project_id = {p})",
                            (self.project_id,))
        body = json.dumps([_skill_dict(r, sorted(links.get(r[0], []))) for r in rows])
        self.conn.commit()
        return body.encode()

    def list_agents(self) -> bytes:
        p = self.p
        agents = self._rows(f"SELECT {AGENT_COLS} FROM agents WHERE project_id = {p} "
                            f"ORDER BY id", (self.project_id,))
        agent_links = self._rows(
            "SELECT l.agent_id, l.skill_id, l.parameters FROM agent_skills l JOIN agents a "
            f"ON a.id = l.agent_id WHERE a.project_id = {p} ORDER BY l.agent_id, l.position",
            (self.project_id,))
        skill_ids = sorted({link[1] for link in agent_links})
        skills = {}
        if skill_ids:
            marks = ", ".join([p] * len(skill_ids))
            for r in self._rows(f"SELECT {SKILL_COLS} FROM skills WHERE id IN ({marks})",
                                tuple(skill_ids)):
                skills[r[0]] = r
            back = self._links(f"skill_id IN ({marks})", tuple(skill_ids))
        by_agent: dict[int, list[tuple]] = {}
        for link in agent_links:
            by_agent.setdefault(link[0], []).append(link)
        out = []
        for a in agents:
            links = by_agent.get(a[0], [])
            out.append({
                "id": a[0], "name": a[1], "project_id": a[2], "model_name": a[3],
                "provider": a[4], "params": a[5] if isinstance(a[5], dict) else json.loads(a[5]),
                "skills": [_skill_dict(skills[lk[1]], sorted(back.get(lk[1], [])))
                           for lk in links],
                "skills_extra_parameters": {skills[lk[1]][1]: lk[2] or {} for lk in links},
                "model": a[6], "data": a[7], "prompt_template": a[8],
                "created_at": str(a[9]), "updated_at": str(a[10])})
        body = json.dumps(out)
        self.conn.commit()
        return body.encode()

    def close(self) -> None:
        self.conn.close()


# --- statements per request --------------------------------------------------------------

def count_statements(store: dict[str, Any], workdir: str) -> dict[str, int]:
    """SQL statements each request runs, counted on the app's own engine (test client)."""
    sys.path.insert(0, str(ROOT))
    from sqlalchemy import event

    from app import create_app
    from app.extensions import db

    app = create_app({"DATABASE_URL": store["url"], "INSTANCE_PATH": workdir,
                      "DEMO_SOURCE": False, "LOG_LEVEL": "WARNING"})
    statements: list[str] = []
    with app.app_context():
        engine = db.engine

    def _count(conn, cursor, statement, parameters, context, executemany):
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", _count)
    client = app.test_client()
    base = f"/api/projects/{PROJECT}"
    calls = {
        "list skills": lambda: client.get(f"{base}/skills"),
        "list agents": lambda: client.get(f"{base}/agents"),
        "get skill": lambda: client.get(f"{base}/skills/skill_00042"),
        "create skill": lambda: client.post(f"{base}/skills", json=skill_body(900_000)),
    }
    counts = {}
    try:
        for label, call in calls.items():
            statements.clear()
            response = call()
            assert response.status_code in (200, 201), (label, response.status_code)
            counts[label] = len(statements)
    finally:
        event.remove(engine, "before_cursor_execute", _count)
        with app.app_context():
            db.engine.dispose()
    return counts


# --- wrk ---------------------------------------------------------------------------------

def wrk_get_skill(port: int, seconds: int) -> float | None:
    wrk = shutil.which("wrk")
    if wrk is None:
        return None
    url = f"http://127.0.0.1:{port}/api/projects/{PROJECT}/skills/skill_00042"
    out = subprocess.run([wrk, "-t2", "-c8", f"-d{seconds}s", "--latency", url],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if line.startswith("Requests/sec:"):
            return float(line.split()[1])
    raise RuntimeError("wrk printed no Requests/sec:\n" + out)


# --- one store ---------------------------------------------------------------------------

def run_store(kind: str, samples: int, warmup: int, wrk_seconds: int) -> dict[str, Any]:
    workdir = tempfile.mkdtemp(prefix=f"quarry_bench_{kind}_")
    try:
        with STORES[kind](workdir) as store:
            env = store_env(store, workdir)
            migrate(env)
            result: dict[str, Any] = {"store": kind, "rows": {}}
            with serving(env, workdir) as server:
                port = server.port
                client = Client(port)
                t0 = time.perf_counter()
                seed(client)
                result["seed_s"] = time.perf_counter() - t0
                raw = Raw(store)
                base = f"/api/projects/{PROJECT}"

                def name(i: int) -> str:
                    return f"skill_{(i * 37) % N_SKILLS:05d}"

                # The same skill lookups (by name, varied) on both sides; reads before the
                # creates so that the list still holds exactly 1 000 skills.
                cases: list[tuple[str, Callable[[int], Any], Callable[[int], Any] | None]] = [
                    ("ping (HTTP floor)", lambda i: client.call("GET", "/api/util/ping"), None),
                    ("get skill", lambda i: client.call("GET", f"{base}/skills/{name(i)}"),
                     lambda i: raw.get_skill(name(i))),
                    ("list skills", lambda i: client.call("GET", f"{base}/skills"),
                     lambda i: raw.list_skills()),
                    ("list agents", lambda i: client.call("GET", f"{base}/agents"),
                     lambda i: raw.list_agents()),
                    ("create skill", lambda i: client.call(
                        "POST", f"{base}/skills", skill_body(100_000 + i), expect=201), None),
                ]
                # Sanity: Quarry and the raw path return the same number of list items.
                assert len(json.loads(client.call("GET", f"{base}/skills"))) == \
                    len(json.loads(raw.list_skills())) == N_SKILLS
                for label, quarry_call, raw_call in cases:
                    q_med, q_p99 = summary(timed(quarry_call, samples, warmup))
                    row = {"median": q_med, "p99": q_p99, "raw": None}
                    if raw_call is not None:
                        row["bytes"] = len(quarry_call(0))
                        row["raw"] = summary(timed(raw_call, samples, warmup))[0]
                    result["rows"][label] = row
                raw.close()
                client.conn.close()
                result["wrk_rps"] = wrk_get_skill(port, wrk_seconds)
            # gunicorn stopped: count statements in-process on the same (seeded) store.
            result["statements"] = count_statements(store, workdir)
            return result
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def print_table(results: list[dict[str, Any]], samples: int) -> None:
    print(f"\nQuarry CRUD benchmark: gunicorn gthread, 2 workers; {N_SKILLS} skills, "
          f"{N_AGENTS} agents x {SKILLS_PER_AGENT} skills; {samples} samples after warm-up; "
          "one keep-alive connection; raw = driver + json.dumps in-process (no HTTP)")
    head = (f"{'store':<11}{'request':<19}{'median ms':>10}{'p99 ms':>9}{'raw ms':>9}"
            f"{'Q/raw':>8}{'SQL':>5}{'bytes':>9}  aim")
    print(head)
    print("-" * len(head))
    for r in results:
        for label, row in r["rows"].items():
            raw = row["raw"]
            stmts = r["statements"].get(label)
            aim = AIM_MS.get(label)
            verdict = "" if aim is None else (
                f"<= {aim:g} ms {'ok' if row['median'] <= aim else 'MISSED'}")
            raw_ms = "" if raw is None else f"{raw:.2f}"
            ratio = "" if raw is None else f"{row['median'] / raw:.1f}x"
            print(f"{r['store']:<11}{label:<19}{row['median']:>10.2f}{row['p99']:>9.2f}"
                  f"{raw_ms:>9}{ratio:>8}"
                  f"{'' if stmts is None else stmts:>5}"
                  f"{row.get('bytes', ''):>9}  {verdict}")
        rps = r["wrk_rps"]
        print(f"{r['store']:<11}get skill, wrk -c8: "
              f"{'wrk not installed' if rps is None else f'{rps:,.0f} req/s'}"
              f"   (seeding over HTTP took {r['seed_s']:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--wrk-seconds", type=int, default=5)
    args = parser.parse_args()
    results = []
    for kind in args.stores.split(","):
        print(f"[{kind}] migrating, serving, seeding, measuring…", file=sys.stderr, flush=True)
        results.append(run_store(kind.strip(), args.samples, args.warmup, args.wrk_seconds))
    print_table(results, args.samples)


if __name__ == "__main__":
    main()
