"""Removal with a grace period: `removed_at` and `objects_deleted_at` on jobs.

An item that left Jellyfin is marked first (`removed_at`: when it was found gone; its
done jobs become `removed`, an active one `cancelled`) and its objects are deleted only
when it is still gone after MIRROR_DELETE_GRACE (`objects_deleted_at`). An item that
comes back before that gets its done jobs back. Rows removed before this migration had
their objects deleted at once: both columns take their `updated_at`.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

SCHEMA = "media_mirror"
COLUMNS = ("removed_at", "objects_deleted_at")


def _view(extra: str) -> str:
    return f"""
CREATE OR REPLACE VIEW {SCHEMA}.job_status AS
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
    {SPEED} AS speed,
    CASE WHEN j.status = 'processing' THEN now() - j.heartbeat_at END AS heartbeat_age,
    j.attempts,
    j.max_attempts,
    j.priority,
    j.worker_id,
    j.error,
    j.run_after,
    j.created_at,
    j.updated_at,
    j.finished_at{extra}
FROM {SCHEMA}.jobs AS j
"""


# As in 0007.
SPEED = """CASE
        WHEN jsonb_typeof(j.heartbeat_data -> 'speed_bps') = 'number' THEN
            to_char((j.heartbeat_data ->> 'speed_bps')::numeric / 1e6, 'FM999999990.0')
            || ' MB/s'
        WHEN jsonb_typeof(j.heartbeat_data -> 'speed_factor') = 'number' THEN
            trim_scale((j.heartbeat_data ->> 'speed_factor')::numeric) || 'x'
        ELSE j.heartbeat_data ->> 'speed'
    END"""


def upgrade() -> None:
    for name in COLUMNS:
        op.add_column(
            "jobs", sa.Column(name, sa.DateTime(timezone=True), nullable=True), schema=SCHEMA
        )
    op.execute(
        f"UPDATE {SCHEMA}.jobs SET removed_at = updated_at, objects_deleted_at = updated_at "
        "WHERE status = 'removed'"
    )
    # The purge's scan: marked items whose objects are still there.
    op.create_index(
        "ix_jobs_removal_pending",
        "jobs",
        ["removed_at"],
        schema=SCHEMA,
        postgresql_where=sa.text("removed_at IS NOT NULL AND objects_deleted_at IS NULL"),
    )
    op.execute(_view(",\n    j.removed_at,\n    j.objects_deleted_at"))


def downgrade() -> None:
    op.execute(f"DROP VIEW {SCHEMA}.job_status")
    op.execute(_view(""))
    # Removed but not yet deleted: done again, as the mirror still holds its objects.
    op.execute(
        f"UPDATE {SCHEMA}.jobs SET status = 'done' "
        "WHERE status = 'removed' AND objects_deleted_at IS NULL"
    )
    op.drop_index("ix_jobs_removal_pending", table_name="jobs", schema=SCHEMA)
    for name in COLUMNS:
        op.drop_column("jobs", name, schema=SCHEMA)
