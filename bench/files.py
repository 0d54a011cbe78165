"""Uploaded files (issue 22): upload and GROUP BY through Quarry against DuckDB in-process,
side by side in one run.

    python bench/files.py [--rows 10000000] [--repeat 3] [--wide] [--baseline CHECKOUT]

Makes a CSV of ``--rows`` rows (id, grp: 1 000 groups, x: a double, label: text; about
77 bytes a row, so 10 M rows is ~750 MiB; ``--wide`` adds ten text columns of 96
characters: ~1 KiB a row) with DuckDB, then, with one gunicorn worker:

- upload: ``PUT /api/files/big`` (multipart) sent by ``curl -F`` (the file streamed from
  disk as it is sent) and by ``requests`` (mindsdb_sdk's client, which builds the whole
  body in memory first), alternately, against DuckDB's ``COPY (SELECT * FROM read_csv(…))
  TO '….parquet'`` in this process — the work the upload does, without HTTP; medians;
- the worker's RSS growth during the upload (sampled every 50 ms), after a first small
  upload and query loaded DuckDB into it;
- ``SELECT grp, count(*), avg(x) FROM files.big GROUP BY grp`` through POST /api/sql/query
  (1 000 rows answered) against the same statement run by DuckDB in this process on the
  stored Parquet file: median of ``--repeat`` runs each, alternately.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import duckdb
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _server import ROOT, Server, migrate, quarry_env, serving  # noqa: E402

QUERY = "SELECT grp, count(*) AS n, avg(x) AS mean FROM {t} GROUP BY grp"


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def make_csv(path: Path, rows: int, wide: bool = False) -> None:
    more = "".join(f", md5((i + {k})::VARCHAR) || md5((i * {k})::VARCHAR) || "
                   f"md5((i - {k})::VARCHAR) AS t{k}" for k in range(10)) if wide else ""
    duckdb.sql(f"COPY (SELECT i AS id, i % 1000 AS grp, (i * 7919 % 100003) / 7.0 AS x, "
               f"'label-' || (i % 97) || '-' || repeat('x', 40) AS label{more} "
               f"FROM range({rows}) t(i)) TO '{path}' (HEADER, DELIMITER ',')")


def in_process_convert(csv: Path, out: Path) -> float:
    started = time.perf_counter()
    conn = duckdb.connect(config={"threads": 2, "memory_limit": "256MiB"})
    conn.execute(f"COPY (SELECT * FROM read_csv('{csv}')) TO '{out}' "
                 "(FORMAT parquet, COMPRESSION zstd)")
    conn.close()
    return time.perf_counter() - started


def upload(url: str, csv: Path, worker: int, name: str, client: str) -> tuple[float, int]:
    """Seconds and the worker's RSS growth of one upload. ``client``: ``curl`` streams the
    file from disk as it sends it (as curl -F and browsers do); ``requests`` (what
    mindsdb_sdk uses) first builds the whole multipart body in memory, which here takes
    about as long as sending it, before the first byte goes out."""
    before, peak, done = rss(worker), [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss(worker))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    if client == "curl":
        sent = subprocess.run(["curl", "-sS", "-X", "PUT", "-F", f"file=@{csv}", "-F",
                               "source_type=file", f"{url}/api/files/{name}"],
                              check=True, timeout=3600, capture_output=True, text=True)
        answer = sent.stdout
    else:
        with open(csv, "rb") as handle:
            answer = requests.put(f"{url}/api/files/{name}", timeout=3600,
                                  files={"file": ("big.csv", handle)},
                                  data={"source_type": "file"}).text
    seconds = time.perf_counter() - started
    done.set()
    sampler.join()
    if '"row_count"' not in answer:
        raise Refused(f"{client}: {answer.strip()[:300]} (worker RSS growth "
                      f"{(peak[0] - before) / 2**20:.0f} MiB)")
    return seconds, peak[0] - before


class Refused(Exception):
    """An upload answered with an error (e.g. 413 beyond the converter's memory)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--uploads", type=int, default=2, help="uploads per client")
    parser.add_argument("--wide", action="store_true",
                        help="rows of ~1 KiB (ten more text columns) instead of ~77 bytes")
    parser.add_argument("--baseline", type=Path, metavar="CHECKOUT",
                        help="the same figures with another checkout of Quarry (e.g. the "
                             "commit before a change), after this one's")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="quarry-bench-files-") as tmp:
        work = Path(tmp)
        csv = work / "big.csv"
        make_csv(csv, args.rows, args.wide)
        print(f"CSV: {args.rows:,} rows, {csv.stat().st_size / 2**20:,.0f} MiB")
        for root in [ROOT] + ([args.baseline] if args.baseline else []):
            print(f"{root}:")
            folder = work / f"quarry-{len(list(work.glob('quarry-*')))}"
            folder.mkdir()
            measure(root, csv, folder, args)


def measure(root: Path, csv: Path, work: Path, args: argparse.Namespace) -> None:
    """The figures of one checkout of Quarry (``root``), each side by side with DuckDB."""
    env = quarry_env(QUARRY_DATABASE_URL=f"sqlite:///{work}/store.db",
                     QUARRY_INSTANCE_PATH=str(work), QUARRY_WORKERS="1",
                     QUARRY_FILES_MAX_BYTES=str(4 * 2**30), QUARRY_SQL_TIMEOUT_S="600")
    migrate(env, root)
    with serving(env, work, root=root) as server:
        try:
            measure_served(server, csv, work, args)
        except Refused as exc:
            print(f"upload refused: {exc}")


def measure_served(server: Server, csv: Path, work: Path, args: argparse.Namespace) -> None:
    """The figures of one served Quarry: uploads, RSS growth, GROUP BY."""
    worker = server.worker_pids()[0]
    # A first small upload and query load DuckDB in the worker (~55 MiB, once per
    # process): the figures below are those of a warm worker.
    requests.put(f"{server.url}/api/files/warm", files={"file": ("w.csv", b"a\n1\n")},
                 timeout=60).raise_for_status()
    requests.post(f"{server.url}/api/sql/query", timeout=60,
                  json={"query": "SELECT * FROM files.warm"}).raise_for_status()
    # Side by side, alternately: the machine's load changes between runs.
    runs: dict[str, list[float]] = {"curl": [], "requests": [], "duckdb": []}
    growths = []
    for i in range(args.uploads):
        for client in ("curl", "requests"):
            seconds, growth = upload(server.url, csv, worker, f"big_{client}_{i}",
                                     client)
            runs[client].append(seconds)
            growths.append(growth)
            requests.delete(f"{server.url}/api/files/big_{client}_{i}", timeout=60)
        runs["duckdb"].append(in_process_convert(csv, work / "direct.parquet"))
    direct_s = statistics.median(runs["duckdb"])
    for client in ("curl", "requests"):
        quarry_s = statistics.median(runs[client])
        print(f"upload ({client}): Quarry {quarry_s:.2f} s, DuckDB in-process "
              f"{direct_s:.2f} s, ratio {quarry_s / direct_s:.2f}")
    print("worker RSS growth during each upload: "
          + ", ".join(f"{g / 2**20:.0f}" for g in growths) + " MiB")
    upload(server.url, csv, worker, "big", "curl")
    stored = work / "files" / "big.parquet"
    times: dict[str, list[float]] = {"quarry": [], "duckdb": []}
    conn = duckdb.connect(config={"threads": 2})
    session = requests.Session()
    for _ in range(args.repeat):
        started = time.perf_counter()
        body = session.post(f"{server.url}/api/sql/query", timeout=600, json={
            "query": QUERY.format(t="files.big")}).json()
        times["quarry"].append(time.perf_counter() - started)
        assert body["type"] == "table" and len(body["data"]) == 1000, body
        started = time.perf_counter()
        rows = conn.execute(QUERY.format(t=f"read_parquet('{stored}')")).fetchall()
        times["duckdb"].append(time.perf_counter() - started)
        assert len(rows) == 1000
    quarry, direct = (statistics.median(times[k]) for k in ("quarry", "duckdb"))
    print(f"GROUP BY over files.big: Quarry {quarry:.3f} s, DuckDB on the Parquet "
          f"{direct:.3f} s, ratio {quarry / direct:.2f}")
    os.sync()


if __name__ == "__main__":
    main()
