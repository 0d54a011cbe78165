"""Quarry served for real by gunicorn (with gunicorn.conf.py), for the tests that need it."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import requests

from app import create_app
from app.config import load_settings
from app.extensions import db
from tests.conftest import SHARED, TEST_KEY, TEST_PASSWORD_HASH

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def quarry_env(**settings: str) -> dict[str, str]:
    """This environment without any QUARRY_* of the caller's, plus ``settings`` (and the
    tests' encryption key, unless ``settings`` give another or ""; their cheap password
    hash; the session's demo file, read only, unless they give another DEMO_PATH; and the
    run's folder of the embedded model's int8 copy)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUARRY_")}
    env["QUARRY_ENCRYPTION_KEY"] = TEST_KEY
    env["QUARRY_PASSWORD_HASH"] = TEST_PASSWORD_HASH
    if "path" in SHARED:
        env["QUARRY_DEMO_PATH"] = SHARED["path"]
    if "model_dir" in SHARED:
        env["QUARRY_KB_MODEL_DIR"] = SHARED["model_dir"]
    env.update(settings)
    return env


def migrated_sqlite_env(directory, template: str | None = None,
                        **settings: str) -> dict[str, str]:
    """Settings of a Quarry on a new SQLite store in ``directory``, one worker of four
    threads unless ``settings`` say otherwise. The store is a copy of ``template`` (the
    session's ``sqlite_template``) when given, else migrated by ``flask db upgrade``, as an
    operator would."""
    env = quarry_env(QUARRY_DATABASE_URL=f"sqlite:///{directory}/store.db",
                     QUARRY_INSTANCE_PATH=str(directory), QUARRY_WORKERS="1",
                     QUARRY_THREADS="4")
    env.update(settings)
    if template is not None:
        sqlite_store(template, directory)
    else:
        flask(env, "db", "upgrade")
    return env


def sqlite_store(template: str, directory) -> str:
    """A new migrated SQLite store, ``directory``/store.db, copied from ``template`` (the
    session's ``sqlite_template``, built by the migrations once): its URL. A server's
    fixture spares a ``flask db upgrade`` (seconds of CPU: it imports the whole app);
    tests/auth/test_gunicorn.py and the console's server still migrate as an operator."""
    shutil.copy(template, f"{directory}/store.db")
    return f"sqlite:///{directory}/store.db"


def flask(env: dict[str, str], *args: str) -> str:
    """Run ``flask --app wsgi ARGS`` as an operator would; its output."""
    result = subprocess.run([str(BIN / "flask"), "--app", "wsgi", *args], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def workers(master: int) -> list[int]:
    """The pids of a gunicorn master's children (its workers)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == master:
                pids.append(int(entry))
    return pids


def wait_for_a_new_worker(url: str) -> None:
    """Until a worker answers /api/status again (gunicorn replaces a worker that died)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            if requests.get(url + "/api/status", timeout=5).status_code == 200:
                return
        except requests.RequestException:
            pass
        assert time.monotonic() < deadline, "gunicorn did not start a new worker"
        time.sleep(0.2)


@dataclass
class Server:
    url: str
    process: subprocess.Popen
    logs: Path  # holds stdout.log and stderr.log

    def stop(self) -> int:
        """SIGTERM (graceful: running requests finish); the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=90)


@contextmanager
def serving(env: dict[str, str], logs: Path) -> Iterator[Server]:
    """gunicorn on a free port with ``env`` (its store already migrated), until the block ends.

    Waits for /api/status to answer 200 (the workers load the app first).
    """
    port = free_port()
    env = {**env, "QUARRY_BIND": f"127.0.0.1:{port}"}
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / "stdout.log", "w") as out, open(logs / "stderr.log", "w") as err:
        process = subprocess.Popen([str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "wsgi:app"],
                                   cwd=ROOT, env=env, stdout=out, stderr=err)
    server = Server(f"http://127.0.0.1:{port}", process, logs)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if requests.get(server.url + "/api/status", timeout=5).status_code == 200:
                    break
            except requests.RequestException:
                pass  # not listening yet, or the workers still loading the app
            assert process.poll() is None, (logs / "stderr.log").read_text()
            assert time.monotonic() < deadline, "gunicorn did not start"
            time.sleep(0.3)
        yield server
    finally:
        server.stop()


@contextmanager
def serving_admins(directory, template: str, users: tuple[str, ...], password: str,
                   **settings: str) -> Iterator[Server]:
    """gunicorn (two workers of four threads) with sign-in on, on a copy of ``template``,
    ``users`` made admins from the command line with ``password``; ``settings`` added."""
    env = quarry_env(QUARRY_DATABASE_URL=sqlite_store(template, directory),
                     QUARRY_INSTANCE_PATH=str(directory), QUARRY_WORKERS="2",
                     QUARRY_THREADS="4", QUARRY_AUTH_REQUIRED="true",
                     QUARRY_SECRET_KEY="live-admins-" + "k" * 32, **settings)
    app = create_app(load_settings(env))
    for user in users:
        made = app.test_cli_runner().invoke(args=["users", "create", user, "--admin"],
                                            input=password + "\n")
        assert made.exit_code == 0, made.output
    with app.app_context():
        db.engine.dispose()
    with serving(env, Path(directory)) as server:
        yield server
