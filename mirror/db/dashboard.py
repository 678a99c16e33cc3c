"""Reads behind the dashboard and the JSON API, each served by an index (fast at 1M rows).

Counts per status come from the running totals (`counters`); pages of jobs use keyset
pagination over `(created_at, id)` (ix_jobs_created, ix_jobs_status_created) so page
1000 costs what page 1 does; recent failures and the last hour's throughput read
partial indexes of failed jobs and done attempts. Actions go through JobRepository.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, text

from mirror.db.counters import count_due, fold, read_totals
from mirror.db.engine import raises_unavailable
from mirror.db.schema import ATTEMPTS as _ATTEMPTS
from mirror.db.schema import JOBS as _JOBS
from mirror.db.titles import TITLE_MATCHES, like_pattern
from mirror.domain.jobs import JobRecord

_COLUMNS = ", ".join(JobRecord.__slots__)


class BadCursor(ValueError):
    """A `cursor` the API did not hand out."""


@dataclass(frozen=True, slots=True)
class Overview:
    """The figures at the top of the dashboard."""

    jobs_by_status: dict[str, int]
    due: int
    oldest_due_age_s: float
    done_last_hour: int
    bytes_downloaded_last_hour: int
    bytes_uploaded_last_hour: int
    running: list[JobRecord]
    failures: list[JobRecord]
    now: datetime


def encode_cursor(record: JobRecord) -> str:
    raw = f"{record.created_at.isoformat()}|{record.id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        created, _, job_id = raw.partition("|")
        return datetime.fromisoformat(created), uuid.UUID(job_id)
    except (ValueError, UnicodeDecodeError):
        raise BadCursor("cursor is not one this API handed out") from None


@raises_unavailable
class DashboardQueries:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def overview(self, *, running_limit: int = 200, failures_limit: int = 10) -> Overview:
        """Everything the dashboard shows, in one read-only snapshot."""
        fold(self.engine)
        with self.engine.connect() as conn:
            conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            totals = read_totals(conn)
            due = count_due(conn)
            hour = conn.execute(
                text(
                    f"""SELECT count(*) AS n, COALESCE(sum(bytes_downloaded), 0) AS down,
                        COALESCE(sum(bytes_uploaded), 0) AS up FROM {_ATTEMPTS}
                        WHERE outcome = 'done' AND ended_at > now() - interval '1 hour'"""
                )
            ).one()
            running = _records(
                conn,
                f"SELECT {_COLUMNS} FROM {_JOBS} WHERE status = 'processing' "
                "ORDER BY taken_at LIMIT :limit",
                {"limit": running_limit},
            )
            failures = _records(
                conn,
                f"SELECT {_COLUMNS} FROM {_JOBS} WHERE status = 'failed' "
                "ORDER BY finished_at DESC NULLS LAST LIMIT :limit",
                {"limit": failures_limit},
            )
        return Overview(
            jobs_by_status=totals.jobs_by_status,
            due=due.count,
            oldest_due_age_s=due.oldest_age_s,
            done_last_hour=int(hour.n),
            bytes_downloaded_last_hour=int(hour.down),
            bytes_uploaded_last_hour=int(hour.up),
            running=running,
            failures=failures,
            now=due.now,
        )

    def page(
        self,
        *,
        status: str | None,
        limit: int,
        cursor: str | None = None,
        search: str | None = None,
    ) -> tuple[list[JobRecord], str | None]:
        """Newest first; the cursor of the next page, None on the last. `search`: only
        jobs whose series or item name contains it (the title's trigram index)."""
        after = decode_cursor(cursor) if cursor else None
        where = ["TRUE"]
        params: dict[str, Any] = {"limit": limit + 1}
        if status is not None:
            where.append("status = :status")
            params["status"] = status
        if search is not None:
            where.append(TITLE_MATCHES)
            params["pattern"] = like_pattern(search)
        if after is not None:
            where.append("(created_at, id) < (:created, :id)")
            params["created"], params["id"] = after
        with self.engine.connect() as conn:
            records = _records(
                conn,
                f"SELECT {_COLUMNS} FROM {_JOBS} WHERE {' AND '.join(where)} "
                "ORDER BY created_at DESC, id DESC LIMIT :limit",
                params,
            )
        if len(records) > limit:
            return records[:limit], encode_cursor(records[limit - 1])
        return records, None

    def search(self, query: str, *, limit: int = 50) -> list[JobRecord]:
        """Jobs whose item id starts with `query` (dashes and case ignored), else whose
        series or item name contains it (any case), over all jobs: the id through
        ix_jobs_item_created, the title through its trigram index (mirror.db.titles)."""
        hexed = query.replace("-", "").strip().lower()
        with self.engine.connect() as conn:
            if hexed and all(c in "0123456789abcdef" for c in hexed) and len(hexed) >= 6:
                by_id = _records(
                    conn,
                    f"SELECT {_COLUMNS} FROM {_JOBS} WHERE item_id >= :lo AND item_id <= :hi "
                    "ORDER BY created_at DESC LIMIT :limit",
                    {"lo": hexed, "hi": hexed + "g", "limit": limit},
                )
                if by_id:
                    return by_id
            return _records(
                conn,
                f"SELECT {_COLUMNS} FROM {_JOBS} WHERE {TITLE_MATCHES} "
                "ORDER BY created_at DESC LIMIT :limit",
                {"pattern": like_pattern(query), "limit": limit},
            )


def _records(conn: Connection, sql: str, params: dict[str, Any]) -> list[JobRecord]:
    return [JobRecord(**dict(row._mapping)) for row in conn.execute(text(sql), params)]
