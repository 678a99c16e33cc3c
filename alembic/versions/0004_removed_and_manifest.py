"""A mirror that converges: the `removed` status and the `manifest_key` column.

`removed` marks the jobs of an item that left Jellyfin and whose objects were deleted
(`mirror sync --delete`, or the ItemDeleted webhook with MIRROR_DELETE_REMOVED), so a
later sync neither reports it again nor mistakes it for a live mirror. `manifest_key`
is the item's `manifest.json`, written after every other object and before mark_done.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

SCHEMA = "media_mirror"
# The naming convention in mirror/db/models.py turns name="status" into this.
CONSTRAINT = "ck_jobs_status"
OLD = "status IN ('new', 'processing', 'done', 'failed', 'cancelled')"
NEW = "status IN ('new', 'processing', 'done', 'failed', 'cancelled', 'removed')"


def upgrade() -> None:
    op.add_column("jobs", sa.Column("manifest_key", sa.Text(), nullable=True), schema=SCHEMA)
    op.drop_constraint(op.f(CONSTRAINT), "jobs", schema=SCHEMA, type_="check")
    op.create_check_constraint(op.f(CONSTRAINT), "jobs", sa.text(NEW), schema=SCHEMA)


def downgrade() -> None:
    op.execute(f"UPDATE {SCHEMA}.jobs SET status = 'cancelled' WHERE status = 'removed'")
    op.drop_constraint(op.f(CONSTRAINT), "jobs", schema=SCHEMA, type_="check")
    op.create_check_constraint(op.f(CONSTRAINT), "jobs", sa.text(OLD), schema=SCHEMA)
    op.drop_column("jobs", "manifest_key", schema=SCHEMA)
