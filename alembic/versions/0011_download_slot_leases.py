"""Download slots as leased rows, for workers behind PgBouncer's transaction pooling.

With MIRROR_PGBOUNCER=transaction a connection is not a session, so the session advisory
locks that hold MIRROR_JELLYFIN_MAX_DOWNLOADS slots otherwise cannot be used: a slot is
then a row here, leased until `expires_at`, renewed by its holder every heartbeat
interval and deleted at the end of its download (mirror/db/slot_leases.py). A row past
`expires_at` is a free slot (its holder died or went silent).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

SCHEMA = "media_mirror"


def upgrade() -> None:
    op.create_table(
        "download_slots",
        sa.Column("slot", sa.Integer(), nullable=False),
        sa.Column("lease_token", sa.Uuid(), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("holder", sa.Text(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("slot", name=op.f("pk_download_slots")),
        schema=SCHEMA,
    )


def downgrade() -> None:
    op.drop_table("download_slots", schema=SCHEMA)
