"""MIRROR_JELLYFIN_MAX_DOWNLOADS behind PgBouncer's transaction pooling: slots as leased rows.

Session advisory locks (mirror.db.download_slots) need a connection that is one session
for the whole download; through PgBouncer in transaction mode the next statement may run
on another server connection, where the lock is not held, and nothing frees it. Here a
slot is a row of `media_mirror.download_slots` (slot 0..N-1) held until `expires_at`:

- taken in one statement that inserts the first slot without a live row, or takes over
  one whose lease has expired (two takers of one slot: the loser's ON CONFLICT finds
  the winner's live lease and takes nothing, then tries the next slot);
- renewed by its holder every heartbeat interval for another stale timeout; a holder
  that finds its row gone or taken stops its download (transient error), as it would on
  losing its advisory lock;
- deleted at the end of the download. A holder that dies keeps its slot until the lease
  runs out (a stale timeout), not a moment less: unlike a lock on a connection, a row
  cannot know its holder is gone.

Every statement is one short transaction on the worker's pool: no session state, no
connection held while downloading. Waiters poll every second (no LISTEN through
PgBouncer's transaction pooling).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Iterator

from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

from mirror.db.engine import describe_database_error
from mirror.db.schema import SCHEMA
from mirror.domain.errors import TransientError
from mirror.domain.progress import AbortSignal, ProgressCallback
from mirror.pipeline.download_gate import waiting_for_slot

log = logging.getLogger("mirror.download_slots")

_TABLE = f"{SCHEMA}.download_slots"
# How long a waiter sleeps between tries, and how often it checks its abort meanwhile.
_RETRY_S = 1.0
_ABORT_TICK_S = 0.1

TAKE_FREE_SLOT = text(
    f"""
    WITH free AS (
        SELECT s AS slot FROM generate_series(0, :limit - 1) AS s
        WHERE NOT EXISTS (
            SELECT 1 FROM {_TABLE} AS d WHERE d.slot = s AND d.expires_at > now()
        )
        ORDER BY s LIMIT 1
    )
    INSERT INTO {_TABLE} AS d (slot, lease_token, job_id, holder, expires_at)
    SELECT slot, :token, :job_id, :holder, now() + make_interval(secs => :lease_s) FROM free
    ON CONFLICT (slot) DO UPDATE
        SET lease_token = excluded.lease_token, job_id = excluded.job_id,
            holder = excluded.holder, expires_at = excluded.expires_at
        WHERE d.expires_at <= now()
    RETURNING slot
    """
)
COUNT_SLOTS_IN_USE = text(
    f"SELECT count(*) FROM {_TABLE} WHERE expires_at > now() AND slot < :limit"
)
RENEW_SLOT = text(
    f"""
    UPDATE {_TABLE} SET expires_at = now() + make_interval(secs => :lease_s)
    WHERE slot = :slot AND lease_token = :token
    """
)
RELEASE_SLOT = text(f"DELETE FROM {_TABLE} WHERE slot = :slot AND lease_token = :token")


class LeasedDownloadSlots:
    """The `DownloadGate` of a capped deployment behind PgBouncer: `limit` leased rows."""

    def __init__(
        self,
        engine: Engine,
        limit: int,
        *,
        holder: str,
        lease_s: float,
        renew_interval_s: float,
    ) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self.engine = engine
        self.limit = limit
        self.holder = holder
        self.lease_s = lease_s
        self.renew_interval_s = renew_interval_s

    @contextlib.contextmanager
    def download_slot(
        self, job_id: uuid.UUID, *, on_progress: ProgressCallback, abort: AbortSignal
    ) -> Iterator[None]:
        """Hold a slot for the block; wait for one first, reporting `waiting`."""
        token = uuid.uuid4()
        slot = self._wait_for_slot(job_id, token, on_progress, abort)
        log.debug("job %s holds download slot %d (leased)", job_id, slot)
        stop = threading.Event()
        renewer = threading.Thread(
            target=self._keep_slot,
            args=(slot, token, stop, abort),
            name=f"download-slot-{job_id}",
            daemon=True,
        )
        renewer.start()
        try:
            yield
        finally:
            stop.set()
            renewer.join()
            self._release(slot, token)

    def _wait_for_slot(
        self,
        job_id: uuid.UUID,
        token: uuid.UUID,
        on_progress: ProgressCallback,
        abort: AbortSignal,
    ) -> int:
        take = {
            "limit": self.limit,
            "token": token,
            "job_id": job_id,
            "holder": self.holder,
            "lease_s": self.lease_s,
        }
        try:
            while True:
                abort.raise_if_set()
                with self.engine.begin() as conn:
                    slot = conn.execute(TAKE_FREE_SLOT, take).scalar()
                if slot is not None:
                    return int(slot)
                with self.engine.connect() as conn:
                    in_use = int(conn.execute(COUNT_SLOTS_IN_USE, take).scalar() or 0)
                if in_use < self.limit:
                    continue  # lost a race for a free slot: the next one may be free
                on_progress(waiting_for_slot(in_use, self.limit))
                abort.wait(_RETRY_S)
        except SQLAlchemyError as error:
            abort.raise_if_set()
            raise _unavailable("lost Postgres while waiting for a download slot", error) from None

    def _keep_slot(
        self, slot: int, token: uuid.UUID, stop: threading.Event, abort: AbortSignal
    ) -> None:
        """Renew the lease every interval; stop the download once it is lost.

        A failed renewal (Postgres away) is tried again next interval: the lease still
        holds until it expires, and only then is the slot lost.
        """
        renewed = time.monotonic()
        params = {"slot": slot, "token": token, "lease_s": self.lease_s}
        while not stop.wait(self.renew_interval_s):
            try:
                with self.engine.begin() as conn:
                    held = conn.execute(RENEW_SLOT, params).rowcount == 1
            except SQLAlchemyError as error:
                if time.monotonic() - renewed < self.lease_s:
                    log.warning("could not renew download slot %d: %s", slot, error)
                    continue
                if not stop.is_set():
                    abort.trigger(_unavailable("lost the download slot", error))
                return
            if not held:
                if not stop.is_set():
                    abort.trigger(TransientError("lost the download slot: its lease expired"))
                return
            renewed = time.monotonic()

    def _release(self, slot: int, token: uuid.UUID) -> None:
        """Free the slot now (else it frees itself when the lease runs out)."""
        try:
            with self.engine.begin() as conn:
                conn.execute(RELEASE_SLOT, {"slot": slot, "token": token})
        except SQLAlchemyError as error:
            log.warning(
                "could not release download slot %d (its lease will expire): %s", slot, error
            )


def _unavailable(what: str, error: SQLAlchemyError) -> TransientError:
    """A transient error for the job (its download stops and it goes back to the queue),
    with the driver's first line (never a password)."""
    return TransientError(f"{what}: {describe_database_error(error)}")
