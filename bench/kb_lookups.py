"""A knowledge-base search with and without the store lookups branch ``kbjoin2`` removed,
interleaved in one process (issue 31's search latency).

    .venv/bin/python bench/kb_lookups.py [--chunks 100000] [--samples 100]

One knowledge base of ``--chunks`` vectors (as bench/kb.py), then, alternating search by
search through POST /api/sql/query: the search as it runs now (3 store statements: the
project, a model of that name, the base), the search with the two lookups it made before
put back (the project again for the model, the base again for the search: 5 statements),
and ``SELECT 1``. Wall and CPU time medians, and the ratios to ``SELECT 1``. Run in one
process, one after the other, so the machine's load weighs on all three alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.kb import _sql, _store_statements, index, kb_app  # noqa: E402


def _with_old_lookups():
    """Put back the two lookups (returns a function that takes them out again)."""
    from app.mindsdb import router
    from app.services import knowledge_bases as kb_service
    from app.services import models as model_service

    model, search = router._model, kb_service.search

    def old_model(project, name, ctx=None):
        try:
            return model_service.get_model(project, name)
        except Exception:  # noqa: BLE001 - as the router's own: no model of that name
            return None

    def old_search(*args, found=None, **kwargs):
        return search(*args, **kwargs)

    router._model, kb_service.search = old_model, old_search

    def undo() -> None:
        router._model, kb_service.search = model, search
    return undo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=100)
    args = parser.parse_args()
    with kb_app() as (app, client, _):
        index(client, app, args.chunks, 5)  # the base, its vectors, a warm copy

        def search(n: int, label: str) -> None:
            _sql(client, f"SELECT id FROM mindsdb.big WHERE content = 'question {n} {label}' "
                         "LIMIT 10")

        undo = _with_old_lookups()
        before = _store_statements(app, lambda: search(-1, "before"))
        undo()
        after = _store_statements(app, lambda: search(-1, "after"))
        wall: dict[str, list[float]] = {"now": [], "before": [], "SELECT 1": []}
        cpu: dict[str, list[float]] = {label: [] for label in wall}
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; store "
              f"statements a search: {before} before, {after} now")
        for n in range(args.samples):
            for label in (["now", "before"] if n % 2 else ["before", "now"]) + ["SELECT 1"]:
                undo = _with_old_lookups() if label == "before" else (lambda: None)
                started, used = time.perf_counter(), time.process_time()
                if label == "SELECT 1":
                    _sql(client, "SELECT 1")
                else:
                    search(n, label)
                wall[label].append(time.perf_counter() - started)
                cpu[label].append(time.process_time() - used)
                undo()
        one_wall = statistics.median(wall["SELECT 1"])
        one_cpu = statistics.median(cpu["SELECT 1"])
        for label in wall:
            w, c = statistics.median(wall[label]), statistics.median(cpu[label])
            print(f"{label:<9} wall p50 {w * 1000:7.2f} ms ({w / one_wall:5.1f}x SELECT 1), "
                  f"CPU p50 {c * 1000:7.2f} ms ({c / one_cpu:5.1f}x)")
        print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
