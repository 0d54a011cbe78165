"""glibc's allocator, tuned for gthread workers that now and then build a large result.

On another C library these do nothing.
"""

from __future__ import annotations

import ctypes
import functools

M_ARENA_MAX = -8  # mallopt's parameter number, from glibc's malloc.h


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt, libc.malloc_trim  # noqa: B018 - both exist on glibc only
    except (OSError, AttributeError):
        return None
    return libc


def limit_arenas(count: int) -> None:
    """glibc gives each thread its own malloc arena; the memory freed after a large result
    then stays spread over all of them. A few arenas keep a worker's memory compact."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(M_ARENA_MAX, count)


def release_free_memory() -> None:
    """Hand memory already freed back to the system (glibc keeps it otherwise)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
