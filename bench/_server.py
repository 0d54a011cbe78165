"""Quarry served by gunicorn for a benchmark: migrate a store, serve it, wait, stop; and a
PostgreSQL database of its own for the bench (``pg_database``).

Every script under bench/ that measures over HTTP starts the server the same way:

    env = quarry_env(QUARRY_DATABASE_URL=..., QUARRY_WORKERS="2")
    migrate(env)
    with serving(env, workdir) as server:   # server.url, server.port, server.pid
        ...

gunicorn runs with the repository's gunicorn.conf.py on a free port of 127.0.0.1, its output
in ``workdir/gunicorn.log``; ``serving`` returns once GET /api/status answers 200 (the
workers have loaded the app) and stops the server (SIGTERM, then SIGKILL) at the end.
"""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
# The PostgreSQL server a bench builds its databases on (no database name).
PG_SERVER = os.environ.get("QUARRY_BENCH_PG", "postgresql://postgres@127.0.0.1:5432")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def quarry_env(**settings: str) -> dict[str, str]:
    """This environment without the caller's own QUARRY_* settings, plus ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUARRY_")}
    env.setdefault("QUARRY_LOG_LEVEL", "WARNING")
    env.update(settings)
    return env


def migrate(env: dict[str, str], root: Path = ROOT) -> None:
    """``flask --app wsgi db upgrade`` on the store of ``env`` (with the Quarry in ``root``)."""
    done = subprocess.run([str(BIN / "flask"), "--app", "wsgi", "db", "upgrade"], cwd=root,
                          env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"flask db upgrade failed ({done.returncode}):\n{done.stderr}")


@dataclass
class Server:
    url: str
    port: int
    process: subprocess.Popen

    @property
    def pid(self) -> int:
        return self.process.pid

    def worker_pids(self) -> list[int]:
        """The gunicorn workers (children of the master)."""
        return children(self.pid)


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().split()
            except OSError:
                continue
            if int(stat[3]) == pid:
                pids.append(int(entry))
    return pids


@contextmanager
def serving(env: dict[str, str], workdir: str | Path, *, start_timeout_s: float = 90,
            app: str = "wsgi:app", name: str = "gunicorn",
            root: Path = ROOT) -> Iterator[Server]:
    """gunicorn serving ``app`` (a WSGI path), its output in ``workdir/<name>.log``.

    ``root``: the Quarry to serve (another checkout, to compare two versions in one run).
    """
    port = free_port()
    log_path = Path(workdir) / f"{name}.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "--access-logfile", "/dev/null",
             app], cwd=root, env={**env, "QUARRY_BIND": f"127.0.0.1:{port}"},
            stdout=log, stderr=log, start_new_session=True)
    server = Server(f"http://127.0.0.1:{port}", port, process)
    try:
        deadline = time.monotonic() + start_timeout_s
        while not _answers(port):
            if process.poll() is not None:
                raise SystemExit(f"gunicorn exited; see {log_path}")
            if time.monotonic() > deadline:
                raise SystemExit(f"gunicorn did not answer in {start_timeout_s:g} s; "
                                 f"see {log_path}")
            time.sleep(0.2)
        yield server
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _answers(port: int) -> bool:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            conn.request("GET", "/api/status")
            return conn.getresponse().status == 200
        finally:
            conn.close()
    except OSError:
        return False


def points_table(rows: int) -> tuple[str, ...]:
    """Statements that make ``points`` (id, x, y, label) of ``rows`` rows."""
    return ("CREATE TABLE points (id integer PRIMARY KEY, x float8, y float8, label text)",
            "INSERT INTO points SELECT g, g * 0.25, sqrt(g), 'point ' || g "
            f"FROM generate_series(1, {int(rows)}) g",
            "ANALYZE points")


@contextmanager
def pg_database(name: str, *setup: str) -> Iterator[str]:
    """A new database ``name`` on PG_SERVER, made by the ``setup`` statements; its URL.
    Dropped at the end, sessions still in it included."""
    import psycopg

    admin = f"{PG_SERVER}/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = f"{PG_SERVER}/{name}"
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            for statement in setup:
                conn.execute(statement)
        yield url
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
