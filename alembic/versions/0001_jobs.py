"""The job table, its indexes and the job_status view.

Revision ID: 0001
Revises:
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

SCHEMA = "media_mirror"

JOB_STATUS_VIEW = f"""
CREATE VIEW {SCHEMA}.job_status AS
SELECT
    j.id,
    j.item_id,
    j.status,
    j.heartbeat_data ->> 'phase' AS phase,
    (j.heartbeat_data ->> 'percent')::numeric AS percent,
    (j.heartbeat_data ->> 'bytes_done')::bigint AS bytes_done,
    (j.heartbeat_data ->> 'bytes_total')::bigint AS bytes_total,
    (j.heartbeat_data ->> 'frames_done')::bigint AS frames_done,
    (j.heartbeat_data ->> 'frames_total')::bigint AS frames_total,
    j.heartbeat_data ->> 'speed' AS speed,
    CASE WHEN j.status = 'processing' THEN now() - j.heartbeat_at END AS heartbeat_age,
    j.attempts,
    j.max_attempts,
    j.priority,
    j.worker_id,
    j.error,
    j.run_after,
    j.created_at,
    j.updated_at,
    j.finished_at
FROM {SCHEMA}.jobs AS j
"""


def upgrade() -> None:
    op.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    op.create_table(
        "jobs",
        sa.Column("id", sa.Uuid(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("item_id", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), server_default=sa.text("'new'"), nullable=False),
        sa.Column("priority", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("max_attempts", sa.Integer(), server_default=sa.text("3"), nullable=False),
        sa.Column(
            "run_after",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("worker_id", sa.Text(), nullable=True),
        sa.Column("lease_token", sa.Uuid(), nullable=True),
        sa.Column("taken_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("heartbeat_data", postgresql.JSONB(), nullable=True),
        sa.Column("video_key", sa.Text(), nullable=True),
        sa.Column("audio_keys", postgresql.JSONB(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "status IN ('new', 'processing', 'done', 'failed', 'cancelled')",
            name=op.f("ck_jobs_status"),
        ),
        sa.CheckConstraint("item_id ~ '^[0-9a-f]{32}$'", name=op.f("ck_jobs_item_id_hex32")),
        sa.CheckConstraint("attempts >= 0 AND max_attempts >= 1", name=op.f("ck_jobs_attempts")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
        schema=SCHEMA,
    )
    op.create_index(
        "ix_jobs_one_active_per_item",
        "jobs",
        ["item_id"],
        unique=True,
        schema=SCHEMA,
        postgresql_where=sa.text("status IN ('new', 'processing')"),
    )
    op.create_index(
        "ix_jobs_claim",
        "jobs",
        [sa.literal_column("priority").desc(), "run_after"],
        unique=False,
        schema=SCHEMA,
        postgresql_where=sa.text("status = 'new'"),
    )
    op.create_index(
        "ix_jobs_stale",
        "jobs",
        ["heartbeat_at"],
        unique=False,
        schema=SCHEMA,
        postgresql_where=sa.text("status = 'processing'"),
    )
    op.create_index(
        "ix_jobs_item_created", "jobs", ["item_id", "created_at"], unique=False, schema=SCHEMA
    )
    op.execute(JOB_STATUS_VIEW)


def downgrade() -> None:
    op.execute(f"DROP VIEW IF EXISTS {SCHEMA}.job_status")
    op.drop_table("jobs", schema=SCHEMA)
