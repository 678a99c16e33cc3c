"""How an attempt ends: done, failed, back to the queue with a backoff, or released.

Every statement here is fenced by the attempt's `lease_token` (mirror.db.fencing).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from sqlalchemy import Engine, text

from mirror.db.engine import raises_unavailable
from mirror.db.fencing import as_json, fenced_update, notify_workers, why_fenced
from mirror.db.schema import ATTEMPTS as _ATTEMPTS
from mirror.db.schema import JOBS as _JOBS
from mirror.domain.jobs import Fence, Mirrored, Status

# A wait for Jellyfin's probe or for disk space grows to this; a library scan can take
# about this long, and a longer wait would only hide that the item is ready.
NOT_READY_MAX_DELAY_S = 3600.0


@raises_unavailable
class JobEndStates:
    """The fenced end-of-attempt statements: each method is one short transaction."""

    engine: Engine

    def mark_done(
        self,
        job_id: uuid.UUID,
        token: uuid.UUID,
        mirrored: Mirrored,
        *,
        progress: dict[str, Any] | None = None,
    ) -> Fence:
        """Finish the attempt: outputs are in S3; record their keys, checksums and source.

        Safe to repeat: when an earlier try committed but its answer was lost (a dropped
        connection), the row is already done under this token, which counts as OK.
        """
        return fenced_update(
            self.engine,
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
                "video_key": mirrored.video_key,
                "audio_keys": json.dumps(list(mirrored.audio_keys)),
                "video": as_json(mirrored.video),
                "skipped_streams": json.dumps(list(mirrored.skipped_streams or [])),
                "source": as_json(mirrored.source),
                "progress": as_json(progress),
                "manifest_key": mirrored.manifest_key,
                "hls_key": mirrored.hls_key,
                "subtitle_keys": json.dumps(list(mirrored.subtitle_keys or [])),
            },
            done_is_ok=True,
        )

    def mark_failed(self, job_id: uuid.UUID, token: uuid.UUID, error: str) -> Fence:
        """Fail now: retrying cannot help (unknown item, rejected key, corrupt media)."""
        return fenced_update(
            self.engine,
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
                return why_fenced(conn, job_id, token), None
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
        return fenced_update(
            self.engine,
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
                return why_fenced(conn, job_id, token), None
            if row.status == Status.NEW:
                notify_workers(conn)
            return Fence.OK, str(row.status)
