"""Speeds stored as numbers: the job_status view formats them.

Workers now write `speed_bps` (bytes per second: download, upload) and `speed_factor`
(media seconds per second: ffmpeg) into `heartbeat_data` instead of the text `speed`
("45.1 MB/s", "2.5x"). The view's `speed` column formats the numbers the way the text
read, and still shows the text of rows written before.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-06
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

SCHEMA = "media_mirror"


def _view(speed: str) -> str:
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
    {speed} AS speed,
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


# The same text as mirror.views.speed_text: `45.1 MB/s`, `2.5x` (as ffmpeg gave it).
SPEED_FROM_NUMBERS = """CASE
        WHEN jsonb_typeof(j.heartbeat_data -> 'speed_bps') = 'number' THEN
            to_char((j.heartbeat_data ->> 'speed_bps')::numeric / 1e6, 'FM999999990.0')
            || ' MB/s'
        WHEN jsonb_typeof(j.heartbeat_data -> 'speed_factor') = 'number' THEN
            trim_scale((j.heartbeat_data ->> 'speed_factor')::numeric) || 'x'
        ELSE j.heartbeat_data ->> 'speed'
    END"""


def upgrade() -> None:
    op.execute(_view(SPEED_FROM_NUMBERS))


def downgrade() -> None:
    op.execute(_view("j.heartbeat_data ->> 'speed'"))
