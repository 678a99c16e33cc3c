"""Attempt history: one row per claim with its outcome and per-phase figures.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

SCHEMA = "media_mirror"


def upgrade() -> None:
    op.create_table(
        "job_attempts",
        sa.Column("lease_token", sa.Uuid(), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Text(), nullable=False),
        sa.Column(
            "claimed_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("outcome", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("heartbeat_writes", sa.Integer(), nullable=True),
        sa.Column("bytes_downloaded", sa.BigInteger(), nullable=True),
        sa.Column("bytes_uploaded", sa.BigInteger(), nullable=True),
        sa.Column("download_s", sa.Float(), nullable=True),
        sa.Column("transcode_s", sa.Float(), nullable=True),
        sa.Column("upload_s", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"],
            [f"{SCHEMA}.jobs.id"],
            name=op.f("fk_job_attempts_job_id_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("lease_token", name=op.f("pk_job_attempts")),
        schema=SCHEMA,
    )
    op.create_index(
        "ix_job_attempts_job", "job_attempts", ["job_id", "attempt"], unique=False, schema=SCHEMA
    )
    op.create_index(
        "ix_job_attempts_open",
        "job_attempts",
        ["claimed_at"],
        unique=False,
        schema=SCHEMA,
        postgresql_where=sa.text("ended_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_table("job_attempts", schema=SCHEMA)
