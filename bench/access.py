"""Cost of the access checks and of the audit record (issue 12), as ratios to sign-in off.

In one run, on each store (SQLite, PostgreSQL), it builds a fresh migrated store and times,
in-process through the WSGI app (Flask's test client: the app's own work, no network):

- ``SELECT 1`` over POST /api/sql/query, and GET of a project's 1 000 skills;
- with sign-in off (no checks; every SQL statement still gets its audit record), then with
  sign-in on as an admin (API token) and as a member who owns the project;
- GET /api/status (no check at all: with a token it times the token's sign-in alone), so
  that what the grant checks add shows apart from what signing in costs;
- the audit record of one statement alone (``audit.record_statement``), and the same SELECT 1
  with the record left out, so that its share of a read query shows.

Medians of ``--samples`` requests after a warm-up; the ratios are to sign-in off.

    .venv/bin/python bench/access.py [--stores sqlite,postgresql] [--samples 300]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from flask_migrate import upgrade  # noqa: E402
from sqlalchemy import create_engine, text  # noqa: E402

from app import create_app  # noqa: E402
from app.extensions import db  # noqa: E402
from app.services import audit  # noqa: E402
from app.services import auth as auth_service  # noqa: E402

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
N_SKILLS = 1000
PASSWORD = "bench password 123"


@contextlib.contextmanager
def store(kind: str, workdir: str) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{workdir}/bench.db"
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


def median_ms(call: Callable[[], Any], samples: int) -> float:
    for _ in range(max(20, samples // 10)):
        call()
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def prepare(url: str, workdir: str) -> dict[str, str]:
    """Migrate, make the users and their tokens, and a project with N_SKILLS skills."""
    app = create_app({"DATABASE_URL": url, "INSTANCE_PATH": workdir, "DEMO_SOURCE": False,
                      "AUTH_REQUIRED": True, "SECRET_KEY": "bench-" + "k" * 40})
    tokens = {}
    with app.app_context():
        upgrade(directory=os.path.join(ROOT, "migrations"))
        auth_service.create_user("root", PASSWORD, admin=True)
        auth_service.create_user("alice", PASSWORD)
        tokens["admin"] = auth_service.create_token("root", "bench")[1]
        tokens["member"] = auth_service.create_token("alice", "bench")[1]
    client = app.test_client()
    member = {"Authorization": f"Bearer {tokens['member']}"}
    assert client.post("/api/projects", json={"name": "p"}, headers=member).status_code == 201
    for i in range(N_SKILLS):
        body = {"skill": {"name": f"s{i}", "type": "retrieval", "params": {"source": f"kb{i}"}}}
        assert client.post("/api/projects/p/skills", json=body, headers=member).status_code == 201
    with app.app_context():
        db.engine.dispose()
    return tokens


def run(kind: str, samples: int) -> None:
    with tempfile.TemporaryDirectory() as workdir, store(kind, workdir) as url:
        tokens = prepare(url, workdir)
        figures: dict[str, dict[str, float]] = {}
        for mode in ("off", "admin", "member"):
            app = create_app({"DATABASE_URL": url, "INSTANCE_PATH": workdir,
                              "DEMO_SOURCE": False, "AUTH_REQUIRED": mode != "off",
                              "SECRET_KEY": "bench-" + "k" * 40})
            client = app.test_client()
            headers = {} if mode == "off" else {"Authorization": f"Bearer {tokens[mode]}"}

            def select_one(client=client, headers=headers) -> None:
                response = client.post("/api/sql/query", json={"query": "SELECT 1"},
                                       headers=headers)
                assert response.status_code == 200 and response.json["data"] == [[1]]

            def list_skills(client=client, headers=headers) -> None:
                response = client.get("/api/projects/p/skills", headers=headers)
                assert response.status_code == 200 and len(response.json) == N_SKILLS

            def status(client=client, headers=headers) -> None:
                assert client.get("/api/status", headers=headers).status_code == 200

            # GET /api/status runs no check: with a token, it is the sign-in alone.
            figures[mode] = {"SELECT 1": median_ms(select_one, samples),
                             "list 1000 skills": median_ms(list_skills, samples // 3),
                             "status (sign-in)": median_ms(status, samples)}
            if mode == "off":
                with app.test_request_context():
                    record = median_ms(lambda: audit.record_statement(
                        "SELECT 1", None, 1, 0.1, "ok", None), samples)
                    # The same request without its record: record_statement made a no-op.
                    saved = audit.record_statement
                    audit.record_statement = lambda *a, **k: None
                    try:
                        bare = median_ms(select_one, samples)
                    finally:
                        audit.record_statement = saved
                figures["audit"] = {"record": record, "SELECT 1 without record": bare}
            with app.app_context():
                db.engine.dispose()
        off = figures["off"]
        print(f"\n{kind} store ({samples} samples, medians in ms; ratio to sign-in off)")
        for what in ("status (sign-in)", "SELECT 1", "list 1000 skills"):
            line = f"  {what:18} off {off[what]:7.3f}"
            for mode in ("admin", "member"):
                value = figures[mode][what]
                line += f"   {mode} {value:7.3f} (x{value / off[what]:.2f})"
            print(line)
        a = figures["audit"]
        print(f"  audit record alone {a['record']:.3f} ms; SELECT 1 without it "
              f"{a['SELECT 1 without record']:.3f} ms, with it {off['SELECT 1']:.3f} ms "
              f"(record = {100 * a['record'] / a['SELECT 1 without record']:.0f} % of the "
              f"bare read; with/without x{off['SELECT 1'] / a['SELECT 1 without record']:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--samples", type=int, default=300)
    args = parser.parse_args()
    for kind in args.stores.split(","):
        run(kind.strip(), args.samples)


if __name__ == "__main__":
    main()
