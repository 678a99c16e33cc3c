"""MIRROR_JELLYFIN_MAX_DOWNLOADS in Postgres: N session advisory locks are N slots.

A download holds one of the keys (SLOT_LOCK_CLASS, 0..N-1) on a connection of its own,
outside any transaction, for as long as it runs. Why locks on a connection, and not a
count of rows: a slot must free itself when its holder can no longer use it.

- the worker dies (`kill -9`, OOM, a crashed host): its connection closes and Postgres
  drops the lock at once, not a stale timeout later;
- the worker is paused (SIGSTOP, a frozen VM) or cut off: the connection is opened with
  `idle_session_timeout` = the stale timeout, and the holder pings it every heartbeat
  interval, so a holder silent for a stale timeout is disconnected by Postgres itself
  and its slot goes to the next job (by then the job's lease has lapsed too);
- the holder finds its slot connection gone (a Postgres restart, the timeout above):
  it stops its download (transient error: back to the queue with backoff) rather than
  download without a slot.

Waiters poll the keys, woken early by a NOTIFY on release. Every worker must be given
the same N (a worker told 3 would also use key 2). Behind PgBouncer's transaction pooling
(MIRROR_PGBOUNCER=transaction) a connection is no session, and mirror.db.slot_leases
keeps the slots as leased rows instead.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import uuid
from collections.abc import Iterator

import psycopg
from psycopg.rows import TupleRow

from mirror.db.engine import describe_database_error
from mirror.domain.errors import TransientError
from mirror.domain.progress import AbortSignal, ProgressCallback
from mirror.pipeline.download_gate import waiting_for_slot

log = logging.getLogger("mirror.download_slots")

# The first key of every slot lock ('mirr' in ASCII); the second is the slot number.
SLOT_LOCK_CLASS = 0x6D697272
SLOT_CHANNEL = "media_mirror_download_slots"
# How long a waiter sleeps between tries when no NOTIFY wakes it (a release on a dead
# connection sends none), and how often it checks its abort signal meanwhile.
_RETRY_S = 1.0
_ABORT_TICK_S = 0.1

TAKE_FREE_SLOT = """
SELECT slot FROM generate_series(0, %(limit)s - 1) AS slot
WHERE pg_try_advisory_lock(%(class)s::int4, slot) LIMIT 1
"""
COUNT_SLOTS_IN_USE = """
SELECT count(*) FROM pg_locks
WHERE locktype = 'advisory' AND granted
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND classid = %(class)s::int4::oid AND objsubid = 2 AND objid < %(limit)s::int4::oid
"""
RELEASE_SLOT = "SELECT pg_advisory_unlock(%(class)s::int4, %(slot)s::int4)"
PING = "SELECT 1"

_Conn = psycopg.Connection[TupleRow]


class DownloadSlots:
    """The `DownloadGate` of a capped deployment: `limit` slots shared through Postgres."""

    def __init__(
        self,
        database_url: str,
        limit: int,
        *,
        hold_timeout_s: float,
        ping_interval_s: float,
    ) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self.url = database_url.replace("postgresql+psycopg://", "postgresql://", 1)
        self.limit = limit
        self.hold_timeout_s = hold_timeout_s
        self.ping_interval_s = ping_interval_s

    @contextlib.contextmanager
    def download_slot(
        self, job_id: uuid.UUID, *, on_progress: ProgressCallback, abort: AbortSignal
    ) -> Iterator[None]:
        """Hold a slot for the block; wait for one first, reporting `waiting`."""
        conn = self._connect()
        try:
            slot = self._wait_for_slot(conn, on_progress, abort)
            log.debug("job %s holds download slot %d", job_id, slot)
            stop = threading.Event()
            pinger = threading.Thread(
                target=self._keep_slot,
                args=(conn, stop, abort),
                name=f"download-slot-{job_id}",
                daemon=True,
            )
            pinger.start()
            try:
                yield
            finally:
                stop.set()
                pinger.join()
                self._release(conn, slot)
        finally:
            conn.close()  # drops the lock too, whatever happened above

    def _connect(self) -> _Conn:
        timeout_ms = max(1000, int(self.hold_timeout_s * 1000))
        try:
            conn = psycopg.connect(
                self.url,
                autocommit=True,  # session locks, never an open transaction
                connect_timeout=10,
                application_name=f"mirror-download-slot-{os.getpid()}",
            )
        except psycopg.Error as error:
            raise _unavailable("cannot connect to Postgres for a download slot", error) from None
        try:
            # A SET, not a startup `options`: PgBouncer (session pooling) refuses those.
            conn.execute(f"SET idle_session_timeout = {timeout_ms}")
        except psycopg.Error as error:
            conn.close()
            raise _unavailable("cannot connect to Postgres for a download slot", error) from None
        return conn

    def _wait_for_slot(
        self,
        conn: _Conn,
        on_progress: ProgressCallback,
        abort: AbortSignal,
    ) -> int:
        params = {"class": SLOT_LOCK_CLASS, "limit": self.limit}
        listening = False
        try:
            while True:
                abort.raise_if_set()
                row = conn.execute(TAKE_FREE_SLOT, params).fetchone()
                if row is not None:
                    return int(row[0])
                if not listening:
                    conn.execute(f"LISTEN {SLOT_CHANNEL}")
                    listening = True
                    continue  # a slot freed before LISTEN sent no wake-up we could see
                in_use = conn.execute(COUNT_SLOTS_IN_USE, params).fetchone()
                on_progress(waiting_for_slot(int(in_use[0]) if in_use else 0, self.limit))
                self._sleep_until_woken(conn, abort)
        except psycopg.Error as error:
            abort.raise_if_set()
            raise _unavailable("lost Postgres while waiting for a download slot", error) from None
        finally:
            if listening:
                with contextlib.suppress(psycopg.Error):
                    conn.execute(f"UNLISTEN {SLOT_CHANNEL}")

    @staticmethod
    def _sleep_until_woken(conn: _Conn, abort: AbortSignal) -> None:
        """Until a NOTIFY says a slot was released, _RETRY_S passes, or `abort` fires."""
        waited = 0.0
        while waited < _RETRY_S and not abort.is_set():
            for _ in conn.notifies(timeout=_ABORT_TICK_S, stop_after=1):
                return
            waited += _ABORT_TICK_S

    def _keep_slot(self, conn: _Conn, stop: threading.Event, abort: AbortSignal) -> None:
        """Ping the slot's connection so Postgres' idle timeout spares a live holder."""
        while not stop.wait(self.ping_interval_s):
            try:
                conn.execute(PING)
            except psycopg.Error as error:
                if not stop.is_set():
                    abort.trigger(_unavailable("lost the download slot", error))
                return

    @staticmethod
    def _release(conn: _Conn, slot: int) -> None:
        """Unlock and wake the waiters (closing the connection would only unlock)."""
        with contextlib.suppress(psycopg.Error):
            conn.execute(RELEASE_SLOT, {"class": SLOT_LOCK_CLASS, "slot": slot})
            conn.execute(f"NOTIFY {SLOT_CHANNEL}")


def _unavailable(what: str, error: psycopg.Error) -> TransientError:
    """A transient error for the job (its download stops and it goes back to the queue),
    with the driver's first line (never a password)."""
    return TransientError(f"{what}: {describe_database_error(error)}")
