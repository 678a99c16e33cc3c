"""The attempt history (media_mirror.job_attempts): how each claim of a job ended.

The claim inserts an attempt's row and the reaper closes rows of dead attempts (both in
JobRepository's single statements); this module holds the rest: closing a row with the
attempt's own figures, and reading the history for people and metrics.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, text

from mirror.db.engine import raises_unavailable
from mirror.db.schema import ATTEMPTS as _ATTEMPTS
from mirror.domain.jobs import AttemptStats, row_json

__all__ = ["AttemptLog", "AttemptRecord"]


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    lease_token: uuid.UUID
    job_id: uuid.UUID
    attempt: int
    worker_id: str
    claimed_at: datetime
    ended_at: datetime | None
    outcome: str | None
    error: str | None
    heartbeat_writes: int | None
    bytes_downloaded: int | None
    bytes_uploaded: int | None
    download_s: float | None
    transcode_s: float | None
    upload_s: float | None

    def to_json(self) -> dict[str, Any]:
        return row_json(self)


@raises_unavailable
class AttemptLog:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def end_attempt(
        self, token: uuid.UUID, outcome: str, error: str | None, stats: AttemptStats
    ) -> bool:
        """Close this attempt's row, unless a reaper already closed it as stale."""
        with self.engine.begin() as conn:
            updated = conn.execute(
                text(
                    f"""
                    UPDATE {_ATTEMPTS}
                    SET ended_at = now(), outcome = :outcome, error = :error,
                        heartbeat_writes = :heartbeat_writes,
                        bytes_downloaded = :bytes_downloaded, bytes_uploaded = :bytes_uploaded,
                        download_s = :download_s, transcode_s = :transcode_s,
                        upload_s = :upload_s
                    WHERE lease_token = :token AND ended_at IS NULL
                    """
                ),
                {
                    "token": token,
                    "outcome": outcome,
                    "error": error,
                    "heartbeat_writes": stats.heartbeat_writes,
                    "bytes_downloaded": stats.bytes_downloaded,
                    "bytes_uploaded": stats.bytes_uploaded,
                    "download_s": stats.download_s,
                    "transcode_s": stats.transcode_s,
                    "upload_s": stats.upload_s,
                },
            ).rowcount
        return bool(updated)

    def attempts_of(self, job_id: uuid.UUID) -> list[AttemptRecord]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    f"SELECT {', '.join(AttemptRecord.__slots__)} FROM {_ATTEMPTS} "
                    "WHERE job_id = :job_id ORDER BY claimed_at, attempt"
                ),
                {"job_id": job_id},
            ).all()
        return [AttemptRecord(**dict(row._mapping)) for row in rows]
