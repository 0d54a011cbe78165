"""Cost of the access checks and of the audit record (issue 12), as ratios to sign-in off.

For each store (a fresh SQLite file; a fresh PostgreSQL database on 127.0.0.1:5432, dropped
at the end) it migrates, makes an admin and a member (alice, owner of project ``p`` with
1 000 skills, granted ``query`` on data source ``sales``) and their API tokens, then serves
the store with three gunicorn instances side by side (``-c gunicorn.conf.py``, one worker,
one thread each, so a request never waits for another):

- **bare** — sign-in off, and the statements' audit record left out (``record_statement``
  made a no-op by ``bench/access_noaudit.py``): the floor;
- **off** — sign-in off (the default), every statement's audit record written before its
  answer (one INSERT on the store);
- **on** — sign-in required, called with the admin's token and with the member's.

Requests go over one keep-alive connection per instance (``http.client``). The cases are
interleaved request by request: in each of ``--rounds`` rounds, ``--batch`` times, every
configuration serves one request of the case in turn (the order rotating), so that a burst
of load on the shared machine hits all of them alike. Per round the median of each
configuration is taken and divided by the median of **off** in that round (the audit's row
by **bare**); the table shows the median of those per-round ratios and, in brackets, their
10th–90th percentile (the spread). ``ms`` is the median over every request of every round.

    .venv/bin/python bench/access.py [--stores sqlite,postgresql] [--rounds 15] [--batch 40]

With ``--clients 8`` it measures instead ``SELECT 1`` from 8 clients at once (``wrk``, see
bench/_load.py) against two instances of the default deployment (its workers and threads),
sign-in off and the admin's token, in ``--rounds`` rounds of ``--seconds`` alternating
between the two: latency percentiles, requests per second, server CPU per request, and
their ratios.

    .venv/bin/python bench/access.py --stores postgresql --clients 8 [--rounds 6] [--seconds 5]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _load import summary, summary_text, wrk_round, wrk_script  # noqa: E402
from _server import Server, quarry_env, serving  # noqa: E402
from flask_migrate import upgrade  # noqa: E402
from sqlalchemy import create_engine, text  # noqa: E402

from app import create_app  # noqa: E402
from app.extensions import db  # noqa: E402
from app.services import access  # noqa: E402
from app.services import auth as auth_service  # noqa: E402

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
N_SKILLS = 1000
PASSWORD = "bench password 123"
SECRET_KEY = "bench-" + "k" * 40


@contextlib.contextmanager
def store(kind: str, workdir: str) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{workdir}/store.db"
        return
    name = f"quarry_bench_access_{os.getpid()}"
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield PG_ADMIN.rsplit("/", 1)[0] + "/" + name
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def settings(url: str, workdir: str) -> dict[str, Any]:
    return {"DATABASE_URL": url, "INSTANCE_PATH": workdir, "DEMO_SOURCE": False,
            "SECRET_KEY": SECRET_KEY,
            "DATA_SOURCES": {"sales": f"sqlite:///{workdir}/sales.db"}}


def prepare(url: str, workdir: str) -> dict[str, str]:
    """Migrate; users, tokens, the grant on sales, and project p with N_SKILLS skills."""
    with sqlite3.connect(os.path.join(workdir, "sales.db")) as sales:
        sales.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, amount REAL)")
        sales.executemany("INSERT INTO orders VALUES (?, ?)", [(i, i * 1.5) for i in range(100)])
    app = create_app({**settings(url, workdir), "AUTH_REQUIRED": True})
    tokens = {}
    with app.app_context():
        upgrade(directory=os.path.join(ROOT, "migrations"))
        auth_service.create_user("root", PASSWORD, admin=True)
        auth_service.create_user("alice", PASSWORD)
        tokens["admin"] = auth_service.create_token("root", "bench")[1]
        tokens["member"] = auth_service.create_token("alice", "bench")[1]
        access.grant_source("sales", "alice")
    client = app.test_client()
    member = {"Authorization": f"Bearer {tokens['member']}"}
    assert client.post("/api/projects", json={"name": "p"}, headers=member).status_code == 201
    for i in range(N_SKILLS):
        body = {"skill": {"name": f"s{i}", "type": "retrieval", "params": {"source": f"kb{i}"}}}
        assert client.post("/api/projects/p/skills", json=body, headers=member).status_code == 201
    with app.app_context():
        db.engine.dispose()
    return tokens


@contextlib.contextmanager
def gunicorn(url: str, workdir: str, name: str, app: str, auth: bool,
             one_thread: bool = True) -> Iterator[Server]:
    """One instance on the shared store: one worker with one thread, or (``one_thread``
    false) the default deployment's workers and threads."""
    env = quarry_env(QUARRY_DATABASE_URL=url, QUARRY_INSTANCE_PATH=workdir,
                     QUARRY_DEMO_SOURCE="false", QUARRY_SECRET_KEY=SECRET_KEY,
                     QUARRY_AUTH_REQUIRED="true" if auth else "false",
                     QUARRY_DATA_SOURCES=json.dumps(settings(url, workdir)["DATA_SOURCES"]),
                     PYTHONPATH=ROOT)
    if one_thread:
        env.update(QUARRY_WORKERS="1", QUARRY_THREADS="1")
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)  # each instance its own (gunicorn.conf.py)
    with serving(env, workdir, app=app, name=f"gunicorn-{name}") as server:
        yield server


class Client:
    """One keep-alive connection to one instance, with one caller's token (or none)."""

    def __init__(self, port: int, token: str | None) -> None:
        self.port = port
        self.headers = {"Content-Type": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def timed(self, method: str, path: str, body: Any, check: Any) -> float:
        data = json.dumps(body).encode() if body is not None else None
        started = time.perf_counter()
        try:
            self.conn.request(method, path, body=data, headers=self.headers)
            response = self.conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            self.conn.close()  # gunicorn closed an idle keep-alive connection: once more
            started = time.perf_counter()
            self.conn.request(method, path, body=data, headers=self.headers)
            response = self.conn.getresponse()
        payload = response.read()
        elapsed = (time.perf_counter() - started) * 1000
        if response.status != 200 or not check(json.loads(payload)):
            raise RuntimeError(f"{method} {path} on :{self.port} -> {response.status}: "
                               f"{payload[:300]!r}")
        return elapsed


CASES = {
    "SELECT 1": ("POST", "/api/sql/query", {"query": "SELECT 1"},
                 lambda body: body.get("data") == [[1]]),
    "SELECT sales (grant)": ("POST", "/api/sql/query",
                             {"query": "SELECT count(*) FROM sales.orders"},
                             lambda body: body.get("data") == [[100]]),
    "list 1000 skills": ("GET", "/api/projects/p/skills", None,
                         lambda body: len(body) == N_SKILLS),
}
# Fewer requests per batch for the slow listing.
BATCH_SHARE = {"list 1000 skills": 4}


def measure(clients: dict[str, Client], rounds: int, batch: int
            ) -> dict[str, dict[str, list[list[float]]]]:
    """{case: {configuration: [times of round 0, of round 1, …]}}."""
    names = list(clients)
    times: dict[str, dict[str, list[list[float]]]] = {
        case: {n: [] for n in names} for case in CASES}
    for case, (method, path, body, check) in CASES.items():
        size = max(3, batch // BATCH_SHARE.get(case, 1))
        for client in clients.values():  # warm-up: pools, caches, prepared statements
            for _ in range(size):
                client.timed(method, path, body, check)
        for r in range(rounds):
            for name in names:
                times[case][name].append([])
            for i in range(size):
                # One request of each configuration in turn (A/B/C/D, the order rotating),
                # so that a burst of load on the machine falls on all of them alike.
                k = (r + i) % len(names)
                for name in names[k:] + names[:k]:
                    times[case][name][-1].append(clients[name].timed(method, path, body,
                                                                     check))
    return times


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def ratio_text(rounds_a: list[list[float]], rounds_b: list[list[float]]) -> str:
    ratios = [statistics.median(a) / statistics.median(b)
              for a, b in zip(rounds_a, rounds_b, strict=True)]
    return (f"x{statistics.median(ratios):.2f} "
            f"[{_pct(ratios, 0.1):.2f}-{_pct(ratios, 0.9):.2f}]")


def run(kind: str, rounds: int, batch: int) -> None:
    with tempfile.TemporaryDirectory() as workdir, store(kind, workdir) as url:
        tokens = prepare(url, workdir)
        with contextlib.ExitStack() as stack:
            ports = {
                "bare": stack.enter_context(gunicorn(url, workdir, "bare",
                                                     "bench.access_noaudit:app", False)).port,
                "off": stack.enter_context(gunicorn(url, workdir, "off", "wsgi:app",
                                                    False)).port,
                "on": stack.enter_context(gunicorn(url, workdir, "on", "wsgi:app", True)).port,
            }
            clients = {"bare": Client(ports["bare"], None), "off": Client(ports["off"], None),
                       "admin": Client(ports["on"], tokens["admin"]),
                       "member": Client(ports["on"], tokens["member"])}
            times = measure(clients, rounds, batch)
        print(f"\n{kind} store: {rounds} interleaved rounds; medians in ms; ratios = median "
              f"of per-round ratios [10th-90th percentile]")
        print(f"  {'case':22} {'bare':>7} {'off':>7} {'admin':>7} {'member':>7}   "
              f"{'audit (off/bare)':20} {'admin/off':20} {'member/off':20}")
        for case, by_name in times.items():
            flat = {n: statistics.median([t for batch_ in rs for t in batch_])
                    for n, rs in by_name.items()}
            print(f"  {case:22} {flat['bare']:7.2f} {flat['off']:7.2f} {flat['admin']:7.2f} "
                  f"{flat['member']:7.2f}   "
                  f"{ratio_text(by_name['off'], by_name['bare']):20} "
                  f"{ratio_text(by_name['admin'], by_name['off']):20} "
                  f"{ratio_text(by_name['member'], by_name['off']):20}")


def under_load(kind: str, rounds: int, seconds: float) -> None:
    """SELECT 1 from 8 clients at once (wrk), sign-in off against the admin's token, each
    served by the default deployment (its workers and threads); the rounds alternate."""
    with tempfile.TemporaryDirectory() as workdir, store(kind, workdir) as url:
        tokens = prepare(url, workdir)
        with contextlib.ExitStack() as stack:
            servers = {"off": stack.enter_context(gunicorn(url, workdir, "off8", "wsgi:app",
                                                           False, one_thread=False)),
                       "admin": stack.enter_context(gunicorn(url, workdir, "on8", "wsgi:app",
                                                             True, one_thread=False))}
            body = json.dumps({"query": "SELECT 1"})
            scripts = {"off": wrk_script(os.path.join(workdir, "off.lua"), body),
                       "admin": wrk_script(os.path.join(workdir, "admin.lua"), body,
                                           {"Authorization": f"Bearer {tokens['admin']}"})}
            results: dict[str, list[dict[str, float]]] = {name: [] for name in servers}
            for name, server in servers.items():  # warm-up: every worker's pools
                wrk_round(f"{server.url}/api/sql/query", scripts[name], 1, [])
            for i in range(rounds):
                for name in (list(servers) if i % 2 == 0 else list(reversed(servers))):
                    server = servers[name]
                    results[name].append(wrk_round(
                        f"{server.url}/api/sql/query", scripts[name], seconds,
                        [server.pid, *server.worker_pids()]))
    print(f"\n{kind} store, SELECT 1, 8 clients (wrk), default deployment, {rounds} "
          f"alternating rounds of {seconds:g} s; load average {os.getloadavg()[0]:.2f}")
    sums = {name: summary(r) for name, r in results.items()}
    for name, figures in sums.items():
        print(f"  {name:6} {summary_text(figures)}")
    off, on = sums["off"], sums["admin"]
    per_round = [a["p50"] / b["p50"] for a, b in zip(results["admin"], results["off"],
                                                      strict=True)]
    print(f"  admin/off: median x{on['p50'] / off['p50']:.2f} (per round "
          f"{min(per_round):.2f}-{max(per_round):.2f}), p99 x{on['p99'] / off['p99']:.2f}, "
          f"server CPU per request x{on['cpu'] / off['cpu']:.2f}, requests/s "
          f"x{on['rate'] / off['rate']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--batch", type=int, default=40)
    parser.add_argument("--clients", type=int, choices=(1, 8), default=1,
                        help="8: SELECT 1 from 8 clients at once (wrk), see under_load")
    parser.add_argument("--seconds", type=float, default=5, help="per round, with 8 clients")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} at the start")
    for kind in args.stores.split(","):
        if args.clients == 8:
            under_load(kind.strip(), args.rounds, args.seconds)
        else:
            run(kind.strip(), args.rounds, args.batch)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
