"""Running totals for the dashboard and /metrics, and indexes for its lists.

`media_mirror.counters` holds deltas (name, label, value) appended by triggers in the
same transaction as every change of a job's status (claim, done, failed, retry,
release, cancel, reap, removed, insert, delete) and of the attempt history (a claim, an
attempt's end). Appending instead of updating one row per status keeps concurrent
claims from queueing behind (or deadlocking on) a shared counter row; readers sum the
few rows and `mirror/db/counters.py` folds them together now and then. Statement-level
triggers with transition tables cost one INSERT per statement, also for bulk writes.

Attempt totals only grow (deleting jobs does not lower them): Prometheus counters.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

SCHEMA = "media_mirror"
# Must equal mirror.web.metrics.PHASE_BUCKETS (a test checks): each ended phase is counted
# once, under the smallest bound it fits, and the histogram is cumulated when read.
BOUNDS = "ARRAY[1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200]::float8[]"


def ended_figures(query: str) -> str:
    """SELECT of the counter deltas of the ended attempts among the rows of `query`."""
    phases = """ended AS e CROSS JOIN LATERAL (VALUES ('download', e.download_s),
               ('transcode', e.transcode_s), ('upload', e.upload_s)) AS p(phase, s)
               WHERE p.s IS NOT NULL"""
    return f"""
        WITH ended AS (SELECT * FROM ({query}) AS rows WHERE ended_at IS NOT NULL)
        SELECT name, label, sum(value) FROM (
            SELECT 'outcome' AS name, outcome AS label, 1::numeric AS value
                FROM ended WHERE outcome IS NOT NULL
            UNION ALL SELECT 'heartbeat_writes', '', COALESCE(heartbeat_writes, 0) FROM ended
            UNION ALL SELECT 'bytes_downloaded', '', COALESCE(bytes_downloaded, 0) FROM ended
            UNION ALL SELECT 'bytes_uploaded', '', COALESCE(bytes_uploaded, 0) FROM ended
            UNION ALL SELECT 'phase_sum', p.phase, p.s::numeric FROM {phases}
            UNION ALL SELECT 'phase_bucket', p.phase || ':' || COALESCE(
                    (SELECT min(b)::text FROM unnest({BOUNDS}) AS b WHERE p.s <= b), '+Inf'),
                1 FROM {phases}
        ) AS deltas GROUP BY name, label HAVING sum(value) <> 0
    """


def upgrade() -> None:
    op.create_table(
        "counters",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("label", sa.Text(), server_default=sa.text("''"), nullable=False),
        sa.Column("value", sa.Numeric(), nullable=False),
        schema=SCHEMA,
    )
    op.create_index("ix_jobs_status_created", "jobs", ["status", "created_at", "id"], schema=SCHEMA)
    op.create_index("ix_jobs_created", "jobs", ["created_at", "id"], schema=SCHEMA)
    op.create_index(
        "ix_jobs_failed_finished",
        "jobs",
        ["finished_at"],
        schema=SCHEMA,
        postgresql_where=sa.text("status = 'failed'"),
    )
    op.create_index(
        "ix_job_attempts_done_ended",
        "job_attempts",
        ["ended_at"],
        schema=SCHEMA,
        postgresql_where=sa.text("outcome = 'done'"),
    )
    counters = f"{SCHEMA}.counters"
    op.execute(
        f"""
        CREATE FUNCTION {SCHEMA}.count_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'INSERT' THEN
                INSERT INTO {counters} (name, label, value)
                SELECT 'jobs', status, count(*) FROM new_rows GROUP BY status;
            ELSIF TG_OP = 'DELETE' THEN
                INSERT INTO {counters} (name, label, value)
                SELECT 'jobs', status, -count(*) FROM old_rows GROUP BY status;
            ELSE
                INSERT INTO {counters} (name, label, value)
                SELECT 'jobs', status, sum(d) FROM (
                    SELECT o.status, -1 AS d FROM old_rows o JOIN new_rows n USING (id)
                    WHERE o.status <> n.status
                    UNION ALL
                    SELECT n.status, 1 FROM old_rows o JOIN new_rows n USING (id)
                    WHERE o.status <> n.status
                ) AS moves GROUP BY status HAVING sum(d) <> 0;
            END IF;
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        f"""
        CREATE FUNCTION {SCHEMA}.count_attempts() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'INSERT' THEN
                INSERT INTO {counters} (name, label, value)
                SELECT 'claims', '', count(*) FROM new_rows HAVING count(*) > 0;
                INSERT INTO {counters} (name, label, value) {
            ended_figures("SELECT * FROM new_rows")
        };
            ELSE
                INSERT INTO {counters} (name, label, value) {
            ended_figures(
                "SELECT n.* FROM new_rows n JOIN old_rows o USING (lease_token) "
                "WHERE o.ended_at IS NULL"
            )
        };
            END IF;
            RETURN NULL;
        END $$
        """
    )
    for table, function in (("jobs", "count_jobs"), ("job_attempts", "count_attempts")):
        op.execute(
            f"""CREATE TRIGGER {table}_counted_insert AFTER INSERT ON {SCHEMA}.{table}
            REFERENCING NEW TABLE AS new_rows
            FOR EACH STATEMENT EXECUTE FUNCTION {SCHEMA}.{function}()"""
        )
        op.execute(
            f"""CREATE TRIGGER {table}_counted_update AFTER UPDATE ON {SCHEMA}.{table}
            REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
            FOR EACH STATEMENT EXECUTE FUNCTION {SCHEMA}.{function}()"""
        )
    op.execute(
        f"""CREATE TRIGGER jobs_counted_delete AFTER DELETE ON {SCHEMA}.jobs
        REFERENCING OLD TABLE AS old_rows
        FOR EACH STATEMENT EXECUTE FUNCTION {SCHEMA}.count_jobs()"""
    )
    # Seed from what is there (one scan, at migration time only).
    op.execute(
        f"""INSERT INTO {counters} (name, label, value)
        SELECT 'jobs', status, count(*) FROM {SCHEMA}.jobs GROUP BY status"""
    )
    op.execute(
        f"""INSERT INTO {counters} (name, label, value)
        SELECT 'claims', '', count(*) FROM {SCHEMA}.job_attempts HAVING count(*) > 0"""
    )
    op.execute(
        f"INSERT INTO {counters} (name, label, value) "
        f"{ended_figures(f'SELECT * FROM {SCHEMA}.job_attempts')}"
    )


def downgrade() -> None:
    for table in ("jobs", "job_attempts"):
        op.execute(f"DROP TRIGGER {table}_counted_insert ON {SCHEMA}.{table}")
        op.execute(f"DROP TRIGGER {table}_counted_update ON {SCHEMA}.{table}")
    op.execute(f"DROP TRIGGER jobs_counted_delete ON {SCHEMA}.jobs")
    op.execute(f"DROP FUNCTION {SCHEMA}.count_jobs()")
    op.execute(f"DROP FUNCTION {SCHEMA}.count_attempts()")
    op.drop_index("ix_job_attempts_done_ended", "job_attempts", schema=SCHEMA)
    op.drop_index("ix_jobs_failed_finished", "jobs", schema=SCHEMA)
    op.drop_index("ix_jobs_created", "jobs", schema=SCHEMA)
    op.drop_index("ix_jobs_status_created", "jobs", schema=SCHEMA)
    op.drop_table("counters", schema=SCHEMA)
