"""A knowledge base joined to a data source's table (issue 31), side by side in one run:
the same search alone, the search joined to a table of another database by id, and
``SELECT 1`` — all through POST /api/sql/query.

    .venv/bin/python bench/kb_join.py [--documents 100] [--samples 30]

The knowledge base holds ``--documents`` of numpy's docstrings (as bench/kb.py); a SQLite
data source ``lite`` holds ``docs(id, name)`` with one row per document and 10 000 more.
Each sample asks one function's summary line three ways, alternating:

- ``SELECT id, relevance FROM mindsdb.docs WHERE content = '…' LIMIT 10``;
- ``SELECT d.name, kb.relevance FROM lite.docs d JOIN mindsdb.docs kb ON kb.id = d.id
  WHERE kb.content = '…' ORDER BY kb.relevance DESC LIMIT 10`` (the search becomes a table
  of the federation engine, the SQLite table a leg);
- ``SELECT 1``.

It prints the medians, the rows the SQLite leg sent for each joined statement, and the
ratio joined / alone: what the federation engine adds to a search. Everything runs in
this process through the Flask test client, on a migrated SQLite store in a temporary
folder.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._server import migrate, quarry_env  # noqa: E402
from bench.kb import _quote, _sql, corpus  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=100)
    parser.add_argument("--samples", type=int, default=30)
    args = parser.parse_args()
    pairs = corpus(args.documents)
    with tempfile.TemporaryDirectory() as tmp:
        lite = os.path.join(tmp, "lite.db")
        with sqlite3.connect(lite) as conn:
            conn.execute("CREATE TABLE docs (id INTEGER PRIMARY KEY, name TEXT)")
            conn.executemany("INSERT INTO docs VALUES (?, ?)",
                             [(i, f"document {i}") for i in range(len(pairs) + 10_000)])
        url = f"sqlite:///{tmp}/store.db"
        migrate(quarry_env(QUARRY_DATABASE_URL=url, QUARRY_INSTANCE_PATH=tmp))
        from app import create_app

        app = create_app({"DATABASE_URL": url, "INSTANCE_PATH": tmp, "DEMO_SOURCE": False,
                          "KB_DIR": os.path.join(tmp, "kb"),
                          "DATA_SOURCES": {"lite": f"sqlite:///{lite}"}})
        client = app.test_client()
        _sql(client, "CREATE KNOWLEDGE_BASE mindsdb.docs")
        for start in range(0, len(pairs), 50):
            values = ", ".join(f"({i}, {_quote(doc)})"
                               for i, (_, doc) in enumerate(pairs[start:start + 50], start))
            _sql(client, f"INSERT INTO mindsdb.docs (id, content) VALUES {values}")
        shapes = {
            "search alone": "SELECT id, relevance FROM mindsdb.docs WHERE content = {q} "
                            "LIMIT 10",
            "search joined": "SELECT d.name, kb.relevance FROM lite.docs d JOIN mindsdb.docs "
                             "kb ON kb.id = d.id WHERE kb.content = {q} ORDER BY "
                             "kb.relevance DESC LIMIT 10",
            "SELECT 1": "SELECT 1",
        }
        times: dict[str, list[float]] = {label: [] for label in shapes}
        sent, leg_rows = _count_leg_rows(), []
        print(f"{len(pairs)} documents, load average {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} cores")
        for shape in shapes.values():  # warm: the model, the engine, the pools
            _sql(client, shape.format(q=_quote("warm up")))
        for n in range(args.samples):
            question = _quote(pairs[n % len(pairs)][0])
            order = list(shapes.items()) if n % 2 == 0 else list(reversed(shapes.items()))
            for label, shape in order:
                sent.clear()
                started = time.perf_counter()
                body = _sql(client, shape.format(q=question))
                times[label].append(time.perf_counter() - started)
                if label == "search joined":
                    leg_rows.append(sum(sent))
                if label == "search joined" and len(body["data"]) != 10:
                    raise SystemExit(f"the join answered {len(body['data'])} rows")
        medians = {label: statistics.median(t) * 1000 for label, t in times.items()}
        for label, ms in medians.items():
            print(f"{label:<15} p50 {ms:8.1f} ms")
        print(f"rows the SQLite leg sent a joined statement: p50 "
              f"{statistics.median(leg_rows):.0f} of {len(pairs) + 10_000}")
        print(f"joined / alone: {medians['search joined'] / medians['search alone']:.2f}; "
              f"load average at the end {os.getloadavg()[0]:.1f}")


def _count_leg_rows() -> list[int]:
    """The rows each leg of a federated statement sends from its source, as they are read
    (``federation.legs.load``, wrapped here: the bench's own count, not Quarry's)."""
    from app.federation import legs

    sent: list[int] = []
    load = legs.load

    def counted(*args, **kwargs):
        rows = load(*args, **kwargs)
        sent.append(rows)
        return rows

    legs.load = counted
    return sent


if __name__ == "__main__":
    main()
