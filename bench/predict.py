"""Prediction benchmark of issue 14: an iris model served by gunicorn (3 workers).

Serves Quarry with ``gunicorn -c gunicorn.conf.py wsgi:app`` (``bench/_server.py``) on a fresh
SQLite store, trains the iris model, then reports:

- 1-row predict, sequential over one keep-alive connection: median, mean and p99;
- 1-row predict with 8 concurrent clients: requests/s, p50 and p99 (``wrk -t2 -c8`` when
  installed, else 8 Python threads each with its own connection);
- one 10 000-row predict (median of 5);
- the first predict on a fresh worker (gunicorn restarted after training: no worker has
  unpacked the model yet);
- the PSS of the gunicorn master and its workers with scikit-learn and the model loaded,
  from /proc/<pid>/smaps_rollup.

    .venv/bin/python bench/predict.py [--samples 1000] [--seconds 10]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _server import migrate, quarry_env, serving  # noqa: E402

ROW = {"sepal_length": 5.1, "sepal_width": 3.5, "petal_length": 1.4, "petal_width": 0.2}
PATH = "/api/projects/mindsdb/models/iris_m/predict"


class Client:
    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def call(self, method: str, path: str, body: Any = None) -> Any:
        payload = json.dumps(body).encode() if body is not None else None
        self.conn.request(method, path, body=payload,
                          headers={"Content-Type": "application/json"} if payload else {})
        response = self.conn.getresponse()
        data = response.read()
        if response.status >= 300:
            raise RuntimeError(f"{method} {path}: {response.status} {data[:300]!r}")
        return json.loads(data) if data else None


def ms(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {"median": statistics.median(ordered) * 1000,
            "mean": statistics.fmean(ordered) * 1000,
            "p99": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000}


def sequential(port: int, samples: int) -> dict[str, float]:
    client = Client(port)
    for _ in range(50):
        client.call("POST", PATH, {"data": [ROW]})
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        client.call("POST", PATH, {"data": [ROW]})
        times.append(time.perf_counter() - started)
    return ms(times)


def concurrent(port: int, seconds: float) -> dict[str, Any]:
    wrk = shutil.which("wrk")
    if wrk:
        script = os.path.join(tempfile.mkdtemp(), "post.lua")
        with open(script, "w") as out:
            out.write('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
                      f"wrk.body = {json.dumps(json.dumps({'data': [ROW]}))}\n")
        output = subprocess.run([wrk, "-t2", "-c8", f"-d{int(seconds)}s", "--latency", "-s",
                                 script, f"http://127.0.0.1:{port}{PATH}"],
                                capture_output=True, text=True, check=True).stdout
        figures = {"tool": "wrk -t2 -c8"}
        for line in output.splitlines():
            words = line.split()
            if line.startswith("Requests/sec"):
                figures["req/s"] = float(words[1])
            elif words[:1] in (["50%"], ["99%"]):
                figures[words[0]] = words[1]
        return figures
    times: list[float] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def run() -> None:
        client, mine = Client(port), []
        while time.monotonic() < deadline:
            started = time.perf_counter()
            client.call("POST", PATH, {"data": [ROW]})
            mine.append(time.perf_counter() - started)
        with lock:
            times.extend(mine)

    threads = [threading.Thread(target=run) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"tool": "8 Python threads", "req/s": len(times) / seconds, **ms(times)}


def pss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        for line in rollup:
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=10)
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="quarry-bench-predict-")
    env = quarry_env(QUARRY_DATABASE_URL=f"sqlite:///{workdir}/store.db",
                     QUARRY_INSTANCE_PATH=workdir, QUARRY_WORKERS="3")
    try:
        migrate(env)
        with serving(env, workdir, name="gunicorn-train") as server:
            Client(server.port).call("POST", "/api/projects/mindsdb/models", {
                "query": "CREATE MODEL iris_m FROM demo (SELECT * FROM iris) PREDICT species "
                         "USING join_learn_process = true"})
        # A fresh server: no worker has unpacked the model yet.
        with serving(env, workdir) as server:
            measure(server, args)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def measure(server: Any, args: argparse.Namespace) -> None:
    port = server.port
    started = time.perf_counter()
    Client(port).call("POST", PATH, {"data": [ROW]})
    first = (time.perf_counter() - started) * 1000
    print(f"first predict on a fresh worker: {first:.1f} ms")
    print("1-row predict, sequential (ms):",
          {k: round(v, 2) for k, v in sequential(port, args.samples).items()})
    print("1-row predict, 8 clients:", concurrent(port, args.seconds))
    big = {"data": [ROW] * 10_000}
    client, times = Client(port), []
    for _ in range(5):
        started = time.perf_counter()
        client.call("POST", PATH, big)
        times.append(time.perf_counter() - started)
    print(f"10 000-row predict: median {statistics.median(times) * 1000:.0f} ms")
    pids = [server.pid, *sorted(server.worker_pids())]
    sizes = [pss_mib(pid) for pid in pids]
    print(f"PSS master + {len(pids) - 1} workers: {sum(sizes):.0f} MiB "
          f"({', '.join(f'{s:.0f}' for s in sizes)})")


if __name__ == "__main__":
    main()
