"""The fleet's one row: `mirror pause [--drain]` / `mirror resume` for every worker.

Every claim reads it (no claim unless `running`) and every heartbeat returns it (a
`paused` fleet releases running jobs), so one UPDATE reaches workers on every host
without a message bus. The row is created here, `running`; a CHECK keeps it the only one.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

SCHEMA = "media_mirror"


def upgrade() -> None:
    op.create_table(
        "fleet",
        sa.Column("id", sa.SmallInteger(), server_default=sa.text("1"), nullable=False),
        sa.Column("mode", sa.Text(), server_default=sa.text("'running'"), nullable=False),
        sa.Column("changed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("changed_by", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.CheckConstraint("id = 1", name=op.f("ck_fleet_one_row")),
        sa.CheckConstraint("mode IN ('running', 'paused', 'draining')", name=op.f("ck_fleet_mode")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_fleet")),
        schema=SCHEMA,
    )
    op.execute(f"INSERT INTO {SCHEMA}.fleet (id, mode) VALUES (1, 'running')")


def downgrade() -> None:
    op.drop_table("fleet", schema=SCHEMA)
