"""Titles on the job: what people call the item, where it sits, and a title search.

Users think in titles, not ids: the item's name, type, series/season/episode, year and
library are stored with its jobs (from the enqueue, the sweep, sync or the webhook, and
refreshed by each attempt), with the parent ids that removing a series needs (SeriesId,
SeasonId, ParentId). `job_status` shows a readable `title`.

The title search (`mirror jobs --search`, the dashboard, `/api/jobs?q=`) is an ILIKE over
series and item name, served by a GIN trigram index (pg_trgm, in postgresql-contrib). A
server without pg_trgm, or a role that may not create it, gets a plain index on the same
expression instead: the search still works (a scan), the migration does not fail.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.exc import DBAPIError

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

SCHEMA = "media_mirror"
INDEX = "ix_jobs_title_search"
# The searched text: the query in mirror/db/job_reads.py spells it exactly so.
SEARCH_TEXT = "(COALESCE(series_name, '') || ' ' || COALESCE(item_name, ''))"

COLUMNS: tuple[tuple[str, sa.types.TypeEngine[object]], ...] = (
    ("item_name", sa.Text()),
    ("item_type", sa.Text()),
    ("series_name", sa.Text()),
    ("season_number", sa.Integer()),
    ("episode_number", sa.Integer()),
    ("year", sa.Integer()),
    ("library_name", sa.Text()),
    ("series_id", sa.Text()),
    ("season_id", sa.Text()),
    ("parent_id", sa.Text()),
)

# As mirror.domain.item.title_label: "Series S01E02 Name", "Name (Year)", or the name.
TITLE = """CASE
        WHEN j.series_name IS NOT NULL OR j.season_number IS NOT NULL
            OR j.episode_number IS NOT NULL THEN
            NULLIF(concat_ws(' ', j.series_name, NULLIF(concat(
                'S' || CASE WHEN j.season_number BETWEEN 0 AND 9 THEN '0' ELSE '' END
                    || j.season_number,
                'E' || CASE WHEN j.episode_number BETWEEN 0 AND 9 THEN '0' ELSE '' END
                    || j.episode_number), ''), j.item_name), '')
        WHEN j.year IS NOT NULL THEN j.item_name || ' (' || j.year || ')'
        ELSE j.item_name
    END"""

# As in 0007.
SPEED = """CASE
        WHEN jsonb_typeof(j.heartbeat_data -> 'speed_bps') = 'number' THEN
            to_char((j.heartbeat_data ->> 'speed_bps')::numeric / 1e6, 'FM999999990.0')
            || ' MB/s'
        WHEN jsonb_typeof(j.heartbeat_data -> 'speed_factor') = 'number' THEN
            trim_scale((j.heartbeat_data ->> 'speed_factor')::numeric) || 'x'
        ELSE j.heartbeat_data ->> 'speed'
    END"""


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
    j.finished_at,
    j.removed_at,
    j.objects_deleted_at{extra}
FROM {SCHEMA}.jobs AS j
"""


def _trigram_opclass() -> str | None:
    """`<schema>.gin_trgm_ops` once pg_trgm is there (created if it can be), else None."""
    bind = op.get_bind()
    available = bind.execute(
        sa.text("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'")
    ).first()
    if available is None:
        return None
    try:
        with bind.begin_nested():  # a refusal (no privilege) must not end the migration
            bind.execute(sa.text("CREATE EXTENSION IF NOT EXISTS pg_trgm"))
    except DBAPIError:
        return None
    schema = bind.execute(
        sa.text(
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
            "WHERE e.extname = 'pg_trgm'"
        )
    ).scalar_one()
    return f'"{schema}".gin_trgm_ops'


def upgrade() -> None:
    for name, type_ in COLUMNS:
        op.add_column("jobs", sa.Column(name, type_, nullable=True), schema=SCHEMA)
    opclass = _trigram_opclass()
    if opclass is not None:
        op.execute(f"CREATE INDEX {INDEX} ON {SCHEMA}.jobs USING gin ({SEARCH_TEXT} {opclass})")
    else:
        op.execute(f"CREATE INDEX {INDEX} ON {SCHEMA}.jobs ({SEARCH_TEXT})")
    # Removing a deleted series' episodes (issue 25) finds them by series.
    op.create_index("ix_jobs_series_id", "jobs", ["series_id"], schema=SCHEMA)
    columns = "".join(f",\n    j.{name}" for name, _ in COLUMNS)
    op.execute(_view(f",\n    {TITLE} AS title{columns}"))


def downgrade() -> None:
    op.execute(f"DROP VIEW {SCHEMA}.job_status")
    op.execute(_view(""))
    op.drop_index("ix_jobs_series_id", table_name="jobs", schema=SCHEMA)
    op.execute(f"DROP INDEX {SCHEMA}.{INDEX}")
    for name, _ in COLUMNS:
        op.drop_column("jobs", name, schema=SCHEMA)
