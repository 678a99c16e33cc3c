"""The fence and the shared pieces of the job statements: rows to records, NOTIFY.

Every statement that changes a claimed job is fenced by its `lease_token`: it changes
the row only while that attempt holds it, and otherwise says why (cancelled under it, or
the lease is lost), so a worker that lost its job can never change it again.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from sqlalchemy import Connection, Engine, text

from mirror.db.schema import JOBS as _JOBS
from mirror.db.schema import NOTIFY_CHANNEL
from mirror.domain.jobs import Fence, JobRecord, Status

JOB_COLUMNS = ", ".join(JobRecord.__slots__)


def record_of(row: Any) -> JobRecord:
    return JobRecord(**dict(row._mapping))


def as_json(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value)


def notify_workers(conn: Connection) -> None:
    """Wake idle workers (LISTEN); delivered when the transaction commits."""
    conn.execute(text("SELECT pg_notify(:channel, '')"), {"channel": NOTIFY_CHANNEL})


def fenced_update(
    engine: Engine,
    job_id: uuid.UUID,
    token: uuid.UUID,
    assignments: str,
    params: dict[str, Any],
    *,
    notify: bool = False,
    done_is_ok: bool = False,
) -> Fence:
    """One UPDATE that only the attempt holding `token` can make, or why it could not."""
    with engine.begin() as conn:
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
            return why_fenced(conn, job_id, token, done_is_ok=done_is_ok)
        if notify:
            notify_workers(conn)
        return Fence.OK


def why_fenced(
    conn: Connection, job_id: uuid.UUID, token: uuid.UUID, *, done_is_ok: bool = False
) -> Fence:
    """After a fenced statement changed nothing: cancelled under us, or lease lost
    (or, with `done_is_ok`, already done by this very attempt)."""
    row = conn.execute(
        text(f"SELECT status, lease_token FROM {_JOBS} WHERE id = :id"), {"id": job_id}
    ).first()
    if row is not None and row.lease_token == token:
        if row.status == Status.CANCELLED:
            return Fence.CANCELLED
        if done_is_ok and row.status == Status.DONE:
            return Fence.OK
    return Fence.LEASE_LOST
