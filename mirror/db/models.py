"""The job table contract as SQLAlchemy models; alembic migrations must match these.

The repository does not use these classes for queries (its SQL is written out, named
after what it does); they exist so `alembic check` can prove models and migrations agree.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    Numeric,
    SmallInteger,
    Table,
    Text,
    Uuid,
    literal_column,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from mirror.db.schema import SCHEMA, TITLE_SEARCH_TEXT

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(schema=SCHEMA, naming_convention=NAMING_CONVENTION)


class Job(Base):
    """One request to mirror one Jellyfin item; see README 'Inspecting jobs'."""

    __tablename__ = "jobs"

    id: Mapped[uuid.UUID] = mapped_column(
        Uuid, primary_key=True, server_default=text("gen_random_uuid()")
    )
    item_id: Mapped[str] = mapped_column(Text, nullable=False)
    status: Mapped[str] = mapped_column(Text, nullable=False, server_default=text("'new'"))
    priority: Mapped[int] = mapped_column(Integer, nullable=False, server_default=text("0"))
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default=text("0"))
    max_attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default=text("3"))
    run_after: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=text("now()")
    )
    worker_id: Mapped[str | None] = mapped_column(Text)
    lease_token: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    taken_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    heartbeat_data: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    video_key: Mapped[str | None] = mapped_column(Text)
    audio_keys: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONB)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=text("now()")
    )
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=text("now()")
    )
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    video: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    skipped_streams: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONB)
    source: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    manifest_key: Mapped[str | None] = mapped_column(Text)
    hls_key: Mapped[str | None] = mapped_column(Text)
    subtitle_keys: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONB)
    # When the item was found gone from Jellyfin, and when its objects were deleted
    # (after MIRROR_DELETE_GRACE); both null for an item Jellyfin has.
    removed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    objects_deleted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # What people call the item and where it sits (migration 0010; mirror.domain.item.ItemTitle).
    item_name: Mapped[str | None] = mapped_column(Text)
    item_type: Mapped[str | None] = mapped_column(Text)
    series_name: Mapped[str | None] = mapped_column(Text)
    season_number: Mapped[int | None] = mapped_column(Integer)
    episode_number: Mapped[int | None] = mapped_column(Integer)
    year: Mapped[int | None] = mapped_column(Integer)
    library_name: Mapped[str | None] = mapped_column(Text)
    series_id: Mapped[str | None] = mapped_column(Text)
    season_id: Mapped[str | None] = mapped_column(Text)
    parent_id: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        CheckConstraint(
            "status IN ('new', 'processing', 'done', 'failed', 'cancelled', 'removed')",
            name="status",
        ),
        CheckConstraint("item_id ~ '^[0-9a-f]{32}$'", name="item_id_hex32"),
        CheckConstraint("attempts >= 0 AND max_attempts >= 1", name="attempts"),
        # At most one active job per item: enqueue dedupes against this.
        Index(
            "ix_jobs_one_active_per_item",
            "item_id",
            unique=True,
            postgresql_where=text("status IN ('new', 'processing')"),
        ),
        # The claim: highest priority first, then oldest run_after, among claimable rows.
        Index(
            "ix_jobs_claim",
            literal_column("priority").desc(),
            "run_after",
            postgresql_where=text("status = 'new'"),
        ),
        # The stale scan: processing rows by heartbeat age.
        Index("ix_jobs_stale", "heartbeat_at", postgresql_where=text("status = 'processing'")),
        # `mirror show ITEM_ID` and the sweep's "already mirrored?" check.
        Index("ix_jobs_item_created", "item_id", "created_at"),
        # The dashboard's and the API's pages of jobs (keyset: created_at, id), per status.
        Index("ix_jobs_status_created", "status", "created_at", "id"),
        Index("ix_jobs_created", "created_at", "id"),
        # The dashboard's recent failures.
        Index("ix_jobs_failed_finished", "finished_at", postgresql_where=text("status = 'failed'")),
        # The purge's scan: marked items whose objects are still there.
        Index(
            "ix_jobs_removal_pending",
            "removed_at",
            postgresql_where=text("removed_at IS NOT NULL AND objects_deleted_at IS NULL"),
        ),
        # The title search: ILIKE over series and item name, a GIN trigram index where
        # pg_trgm could be created (migration 0010 falls back to a plain one).
        Index(
            "ix_jobs_title_search",
            text(TITLE_SEARCH_TEXT),
            postgresql_using="gin",
        ),
        # A deleted series' episodes (issue 25).
        Index("ix_jobs_series_id", "series_id"),
    )


class JobAttempt(Base):
    """One claim of a job and how it ended: the attempt history, and the source of metrics.

    Keyed by the attempt's lease token, so an attempt can only ever write its own row.
    """

    __tablename__ = "job_attempts"

    lease_token: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    job_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False
    )
    attempt: Mapped[int] = mapped_column(Integer, nullable=False)
    worker_id: Mapped[str] = mapped_column(Text, nullable=False)
    claimed_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=text("now()")
    )
    ended_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # done, failed, retry, released, cancelled, lease_lost, stale (rescued by a reaper)
    outcome: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    heartbeat_writes: Mapped[int | None] = mapped_column(Integer)
    bytes_downloaded: Mapped[int | None] = mapped_column(BigInteger)
    bytes_uploaded: Mapped[int | None] = mapped_column(BigInteger)
    download_s: Mapped[float | None] = mapped_column(Float)
    transcode_s: Mapped[float | None] = mapped_column(Float)
    upload_s: Mapped[float | None] = mapped_column(Float)

    __table_args__ = (
        Index("ix_job_attempts_job", "job_id", "attempt"),
        Index("ix_job_attempts_open", "claimed_at", postgresql_where=text("ended_at IS NULL")),
        # Throughput of the last hour (jobs and bytes mirrored).
        Index("ix_job_attempts_done_ended", "ended_at", postgresql_where=text("outcome = 'done'")),
    )


# Running totals as deltas appended by triggers (migration 0005) in the same transaction
# as each state change; summed by mirror/db/counters.py. No key: rows are only appended,
# then folded together.
counters = Table(
    "counters",
    Base.metadata,
    Column("name", Text, nullable=False),
    Column("label", Text, nullable=False, server_default=text("''")),
    Column("value", Numeric, nullable=False),
)


# Dashboard sessions logged out before their signed cookie expires (migration 0009);
# mirror/db/sessions.py. Rows past `expires_at` are pruned by the next logout.
ended_sessions = Table(
    "ended_sessions",
    Base.metadata,
    Column("session_id", Text, primary_key=True),
    Column("expires_at", DateTime(timezone=True), nullable=False, index=True),
)


# The fleet's one row (migration 0012; mirror/db/fleet.py): `running`, `paused` or
# `draining`, read by every claim and returned by every heartbeat.
fleet = Table(
    "fleet",
    Base.metadata,
    Column("id", SmallInteger, primary_key=True, server_default=text("1")),
    Column("mode", Text, nullable=False, server_default=text("'running'")),
    Column("changed_at", DateTime(timezone=True)),
    Column("changed_by", Text),
    Column("reason", Text),
    CheckConstraint("id = 1", name="one_row"),
    CheckConstraint("mode IN ('running', 'paused', 'draining')", name="mode"),
)


# MIRROR_JELLYFIN_MAX_DOWNLOADS slots as leased rows (migration 0011), used behind
# PgBouncer's transaction pooling: mirror/db/slot_leases.py. Past `expires_at` = free.
download_slots = Table(
    "download_slots",
    Base.metadata,
    Column("slot", Integer, primary_key=True, autoincrement=False),
    Column("lease_token", Uuid, nullable=False),
    Column("job_id", Uuid, nullable=False),
    Column("holder", Text, nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
)
