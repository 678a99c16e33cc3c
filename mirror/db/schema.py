"""The schema's vocabulary in one place: the schema, its tables, the NOTIFY channel.

Statuses are the job vocabulary (`mirror.domain.jobs.Status`); alembic/versions owns the DDL.
"""

from __future__ import annotations

__all__ = [
    "ATTEMPTS",
    "COUNTERS",
    "FLEET",
    "JOBS",
    "NOTIFY_CHANNEL",
    "SCHEMA",
    "TITLE_SEARCH_TEXT",
]

SCHEMA = "media_mirror"
JOBS = f"{SCHEMA}.jobs"
ATTEMPTS = f"{SCHEMA}.job_attempts"
COUNTERS = f"{SCHEMA}.counters"
FLEET = f"{SCHEMA}.fleet"
# enqueue NOTIFYs it; a worker's LISTEN connection (mirror.db.listen) wakes its claim loop.
NOTIFY_CHANNEL = "media_mirror_jobs"
# What the title search matches (ILIKE), exactly as ix_jobs_title_search indexes it
# (migration 0010), so the planner can use the trigram index.
TITLE_SEARCH_TEXT = "(COALESCE(series_name, '') || ' ' || COALESCE(item_name, ''))"
