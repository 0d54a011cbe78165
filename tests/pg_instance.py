"""A throwaway PostgreSQL server of the test's own, for tests that stop it.

The shared server on 127.0.0.1:5432 serves everybody's tests and must never be stopped;
a test that kills its store starts its own instance here (initdb into a temporary folder,
a free port), as the postgres user when run as root (initdb refuses root).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tests.live import free_port


def _bin_dir() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def _server_user() -> str | None:
    """Who runs the server: ourselves, or postgres when we are root (None: cannot)."""
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid()).pw_name
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return None
    return "postgres"


def available() -> str | None:
    """Why no throwaway instance can be made here, or None when one can."""
    if _bin_dir() is None:
        return "no PostgreSQL server binaries (initdb, pg_ctl) on this machine"
    if _server_user() is None:
        return "running as root and there is no postgres user to run the server as"
    return None


@dataclass
class Instance:
    port: int
    data: str
    bin_dir: str
    user: str

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str, timeout: float = 60) -> None:
        command = [os.path.join(self.bin_dir, args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", self.user, "--", *command]
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        assert result.returncode == 0, (command, result.stdout, result.stderr)

    def start(self) -> None:
        # No fsync: the data is thrown away; a crash test only needs the server to die.
        options = (f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 "
                   "-c fsync=off -c synchronous_commit=off -c full_page_writes=off")
        self._run("pg_ctl", "-D", self.data, "-o", options, "-l",
                  os.path.join(self.data, "server.log"), "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        """``pg_ctl stop -m mode``; "immediate" kills every backend without a shutdown."""
        self._run("pg_ctl", "-D", self.data, "-m", mode, "-w", "stop")

    def running(self) -> bool:
        return os.path.exists(os.path.join(self.data, "postmaster.pid"))


@contextmanager
def throwaway_postgresql() -> Iterator[Instance]:
    """A fresh, started PostgreSQL server (trust auth, user postgres); removed afterwards."""
    bin_dir, user = _bin_dir(), _server_user()
    assert bin_dir and user, available()
    data = tempfile.mkdtemp(prefix=f"quarry-pg-{os.getpid()}-")
    if os.geteuid() == 0:
        shutil.chown(data, user)
    instance = Instance(free_port(), data, bin_dir, user)
    try:
        instance._run("initdb", "-D", data, "-U", "postgres", "-A", "trust", "--no-sync",
                      "-E", "UTF8", timeout=120)
        instance.start()
        yield instance
    finally:
        if instance.running():
            try:
                instance.stop("immediate")
            except AssertionError:
                pass  # already gone
        shutil.rmtree(data, ignore_errors=True)
