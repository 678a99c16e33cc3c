"""What a done job mirrored, in full: the video entry, skipped streams and the source.

`video` holds `{key, size, sha256, codec, width, height, duration_s}` of video.mp4 (the
`audio_keys` entries gain size and sha256 the same way); `skipped_streams` lists the
streams not mirrored and why (sidecar files, cover art, image subtitles); `source` is
the media source that was downloaded (Id, Path, Size, Container, ...).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

SCHEMA = "media_mirror"
COLUMNS = ("video", "skipped_streams", "source")


def upgrade() -> None:
    for name in COLUMNS:
        op.add_column("jobs", sa.Column(name, JSONB(), nullable=True), schema=SCHEMA)


def downgrade() -> None:
    for name in reversed(COLUMNS):
        op.drop_column("jobs", name, schema=SCHEMA)
