"""The worker's LISTEN connection: wakes the claim loop when a job is enqueued."""

from __future__ import annotations

import logging
import os
import threading

import psycopg

from mirror.db.schema import NOTIFY_CHANNEL

log = logging.getLogger("mirror.worker")

_LISTEN_TICK_S = 0.1  # how often the listener checks for a stop while waiting for NOTIFY


class JobListener:
    """LISTEN on the job channel over its own connection (outside the pool).

    `__call__` runs in the worker's listener thread until `stopping` is set, setting
    `wake` on every NOTIFY and reconnecting quietly when Postgres goes away.
    """

    def __init__(self, database_url: str, *, reconnect_s: float) -> None:
        self.url = database_url.replace("postgresql+psycopg://", "postgresql://", 1)
        self.reconnect_s = reconnect_s

    def __call__(self, wake: threading.Event, stopping: threading.Event) -> None:
        while not stopping.is_set():
            try:
                with psycopg.connect(
                    self.url,
                    autocommit=True,
                    connect_timeout=10,
                    application_name=f"mirror-listen-{os.getpid()}",
                ) as conn:
                    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    while not stopping.is_set():
                        # A short timeout: the loop's exit joins this thread, and a burst
                        # run should not wait out a long one (bench/job.py).
                        for _ in conn.notifies(timeout=_LISTEN_TICK_S, stop_after=1):
                            wake.set()
            except psycopg.Error as error:
                log.debug("listener reconnecting: %s", error)
                stopping.wait(self.reconnect_s)
