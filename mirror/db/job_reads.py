"""Reads of the job table for people: one job, an item's newest, the `mirror jobs` list."""

from __future__ import annotations

import uuid

from sqlalchemy import Connection, Engine, text

from mirror.db.engine import raises_unavailable
from mirror.db.fencing import JOB_COLUMNS, record_of
from mirror.db.schema import JOBS as _JOBS
from mirror.db.titles import TITLE_MATCHES, like_pattern
from mirror.domain.item import normalize_item_id
from mirror.domain.jobs import JobNotFound, JobRecord


@raises_unavailable
class JobReads:
    """One short read each."""

    engine: Engine

    def get(self, job_id: uuid.UUID) -> JobRecord:
        with self.engine.connect() as conn:
            return get_job(conn, job_id)

    def latest_for_item(self, item_id: str) -> JobRecord:
        """The newest job of an item (`mirror show ITEM_ID`)."""
        with self.engine.connect() as conn:
            row = conn.execute(
                text(
                    f"SELECT {JOB_COLUMNS} FROM {_JOBS} WHERE item_id = :item_id "
                    "ORDER BY created_at DESC LIMIT 1"
                ),
                {"item_id": normalize_item_id(item_id)},
            ).first()
        if row is None:
            raise JobNotFound(f"no job for item {item_id}")
        return record_of(row)

    def list(
        self, *, status: str | None = None, limit: int = 50, search: str | None = None
    ) -> list[JobRecord]:
        """Newest first; active jobs before finished ones so `mirror jobs` shows work first.

        `search`: only jobs whose series or item name contains it (any case), over all
        jobs through the title's trigram index.
        """
        where = ["(CAST(:status AS text) IS NULL OR status = :status)"]
        params: dict[str, object] = {"status": status, "limit": limit}
        if search is not None and search.strip():
            where.append(TITLE_MATCHES)
            params["pattern"] = like_pattern(search)
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    f"""
                    SELECT {JOB_COLUMNS} FROM {_JOBS}
                    WHERE {" AND ".join(where)}
                    ORDER BY (status IN ('new', 'processing')) DESC, created_at DESC
                    LIMIT :limit
                    """
                ),
                params,
            ).all()
        return [record_of(row) for row in rows]


def get_job(conn: Connection, job_id: uuid.UUID) -> JobRecord:
    row = conn.execute(
        text(f"SELECT {JOB_COLUMNS} FROM {_JOBS} WHERE id = :id"), {"id": job_id}
    ).first()
    if row is None:
        raise JobNotFound(f"no job with id {job_id}")
    return record_of(row)
