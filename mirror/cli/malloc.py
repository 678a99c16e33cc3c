"""Fewer malloc arenas for the worker: its resident memory, not its speed.

glibc gives each thread that allocates at once its own arena (up to 8 per core) and
keeps what is freed there for that arena's next use. The worker's upload, download and
feed threads each allocate MiB-sized read buffers, so every arena ends up holding a few
MiB it no longer needs: about 20 MB of the worker's peak on a 1 GB job (bench/job.py).
Two arenas hold the same work with no measurable cost in upload speed. The same as
MALLOC_ARENA_MAX=2 in the environment, which wins when set; a no-op off glibc.
"""

from __future__ import annotations

import ctypes
import os

M_ARENA_MAX = -8  # glibc's malloc.h
WORKER_ARENAS = 2


def limit_malloc_arenas(arenas: int = WORKER_ARENAS) -> bool:
    """Cap glibc's malloc arenas before the worker starts its threads; True if applied."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_ARENA_MAX, arenas))
