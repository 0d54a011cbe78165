"""Knowledge bases (issue 31): candidates for each worker's in-memory vector index, side by
side on the same vectors in one run.

    .venv/bin/python bench/kb_index.py [--chunks 100000] [--queries 200] [--hnsw]

``--chunks`` clustered unit vectors of 384 dimensions (bench/kb.py's generator) and
``--queries`` questions near some of them. For each index: the time to build it from the
vectors (what a worker pays at its first search of a base, after reading them), the growth
of resident anonymous memory, recall@10 vs exact search, the p50 of one question's search,
and the time to take out 64 vectors and put them back (a small upsert by another worker,
caught up from the log). The exact matrix product in numpy is the yardstick.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import time

import numpy as np


def _rss() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status
                    if line.startswith("RssAnon:"))


def vectors(chunks: int, queries: int, offset: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Clustered unit vectors and questions near some of them; ``offset``: how far both
    lean towards one common direction (embeddings not centred on zero)."""
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(500, 384)).astype(np.float32)
    data = centers[rng.integers(0, 500, chunks)] + \
        0.6 * rng.normal(size=(chunks, 384)).astype(np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    near = data[rng.integers(0, chunks, queries)] + \
        0.1 * rng.normal(size=(queries, 384)).astype(np.float32)
    near /= np.linalg.norm(near, axis=1, keepdims=True)
    common = offset * np.abs(rng.normal(size=384)).astype(np.float32)
    data, near = data + common, near + common
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    near /= np.linalg.norm(near, axis=1, keepdims=True)
    return data.astype(np.float32), near.astype(np.float32)


class Numpy:
    """Exact: one matrix product (no removal; the yardstick)."""

    def __init__(self, data: np.ndarray) -> None:
        self.matrix = data.copy()

    def search(self, query: np.ndarray, k: int) -> np.ndarray:
        return np.argpartition(-(self.matrix @ query), k)[:k]


class Quarry:
    """What app/kb/index.py runs: app.kb.index._Vectors (faiss IndexFlatIP up to
    ``exact`` chunks; beyond, IndexLSH bits (above each dimension's median or not) pick
    ``candidates``, ranked exactly)."""

    def __init__(self, data: np.ndarray, exact: int, candidates: int) -> None:
        from app.kb.index import _Vectors

        self.copy = _Vectors(exact, candidates)
        self.copy.load(((i, v.tobytes()) for i, v in enumerate(data)), 1)
        self.copy.nearest(data[0], 10)  # beyond ``exact``, the first search makes the bits

    def search(self, query: np.ndarray, k: int) -> list[int]:
        return list(self.copy.nearest(query, k))

    def upsert(self, data: np.ndarray, ids: np.ndarray) -> None:
        self.copy.update(list(map(int, ids)), ((int(i), data[i].tobytes()) for i in ids), 2)


class Hnsw:
    """faiss IndexHNSWFlat (no removal: a worker would rebuild it after a deletion)."""

    def __init__(self, data: np.ndarray, m: int, ef: int) -> None:
        import faiss

        self.index = faiss.IndexHNSWFlat(data.shape[1], m, faiss.METRIC_INNER_PRODUCT)
        self.index.hnsw.efConstruction = 40
        self.index.add(data)
        self.index.hnsw.efSearch = ef

    def search(self, query: np.ndarray, k: int) -> np.ndarray:
        return self.index.search(query[None, :], k)[1][0]


def main() -> None:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--hnsw", action="store_true", help="also build HNSW graphs (slow)")
    parser.add_argument("--offset", type=float, default=0.0,
                        help="lean every vector towards one direction by this much")
    args = parser.parse_args()
    import faiss

    data, queries = vectors(args.chunks, args.queries, args.offset)
    exact = [set(np.argsort(-(data @ q))[:10].tolist()) for q in queries]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
          f"{args.chunks} × 384 (offset {args.offset}), {args.queries} questions, "
          f"faiss {faiss.__version__}")
    runs = [("numpy, exact matrix product", lambda: Numpy(data)),
            ("faiss IndexFlatIP, exact", lambda: Quarry(data, len(data), 0))]
    for candidates in (500, 1000, 2000):
        runs.append((f"faiss IndexLSH median bits, {candidates} re-ranked by IndexFlatIP",
                     lambda c=candidates: Quarry(data, 0, c)))
    if args.hnsw:
        for ef in (64, 128):
            runs.append((f"faiss IndexHNSWFlat M=32 efConstruction=40 efSearch={ef}",
                         lambda e=ef: Hnsw(data, 32, e)))
    moved = np.arange(0, len(data), len(data) // 64)[:64]
    for label, build in runs:
        gc.collect()
        before = _rss()
        started = time.perf_counter()
        index = build()
        built = time.perf_counter() - started
        memory = (_rss() - before) / 2**20
        times, recall = [], []
        for q, truth in zip(queries, exact, strict=True):
            started = time.perf_counter()
            got = index.search(q, 10)
            times.append(time.perf_counter() - started)
            recall.append(len({int(i) for i in got} & truth) / 10)
        upsert = ""
        if hasattr(index, "upsert"):
            started = time.perf_counter()
            index.upsert(data, moved)
            upsert = f", 64 out and in again {(time.perf_counter() - started) * 1000:.1f} ms"
        print(f"{label}: build {built:.2f} s, +{memory:.0f} MiB, recall@10 "
              f"{statistics.fmean(recall):.3f}, search p50 "
              f"{statistics.median(times) * 1000:.2f} ms{upsert} "
              f"(load {os.getloadavg()[0]:.1f})", flush=True)
        del index


if __name__ == "__main__":
    main()
