"""Dashboard sessions ended by a logout, so a kept or copied cookie is refused.

Session cookies are signed and carry their own expiry (12 h), so only the ones logged
out early need a row; `expires_at` lets each logout prune the rows past it. Shared by
every `mirror serve` instance, and kept across their restarts.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

SCHEMA = "media_mirror"


def upgrade() -> None:
    op.create_table(
        "ended_sessions",
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_ended_sessions")),
        schema=SCHEMA,
    )
    op.create_index(
        op.f("ix_ended_sessions_expires_at"), "ended_sessions", ["expires_at"], schema=SCHEMA
    )


def downgrade() -> None:
    op.drop_table("ended_sessions", schema=SCHEMA)
