"""Where the CPU of a large training goes when Celery trains: the web workers only enqueue.

    .venv/bin/python bench/celery_idle.py [--rows 100000] [--budget 5]

Serves Quarry with gunicorn (3 workers) and one `celery -A wsgi:celery worker` on Redis
(127.0.0.1:6379, database 15, a queue of its own), creates a model on ``--rows`` generated rows
through the REST route, polls its status once a second until it is complete, and prints the
CPU seconds the web workers and the Celery worker (with its children) spent meanwhile, read
from /proc, and their ratio. Before issue 20 this was a test; it measures load, so it lives
here. Expect the web workers' share to be a few percent (they answer the status polls).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _server import BIN, ROOT, migrate, quarry_env, serving  # noqa: E402


def generated_rows(rows: int) -> str:
    """``rows`` rows of three numbers and a label that depends on two of them."""
    return ("SELECT * FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
            f"WHERE x < {rows}) SELECT x % 97 AS a, (x * 7) % 13 AS b, (x * 31) % 101 AS n, "
            "CASE WHEN (x % 97) + 3 * ((x * 7) % 13) > 70 THEN 'hi' ELSE 'lo' END AS label "
            "FROM c) AS generated")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue  # gone meanwhile
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def family_cpu(pid: int) -> float:
    return sum(cpu_seconds(p) for p in [pid, *children(pid)])


def start_worker(env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "w") as out:
        process = subprocess.Popen(
            [str(BIN / "celery"), "-A", "wsgi:celery", "worker", "-Q",
             env["QUARRY_CELERY_QUEUE"], "-c", "1", "--without-gossip", "--without-mingle",
             "--loglevel", "INFO"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while "ready" not in log.read_text():
        if process.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"the Celery worker did not start:\n{log.read_text()}")
        time.sleep(0.2)
    return process


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--budget", type=float, default=5.0, help="USING time_budget_s")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        work = Path(workdir)
        env = quarry_env(QUARRY_DATABASE_URL=f"sqlite:///{work}/store.db",
                         QUARRY_INSTANCE_PATH=workdir, QUARRY_WORKERS="3",
                         QUARRY_CELERY_BROKER_URL="redis://127.0.0.1:6379/15",
                         QUARRY_CELERY_QUEUE=f"quarry-bench-{os.getpid()}")
        migrate(env)
        worker = start_worker(env, work / "celery.log")
        try:
            with serving(env, work) as server:
                deadline = time.monotonic() + 60
                while len(web := server.worker_pids()) < 3:
                    if time.monotonic() > deadline:
                        sys.exit(f"gunicorn started {len(web)} workers of 3")
                    time.sleep(0.2)
                requests.post(server.url + "/api/projects", json={"name": "p1"}, timeout=30)
                web_before, celery_before = sum(map(cpu_seconds, web)), family_cpu(worker.pid)
                started = time.monotonic()
                created = requests.post(server.url + "/api/projects/p1/models", timeout=60, json={
                    "query": f"CREATE MODEL p1.big FROM demo ({generated_rows(args.rows)}) "
                             f"PREDICT label USING time_budget_s = {args.budget}"})
                created.raise_for_status()
                while True:
                    record = requests.get(server.url + "/api/projects/p1/models/big",
                                          timeout=30).json()
                    if record["status"] in ("complete", "error"):
                        break
                    time.sleep(1)
                seconds = time.monotonic() - started
                web_cpu = sum(map(cpu_seconds, web)) - web_before
                celery_cpu = family_cpu(worker.pid) - celery_before
        finally:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(timeout=30)
    print(f"{args.rows} rows, status {record['status']}, {seconds:.1f} s until complete")
    print(f"CPU: web workers {web_cpu:.2f} s, Celery worker {celery_cpu:.2f} s, "
          f"web / Celery = {web_cpu / max(celery_cpu, 1e-9):.3f}")


if __name__ == "__main__":
    main()
