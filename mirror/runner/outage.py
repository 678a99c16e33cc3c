"""Riding out a short Postgres outage: which errors count as one, and the retry loop.

A fenced statement is idempotent (it changes the row only while this attempt holds the
lease), so retrying it until Postgres answers again is safe. The loop stops early when
the attempt's abort signal fires: by then the lease may belong to someone else.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from mirror.domain.jobs import DatabaseUnavailable
from mirror.domain.progress import AbortSignal

T = TypeVar("T")

log = logging.getLogger("mirror.outage")  # the name logs carried before the move to packages

# What the database adapter raises for a dropped connection, a restarting server, a
# refused connect, and a wait for a free pooled connection while statements hang.
DATABASE_OUTAGE: tuple[type[Exception], ...] = (DatabaseUnavailable,)

FIRST_WAIT_S = 0.2
MAX_WAIT_S = 5.0
DEFAULT_LIMIT_S = 60.0


def durably(
    statement: Callable[[], T],
    *,
    abort: AbortSignal | None = None,
    limit_s: float = DEFAULT_LIMIT_S,
) -> T:
    """Run `statement`, retrying it through a database outage of up to `limit_s`.

    Re-raises the last outage error once `limit_s` has passed or `abort` fired (the
    lease ran out, the job was cancelled, the worker must stop now).
    """
    deadline = time.monotonic() + limit_s
    wait = FIRST_WAIT_S
    while True:
        try:
            return statement()
        except DATABASE_OUTAGE as error:
            if abort is not None and abort.is_set():
                raise
            if time.monotonic() + wait > deadline:
                raise
            log.warning(
                "database unavailable (%s); retrying in %.1fs", describe_outage(error), wait
            )
        if abort is not None:
            abort.wait(wait)
        else:
            time.sleep(wait)
        wait = min(wait * 2, MAX_WAIT_S)


def describe_outage(error: BaseException) -> str:
    """The driver's first line (psycopg never echoes the password), for a log line."""
    if isinstance(error, DatabaseUnavailable):
        return error.detail[:200]
    text = str(error).strip()
    return (text.splitlines()[0] if text else type(error).__name__)[:200]
