"""One OpenMP thread for scikit-learn's native loops while Quarry trains or predicts.

HistGradientBoosting's OpenMP threads spin-wait for each other; on a machine whose cores
are shared by gunicorn workers and trainers that made training two to three times slower
and one-row predictions erratic. Quarry gets its parallelism from processes and the
trainer pool instead.
"""

from __future__ import annotations

import functools
import multiprocessing
from contextlib import AbstractContextManager, nullcontext

import joblib
from threadpoolctl import ThreadpoolController


@functools.cache
def _controller() -> ThreadpoolController:
    # Built on first use (it inspects the loaded native libraries once), not at import.
    return ThreadpoolController()


def one_openmp_thread() -> AbstractContextManager:
    """A context in which OpenMP loops run on one thread (cheap: ~20 µs)."""
    return _controller().limit(limits=1, user_api="openmp")


def one_native_thread() -> AbstractContextManager:
    """A context in which OpenMP and BLAS loops both run on one thread.

    For training: OpenBLAS threads spin-wait like OpenMP's, and on a loaded two-core machine
    a logistic regression on 150 rows took 0.5-2 s with two of them, 0.07 s with one.
    """
    return _controller().limit(limits=1)


def joblib_backend() -> AbstractContextManager:
    """joblib's thread backend inside a daemon process (a Celery prefork child), else as is.

    A daemon process may not start processes, so joblib's default backend (loky) cannot
    run there: asked how many jobs a forest's n_jobs=2 means, it fell back to one with a
    warning, for every estimator fitted, which filled the worker's log. Threads are what
    the forests prefer in any case, and they work in a daemon process.
    """
    if multiprocessing.current_process().daemon:
        return joblib.parallel_config(backend="threading")
    return nullcontext()
