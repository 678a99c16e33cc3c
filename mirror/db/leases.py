"""The life of a lease: the claim, the attempt's heartbeat, and the reaper of stale ones.

Postgres' `now()` is the only clock for job times, so workers on hosts with skewed
clocks still agree on what is stale. The fleet's row (`mirror pause`) is read in the
same statements: a claim takes nothing unless the fleet runs, and a heartbeat answers
`PAUSED` when running jobs must go back to the queue.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import Engine, text

from mirror.db.engine import raises_unavailable
from mirror.db.fencing import as_json, notify_workers, record_of, why_fenced
from mirror.db.schema import ATTEMPTS as _ATTEMPTS
from mirror.db.schema import FLEET as _FLEET
from mirror.db.schema import JOBS as _JOBS
from mirror.domain.jobs import Fence, FleetMode, JobRecord, Lease, Rescued, Status


@raises_unavailable
class JobLeases:
    """Claim, heartbeat, reap: each method is one short transaction."""

    engine: Engine

    def claim_next(self, worker_id: str) -> Lease | None:
        """Take the next claimable job in one statement; None when nothing is due."""
        with self.engine.begin() as conn:
            row = conn.execute(
                text(
                    f"""
                    WITH next AS (
                        SELECT id FROM {_JOBS}
                        WHERE status = 'new' AND run_after <= now()
                          AND NOT EXISTS (SELECT 1 FROM {_FLEET} WHERE mode <> 'running')
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
        job = record_of(row)
        assert job.lease_token is not None
        return Lease(job=job, token=job.lease_token)

    def heartbeat(
        self, job_id: uuid.UUID, token: uuid.UUID, progress: dict[str, Any] | None
    ) -> Fence:
        """Record a sign of life (and the latest progress, if given) of the attempt;
        `PAUSED` (written all the same) when the fleet is paused."""
        with self.engine.begin() as conn:
            row = conn.execute(
                text(
                    f"""
                    UPDATE {_JOBS}
                    SET heartbeat_at = now(),
                        heartbeat_data = COALESCE(CAST(:progress AS jsonb), heartbeat_data),
                        updated_at = now()
                    WHERE id = :id AND status = 'processing' AND lease_token = :token
                    RETURNING (SELECT mode FROM {_FLEET}) AS fleet_mode
                    """
                ),
                {"id": job_id, "token": token, "progress": as_json(progress)},
            ).first()
            if row is None:
                return why_fenced(conn, job_id, token)
        return Fence.PAUSED if row.fleet_mode == FleetMode.PAUSED else Fence.OK

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
            if any(row.status == Status.NEW for row in rows):
                notify_workers(conn)
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
