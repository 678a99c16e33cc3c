"""A playable mirror: the `hls_key` and `subtitle_keys` columns.

`hls_key` is the item's `master.m3u8` (output format `hls`), `subtitle_keys` lists the
WebVTT subtitles: `[{key, stream_index, language, title, codec, forced, external}]`.
Both stay null for jobs done before, and for `hls_key` with output format `mp4`.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

SCHEMA = "media_mirror"


def upgrade() -> None:
    op.add_column("jobs", sa.Column("hls_key", sa.Text(), nullable=True), schema=SCHEMA)
    op.add_column(
        "jobs",
        sa.Column("subtitle_keys", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        schema=SCHEMA,
    )


def downgrade() -> None:
    op.drop_column("jobs", "subtitle_keys", schema=SCHEMA)
    op.drop_column("jobs", "hls_key", schema=SCHEMA)
