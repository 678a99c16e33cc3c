"""What people (and the webhook, the sweep) do to the queue: enqueue, cancel, retry."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import asdict

from sqlalchemy import Connection, Engine, text

from mirror.db.engine import raises_unavailable
from mirror.db.fencing import JOB_COLUMNS, notify_workers, record_of
from mirror.db.job_reads import get_job
from mirror.db.removals import restore_on
from mirror.db.schema import JOBS as _JOBS
from mirror.db.titles import TITLE_COLUMNS, TITLE_INTEGERS, record_titles
from mirror.domain.item import ItemTitle, normalize_item_id
from mirror.domain.jobs import Enqueued, JobRecord, JobStateError, Status

_NO_TITLE = ItemTitle()
_TITLES = ", ".join(TITLE_COLUMNS)
# A new job starts with the facts given, else what the item's newest job knew (a re-mirror).
_TITLE_VALUES = ", ".join(
    f"COALESCE(CAST(:{column} AS {'integer' if column in TITLE_INTEGERS else 'text'}), "
    f"newest.{column})"
    for column in TITLE_COLUMNS
)


@raises_unavailable
class JobIntake:
    """Enqueue, cancel, retry: each method is one short transaction."""

    engine: Engine

    def enqueue(
        self,
        item_ids: Iterable[str],
        *,
        priority: int = 0,
        max_attempts: int = 3,
        skip_mirrored: bool = False,
        titles: Mapping[str, ItemTitle] | None = None,
    ) -> list[Enqueued]:
        """One job per item unless it has an active one (returned as is).

        `titles` (by item id): what the caller knows of each item; new jobs start with it
        and the item's existing jobs (done ones too) take it (mirror.db.titles).

        `skip_mirrored` (library sweeps, webhook): items with a `done` job are skipped
        and not returned. Raises ValueError for a malformed id before inserting anything.
        An item marked removed whose objects are still there is back: its jobs are done
        again first (mirror.db.removals), so a sweep or ItemAdded keeps its mirror.
        """
        normalized = [normalize_item_id(raw) for raw in item_ids]
        known = {normalize_item_id(raw): title for raw, title in (titles or {}).items()}
        results: list[Enqueued] = []
        with self.engine.begin() as conn:
            restore_on(conn, normalized)
            record_titles(conn, known)
            for item_id in dict.fromkeys(normalized):
                title = known.get(item_id, _NO_TITLE)
                result = self._enqueue_one(
                    conn, item_id, priority, max_attempts, skip_mirrored, title
                )
                if result is not None:
                    results.append(result)
            if any(r.created for r in results):
                notify_workers(conn)
        return results

    def _enqueue_one(
        self,
        conn: Connection,
        item_id: str,
        priority: int,
        max_attempts: int,
        skip_mirrored: bool,
        title: ItemTitle,
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
                    INSERT INTO {_JOBS} (item_id, priority, max_attempts, {_TITLES})
                    SELECT :item_id, :priority, :max_attempts, {_TITLE_VALUES}
                    FROM (SELECT 1) AS one LEFT JOIN LATERAL (
                        SELECT * FROM {_JOBS} WHERE item_id = :item_id
                        ORDER BY created_at DESC LIMIT 1
                    ) AS newest ON TRUE
                    WHERE TRUE {mirrored_guard}
                    ON CONFLICT (item_id) WHERE status IN ('new', 'processing') DO NOTHING
                    RETURNING {JOB_COLUMNS}
                    """
                ),
                {
                    "item_id": item_id,
                    "priority": priority,
                    "max_attempts": max_attempts,
                    **asdict(title),
                },
            ).first()
            if row is not None:
                return Enqueued(record_of(row), created=True)
            existing = conn.execute(
                text(
                    f"SELECT {JOB_COLUMNS} FROM {_JOBS} "
                    "WHERE item_id = :item_id AND status IN ('new', 'processing')"
                ),
                {"item_id": item_id},
            ).first()
            if existing is not None:
                return Enqueued(record_of(existing), created=False)
            if skip_mirrored:
                return None
        raise RuntimeError(f"could not enqueue item {item_id}: its active job keeps changing")

    def cancel(self, job_id: uuid.UUID) -> JobRecord:
        """Stop a queued or running job; a running worker notices at its next beat."""
        with self.engine.begin() as conn:
            row = conn.execute(
                text(
                    f"""
                    UPDATE {_JOBS}
                    SET status = 'cancelled', finished_at = now(), updated_at = now()
                    WHERE id = :id AND status IN ('new', 'processing')
                    RETURNING {JOB_COLUMNS}
                    """
                ),
                {"id": job_id},
            ).first()
            if row is not None:
                return record_of(row)
            current = get_job(conn, job_id)
            raise JobStateError(f"job {job_id} is already {current.status}; nothing to cancel")

    def retry(self, job_id: uuid.UUID) -> JobRecord:
        """Queue a failed or cancelled job again with a fresh attempt budget."""
        with self.engine.begin() as conn:
            current = get_job(conn, job_id)
            if current.status not in (Status.FAILED, Status.CANCELLED):
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
                    RETURNING {JOB_COLUMNS}
                    """
                ),
                {"id": job_id},
            ).first()
            if row is None:
                raise JobStateError(f"job {job_id} changed while retrying it; try again")
            notify_workers(conn)
            return record_of(row)
