"""`JobRepository`: every SQL statement on the job table, named after what it does.

Postgres' `now()` is the only clock for job times, so workers on hosts with skewed
clocks still agree on what is stale. Every statement that changes a claimed job is
fenced by its `lease_token`: a worker that lost its job can never change it again.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, Engine, text

from mirror.db.engine import raises_unavailable
from mirror.db.records import (
    Enqueued,
    Fence,
    JobNotFound,
    JobRecord,
    JobStateError,
    Lease,
    Rescued,
)
from mirror.db.schema import ATTEMPTS as _ATTEMPTS
from mirror.db.schema import JOBS as _JOBS
from mirror.db.schema import NOTIFY_CHANNEL
from mirror.item import normalize_item_id

__all__ = [
    "NOTIFY_CHANNEL",
    "Enqueued",
    "Fence",
    "JobNotFound",
    "JobRecord",
    "JobRepository",
    "JobStateError",
    "Lease",
    "Rescued",
]

# A wait for Jellyfin's probe or for disk space grows to this; a library scan can take
# about this long, and a longer wait would only hide that the item is ready.
NOT_READY_MAX_DELAY_S = 3600.0


_JOB_COLUMNS = ", ".join(JobRecord.__slots__)


def _record(row: Any) -> JobRecord:
    return JobRecord(**dict(row._mapping))


@raises_unavailable
class JobRepository:
    """The queue's statements; each method is one short transaction."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # -- enqueue -----------------------------------------------------------------------

    def enqueue(
        self,
        item_ids: Iterable[str],
        *,
        priority: int = 0,
        max_attempts: int = 3,
        skip_mirrored: bool = False,
    ) -> list[Enqueued]:
        """One job per item unless it has an active one (returned as is).

        `skip_mirrored` (library sweeps, webhook): items with a `done` job are skipped
        and not returned. Raises ValueError for a malformed id before inserting anything.
        """
        normalized = [normalize_item_id(raw) for raw in item_ids]
        results: list[Enqueued] = []
        with self.engine.begin() as conn:
            for item_id in dict.fromkeys(normalized):
                result = self._enqueue_one(conn, item_id, priority, max_attempts, skip_mirrored)
                if result is not None:
                    results.append(result)
            if any(r.created for r in results):
                _notify(conn)
        return results

    def _enqueue_one(
        self,
        conn: Connection,
        item_id: str,
        priority: int,
        max_attempts: int,
        skip_mirrored: bool,
    ) -> Enqueued | None:
        mirrored_guard = (
            f"AND NOT EXISTS (SELECT 1 FROM {_JOBS} WHERE item_id = :item_id AND status = 'done')"
            if skip_mirrored
            else ""
        )
        # The loop covers the race where the active job finishes between our INSERT
        # conflicting with it and our SELECT looking for it.
        for _ in range(5):
            row = conn.execute(
                text(
                    f"""
                    INSERT INTO {_JOBS} (item_id, priority, max_attempts)
                    SELECT :item_id, :priority, :max_attempts
                    WHERE TRUE {mirrored_guard}
                    ON CONFLICT (item_id) WHERE status IN ('new', 'processing') DO NOTHING
                    RETURNING {_JOB_COLUMNS}
                    """
                ),
                {"item_id": item_id, "priority": priority, "max_attempts": max_attempts},
            ).first()
            if row is not None:
                return Enqueued(_record(row), created=True)
            existing = conn.execute(
                text(
                    f"SELECT {_JOB_COLUMNS} FROM {_JOBS} "
                    "WHERE item_id = :item_id AND status IN ('new', 'processing')"
                ),
                {"item_id": item_id},
            ).first()
            if existing is not None:
                return Enqueued(_record(existing), created=False)
            if skip_mirrored:
                return None
        raise RuntimeError(f"could not enqueue item {item_id}: its active job keeps changing")

    # -- claim and the running attempt ----------------------------------------------------

    def claim_next(self, worker_id: str) -> Lease | None:
        """Take the next claimable job in one statement; None when nothing is due."""
        with self.engine.begin() as conn:
            row = conn.execute(
                text(
                    f"""
                    WITH next AS (
                        SELECT id FROM {_JOBS}
                        WHERE status = 'new' AND run_after <= now()
                        ORDER BY priority DESC, run_after
                        LIMIT 1
                        FOR UPDATE SKIP LOCKED
                    ),
                    claimed AS (
                        UPDATE {_JOBS} AS j
                        SET status = 'processing',
                            worker_id = :worker_id,
                            lease_token = gen_random_uuid(),
                            taken_at = now(),
                            heartbeat_at = now(),
                            heartbeat_data = NULL,
                            attempts = j.attempts + 1,
                            updated_at = now()
                        FROM next
                        WHERE j.id = next.id
                        RETURNING {", ".join("j." + c for c in JobRecord.__slots__)}
                    ),
                    history AS (
                        INSERT INTO {_ATTEMPTS}
                            (lease_token, job_id, attempt, worker_id, claimed_at)
                        SELECT lease_token, id, attempts, worker_id, taken_at FROM claimed
                    )
                    SELECT * FROM claimed
                    """
                ),
                {"worker_id": worker_id},
            ).first()
        if row is None:
            return None
        job = _record(row)
        assert job.lease_token is not None
        return Lease(job=job, token=job.lease_token)

    def heartbeat(
        self, job_id: uuid.UUID, token: uuid.UUID, progress: dict[str, Any] | None
    ) -> Fence:
        """Record a sign of life (and the latest progress, if given) of the attempt."""
        return self._fenced_update(
            job_id,
            token,
            """heartbeat_at = now(),
               heartbeat_data = COALESCE(CAST(:progress AS jsonb), heartbeat_data)""",
            {"progress": _json(progress)},
        )

    def mark_done(
        self,
        job_id: uuid.UUID,
        token: uuid.UUID,
        *,
        video_key: str,
        audio_keys: Sequence[dict[str, Any]],
        video: dict[str, Any] | None = None,
        skipped_streams: Sequence[dict[str, Any]] | None = None,
        source: dict[str, Any] | None = None,
        progress: dict[str, Any] | None = None,
        manifest_key: str | None = None,
        hls_key: str | None = None,
        subtitle_keys: Sequence[dict[str, Any]] | None = None,
    ) -> Fence:
        """Finish the attempt: outputs are in S3; record their keys, checksums and source.

        Safe to repeat: when an earlier try committed but its answer was lost (a dropped
        connection), the row is already done under this token, which counts as OK.
        """
        return self._fenced_update(
            job_id,
            token,
            """status = 'done', video_key = :video_key, audio_keys = CAST(:audio_keys AS jsonb),
               video = CAST(:video AS jsonb),
               skipped_streams = CAST(:skipped_streams AS jsonb),
               source = CAST(:source AS jsonb),
               manifest_key = :manifest_key, hls_key = :hls_key,
               subtitle_keys = CAST(:subtitle_keys AS jsonb),
               error = NULL, finished_at = now(), heartbeat_at = now(),
               heartbeat_data = COALESCE(CAST(:progress AS jsonb), heartbeat_data)""",
            {
                "video_key": video_key,
                "audio_keys": json.dumps(list(audio_keys)),
                "video": _json(video),
                "skipped_streams": json.dumps(list(skipped_streams or [])),
                "source": _json(source),
                "progress": _json(progress),
                "manifest_key": manifest_key,
                "hls_key": hls_key,
                "subtitle_keys": json.dumps(list(subtitle_keys or [])),
            },
            done_is_ok=True,
        )

    def mark_failed(self, job_id: uuid.UUID, token: uuid.UUID, error: str) -> Fence:
        """Fail now: retrying cannot help (unknown item, rejected key, corrupt media)."""
        return self._fenced_update(
            job_id,
            token,
            "status = 'failed', error = :error, finished_at = now(), heartbeat_at = now()",
            {"error": error},
        )

    def fail_or_retry(
        self, job_id: uuid.UUID, token: uuid.UUID, error: str, *, backoff_s: float
    ) -> tuple[Fence, str | None]:
        """Back to `new` after backoff_s * 2^(attempts-1), or `failed` once attempts are used up.

        Returns the fence and the status the job ended in.
        """
        with self.engine.begin() as conn:
            row = conn.execute(
                text(
                    f"""
                    UPDATE {_JOBS}
                    SET status = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'new' END,
                        error = CASE WHEN attempts >= max_attempts
                            THEN :error || ' (attempts used up: ' || attempts || ' of '
                                 || max_attempts || ')'
                            ELSE :error END,
                        finished_at = CASE WHEN attempts >= max_attempts THEN now() END,
                        run_after = now() + make_interval(
                            secs => :backoff * power(2, GREATEST(attempts - 1, 0))),
                        worker_id = NULL,
                        lease_token = NULL,
                        updated_at = now()
                    WHERE id = :id AND status = 'processing' AND lease_token = :token
                    RETURNING status
                    """
                ),
                {"id": job_id, "token": token, "error": error, "backoff": backoff_s},
            ).first()
            if row is None:
                return self._why_fenced(conn, job_id, token), None
            return Fence.OK, str(row.status)

    def release(
        self,
        job_id: uuid.UUID,
        token: uuid.UUID,
        *,
        delay_s: float = 0.0,
        note: str | None = None,
    ) -> Fence:
        """Back to `new` without using an attempt (shutdown, too little disk space)."""
        return self._fenced_update(
            job_id,
            token,
            """status = 'new',
               attempts = GREATEST(attempts - 1, 0),
               run_after = now() + make_interval(secs => :delay),
               error = COALESCE(:note, error),
               worker_id = NULL,
               lease_token = NULL""",
            {"delay": delay_s, "note": note},
            notify=True,
        )

    def release_until_ready(
        self,
        job_id: uuid.UUID,
        token: uuid.UUID,
        *,
        note: str,
        phase: str,
        first_delay_s: float,
        max_delay_s: float = NOT_READY_MAX_DELAY_S,
        give_up_after_s: float | None = None,
        gave_up: str | None = None,
    ) -> tuple[Fence, str | None]:
        """Back to `new` without using an attempt, waiting longer after each wait in a row.

        The delay is first_delay_s * 2^(earlier waits in a row), at most max_delay_s; the
        waits are counted in the attempt history (outcome `waiting` since the last other
        outcome), so they survive the claim resetting heartbeat_data. While it waits the
        job's heartbeat_data says `phase`. With give_up_after_s, a job queued longer ago
        than that fails instead, with `gave_up`. Returns the fence and the new status.
        """
        with self.engine.begin() as conn:
            row = conn.execute(
                text(
                    f"""
                    WITH streak AS (
                        SELECT count(*) AS waits FROM {_ATTEMPTS} AS a
                        WHERE a.job_id = :id AND a.outcome = 'waiting'
                          AND a.claimed_at > COALESCE(
                              (SELECT max(b.claimed_at) FROM {_ATTEMPTS} AS b
                               WHERE b.job_id = :id AND b.ended_at IS NOT NULL
                                 AND b.outcome <> 'waiting'),
                              '-infinity')
                    ),
                    fate AS (
                        SELECT streak.waits,
                               LEAST(:first * power(2, LEAST(streak.waits, 40)),
                                     GREATEST(:max_delay, :first)) AS delay,
                               CAST(:give_up AS float8) IS NOT NULL
                                 AND j.created_at
                                     < now() - make_interval(secs => CAST(:give_up AS float8))
                                 AS expired
                        FROM streak, {_JOBS} AS j WHERE j.id = :id
                    )
                    UPDATE {_JOBS} AS j
                    SET status = CASE WHEN fate.expired THEN 'failed' ELSE 'new' END,
                        attempts = CASE WHEN fate.expired THEN j.attempts
                            ELSE GREATEST(j.attempts - 1, 0) END,
                        error = CASE WHEN fate.expired THEN :gave_up ELSE :note END,
                        finished_at = CASE WHEN fate.expired THEN now() END,
                        run_after = CASE WHEN fate.expired THEN j.run_after
                            ELSE now() + make_interval(secs => fate.delay) END,
                        heartbeat_data = CASE WHEN fate.expired THEN j.heartbeat_data
                            ELSE jsonb_build_object(
                                'phase', CAST(:phase AS text), 'waits', fate.waits + 1,
                                'retry_in_s', round(CAST(fate.delay AS numeric), 1)) END,
                        heartbeat_at = now(),
                        worker_id = NULL,
                        lease_token = NULL,
                        updated_at = now()
                    FROM fate
                    WHERE j.id = :id AND j.status = 'processing' AND j.lease_token = :token
                    RETURNING j.status
                    """
                ),
                {
                    "id": job_id,
                    "token": token,
                    "note": note,
                    "phase": phase,
                    "first": first_delay_s,
                    "max_delay": max_delay_s,
                    "give_up": give_up_after_s,
                    "gave_up": gave_up or note,
                },
            ).first()
            if row is None:
                return self._why_fenced(conn, job_id, token), None
            if row.status == "new":
                _notify(conn)
            return Fence.OK, str(row.status)

    def _fenced_update(
        self,
        job_id: uuid.UUID,
        token: uuid.UUID,
        assignments: str,
        params: dict[str, Any],
        *,
        notify: bool = False,
        done_is_ok: bool = False,
    ) -> Fence:
        """One UPDATE that only the attempt holding `token` can make, or why it could not."""
        with self.engine.begin() as conn:
            updated = conn.execute(
                text(
                    f"""
                    UPDATE {_JOBS} SET {assignments}, updated_at = now()
                    WHERE id = :id AND status = 'processing' AND lease_token = :token
                    """
                ),
                {"id": job_id, "token": token, **params},
            ).rowcount
            if not updated:
                return self._why_fenced(conn, job_id, token, done_is_ok=done_is_ok)
            if notify:
                _notify(conn)
            return Fence.OK

    @staticmethod
    def _why_fenced(
        conn: Connection, job_id: uuid.UUID, token: uuid.UUID, *, done_is_ok: bool = False
    ) -> Fence:
        """After a fenced statement changed nothing: cancelled under us, or lease lost
        (or, with `done_is_ok`, already done by this very attempt)."""
        row = conn.execute(
            text(f"SELECT status, lease_token FROM {_JOBS} WHERE id = :id"), {"id": job_id}
        ).first()
        if row is not None and row.lease_token == token:
            if row.status == "cancelled":
                return Fence.CANCELLED
            if done_is_ok and row.status == "done":
                return Fence.OK
        return Fence.LEASE_LOST

    # -- reaper -------------------------------------------------------------------------

    def return_stale_to_new(self, stale_timeout_s: float) -> list[Rescued]:
        """Jobs whose worker stopped beating go back to `new` (or `failed` when out of attempts).

        One statement with SKIP LOCKED, so many reapers at once each rescue a job once.
        A rescue counts as an attempt (the claim already counted it): an item that kills
        its worker every time ends `failed` instead of looping forever.
        """
        with self.engine.begin() as conn:
            rows = conn.execute(
                text(
                    f"""
                    WITH stale AS (
                        SELECT id, worker_id, lease_token FROM {_JOBS}
                        WHERE status = 'processing'
                          AND heartbeat_at < now() - make_interval(secs => :stale)
                        FOR UPDATE SKIP LOCKED
                    ),
                    history AS (
                        UPDATE {_ATTEMPTS}
                        SET ended_at = now(), outcome = 'stale',
                            error = 'no heartbeat for over ' || :stale_text
                        WHERE lease_token IN (SELECT lease_token FROM stale) AND ended_at IS NULL
                    )
                    UPDATE {_JOBS} AS j
                    SET status = CASE WHEN j.attempts >= j.max_attempts
                            THEN 'failed' ELSE 'new' END,
                        error = 'worker ' || COALESCE(stale.worker_id, '?')
                            || ' stopped sending heartbeats (none for over '
                            || :stale_text || ')'
                            || CASE WHEN j.attempts >= j.max_attempts
                                THEN '; attempts used up (' || j.attempts || ' of '
                                     || j.max_attempts || ')'
                                ELSE '; returned to the queue' END,
                        finished_at = CASE WHEN j.attempts >= j.max_attempts THEN now() END,
                        run_after = now(),
                        worker_id = NULL,
                        lease_token = NULL,
                        updated_at = now()
                    FROM stale
                    WHERE j.id = stale.id
                    RETURNING j.id, j.item_id, j.status, j.attempts, stale.worker_id
                    """
                ),
                {"stale": stale_timeout_s, "stale_text": f"{stale_timeout_s:g}s"},
            ).all()
            if any(row.status == "new" for row in rows):
                _notify(conn)
        return [
            Rescued(
                job_id=row.id,
                item_id=row.item_id,
                status=row.status,
                attempts=row.attempts,
                previous_worker=row.worker_id,
            )
            for row in rows
        ]

    # -- people's commands ----------------------------------------------------------------

    def cancel(self, job_id: uuid.UUID) -> JobRecord:
        """Stop a queued or running job; a running worker notices at its next beat."""
        with self.engine.begin() as conn:
            row = conn.execute(
                text(
                    f"""
                    UPDATE {_JOBS}
                    SET status = 'cancelled', finished_at = now(), updated_at = now()
                    WHERE id = :id AND status IN ('new', 'processing')
                    RETURNING {_JOB_COLUMNS}
                    """
                ),
                {"id": job_id},
            ).first()
            if row is not None:
                return _record(row)
            current = self._get(conn, job_id)
            raise JobStateError(f"job {job_id} is already {current.status}; nothing to cancel")

    def retry(self, job_id: uuid.UUID) -> JobRecord:
        """Queue a failed or cancelled job again with a fresh attempt budget."""
        with self.engine.begin() as conn:
            current = self._get(conn, job_id)
            if current.status not in ("failed", "cancelled"):
                raise JobStateError(
                    f"job {job_id} is {current.status}; only failed or cancelled jobs can be "
                    "retried (use `mirror enqueue` to mirror a done item again)"
                )
            active = conn.execute(
                text(
                    f"SELECT id FROM {_JOBS} "
                    "WHERE item_id = :item_id AND status IN ('new', 'processing')"
                ),
                {"item_id": current.item_id},
            ).first()
            if active is not None:
                raise JobStateError(f"item {current.item_id} already has an active job {active.id}")
            row = conn.execute(
                text(
                    f"""
                    UPDATE {_JOBS}
                    SET status = 'new', attempts = 0, run_after = now(), finished_at = NULL,
                        worker_id = NULL, lease_token = NULL, updated_at = now()
                    WHERE id = :id AND status IN ('failed', 'cancelled')
                    RETURNING {_JOB_COLUMNS}
                    """
                ),
                {"id": job_id},
            ).first()
            if row is None:
                raise JobStateError(f"job {job_id} changed while retrying it; try again")
            _notify(conn)
            return _record(row)

    def get(self, job_id: uuid.UUID) -> JobRecord:
        with self.engine.connect() as conn:
            return self._get(conn, job_id)

    def latest_for_item(self, item_id: str) -> JobRecord:
        """The newest job of an item (`mirror show ITEM_ID`)."""
        with self.engine.connect() as conn:
            row = conn.execute(
                text(
                    f"SELECT {_JOB_COLUMNS} FROM {_JOBS} WHERE item_id = :item_id "
                    "ORDER BY created_at DESC LIMIT 1"
                ),
                {"item_id": normalize_item_id(item_id)},
            ).first()
        if row is None:
            raise JobNotFound(f"no job for item {item_id}")
        return _record(row)

    def list(self, *, status: str | None = None, limit: int = 50) -> list[JobRecord]:
        """Newest first; active jobs before finished ones so `mirror jobs` shows work first."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    f"""
                    SELECT {_JOB_COLUMNS} FROM {_JOBS}
                    WHERE (CAST(:status AS text) IS NULL OR status = :status)
                    ORDER BY (status IN ('new', 'processing')) DESC, created_at DESC
                    LIMIT :limit
                    """
                ),
                {"status": status, "limit": limit},
            ).all()
        return [_record(row) for row in rows]

    @staticmethod
    def _get(conn: Connection, job_id: uuid.UUID) -> JobRecord:
        row = conn.execute(
            text(f"SELECT {_JOB_COLUMNS} FROM {_JOBS} WHERE id = :id"), {"id": job_id}
        ).first()
        if row is None:
            raise JobNotFound(f"no job with id {job_id}")
        return _record(row)


def _json(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value)


def _notify(conn: Connection) -> None:
    """Wake idle workers (LISTEN); delivered when the transaction commits."""
    conn.execute(text("SELECT pg_notify(:channel, '')"), {"channel": NOTIFY_CHANNEL})
