"""The running totals (migration 0005's triggers) agree with a full scan after every change."""

from __future__ import annotations

import uuid

from sqlalchemy import Engine, text

from mirror.db.attempt_log import AttemptLog
from mirror.db.counters import fold, read_totals
from mirror.db.mirrored import MirroredItems
from mirror.db.repository import JobRepository
from mirror.db.stats import QueueStats
from mirror.domain.jobs import AttemptStats, Mirrored
from mirror.web.metrics import PHASE_BUCKETS

ITEMS = [uuid.uuid4().hex for _ in range(8)]


def scanned(engine: Engine) -> dict[str, object]:
    """The figures the old scrape computed by scanning both tables."""
    with engine.connect() as conn:
        jobs = dict(
            conn.execute(
                text("SELECT status, count(*) FROM media_mirror.jobs GROUP BY status")
            ).all()
        )
        outcomes = dict(
            conn.execute(
                text(
                    "SELECT outcome, count(*) FROM media_mirror.job_attempts "
                    "WHERE outcome IS NOT NULL GROUP BY outcome"
                )
            ).all()
        )
        row = conn.execute(
            text(
                "SELECT count(*) AS claims, COALESCE(sum(bytes_downloaded), 0) AS down, "
                "COALESCE(sum(heartbeat_writes), 0) AS beats, "
                "count(*) FILTER (WHERE download_s <= 5) AS dl_le5, "
                "count(download_s) AS dl_n FROM media_mirror.job_attempts"
            )
        ).one()
    return {
        "jobs": {k: v for k, v in jobs.items() if v},
        "outcomes": outcomes,
        "claims": row.claims,
        "down": row.down,
        "beats": row.beats,
        "dl_le5": row.dl_le5,
        "dl_n": row.dl_n,
    }


def totals_of(engine: Engine) -> dict[str, object]:
    with engine.connect() as conn:
        totals = read_totals(conn)
    buckets, count = totals.phase_histogram("download", PHASE_BUCKETS)
    return {
        "jobs": {k: v for k, v in totals.jobs_by_status.items() if v},
        "outcomes": totals.by_outcome,
        "claims": totals.claims,
        "down": totals.bytes_downloaded,
        "beats": totals.heartbeat_writes,
        "dl_le5": dict(buckets)[5.0],
        "dl_n": count,
    }


def test_totals_follow_every_state_change(engine: Engine, repo: JobRepository) -> None:
    log = AttemptLog(engine)
    repo.enqueue(ITEMS)
    assert totals_of(engine) == scanned(engine)

    done = repo.claim_next("w:1:0")
    assert done is not None
    repo.heartbeat(done.job_id, done.token, {"phase": "download", "percent": 5})
    repo.mark_done(done.job_id, done.token, Mirrored(video_key="v", audio_keys=[]))
    log.end_attempt(done.token, "done", None, AttemptStats(3, 1000, 500, 4.0, 9.0, 1.0))

    failed = repo.claim_next("w:1:0")
    assert failed is not None
    repo.mark_failed(failed.job_id, failed.token, "boom")
    log.end_attempt(failed.token, "failed", "boom", AttemptStats(1, 10, None, 700.0))

    retried = repo.claim_next("w:1:0")
    assert retried is not None
    repo.fail_or_retry(retried.job_id, retried.token, "blip", backoff_s=0)
    log.end_attempt(retried.token, "retry", "blip", AttemptStats())

    released = repo.claim_next("w:1:0")
    assert released is not None
    repo.release(released.job_id, released.token)
    waiting = repo.claim_next("w:1:0")
    assert waiting is not None
    repo.release_until_ready(
        waiting.job_id, waiting.token, note="n", phase="waiting for disk", first_delay_s=0
    )

    stale = repo.claim_next("w:1:0")
    assert stale is not None
    with engine.begin() as conn:
        conn.execute(text("UPDATE media_mirror.jobs SET heartbeat_at = now() - interval '1 hour'"))
    repo.return_stale_to_new(60)

    cancelled = repo.list(status="new", limit=1)[0]
    repo.cancel(cancelled.id)
    repo.retry(failed.job_id)
    MirroredItems(engine).mark_removed(done.job.item_id)
    assert totals_of(engine) == scanned(engine)

    fold(engine, above_rows=0)
    assert totals_of(engine) == scanned(engine)
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM media_mirror.jobs WHERE status = 'cancelled'"))
        rows = conn.execute(text("SELECT count(*) FROM media_mirror.counters")).scalar()
    jobs = totals_of(engine)["jobs"]
    assert jobs == scanned(engine)["jobs"]
    assert rows is not None and rows < 40  # folded: one row per figure, plus a few deltas


def test_snapshot_histogram_is_cumulative(engine: Engine, repo: JobRepository) -> None:
    log = AttemptLog(engine)
    repo.enqueue(ITEMS[:3])
    for seconds in (0.5, 4.0, 9000.0):
        lease = repo.claim_next("w:1:0")
        assert lease is not None
        repo.mark_done(lease.job_id, lease.token, Mirrored(video_key="v", audio_keys=[]))
        log.end_attempt(lease.token, "done", None, AttemptStats(transcode_s=seconds))
    snapshot = QueueStats(engine).snapshot(PHASE_BUCKETS)
    transcode = next(p for p in snapshot.phases if p.phase == "transcode")
    assert dict(transcode.buckets)[1.0] == 1
    assert dict(transcode.buckets)[5.0] == 2
    assert dict(transcode.buckets)[7200.0] == 2
    assert transcode.count == 3
    assert transcode.sum_s == 9004.5
    assert snapshot.jobs_by_status["done"] == 3


def test_the_migration_bounds_are_the_metrics_buckets() -> None:
    from importlib import import_module
    from pathlib import Path

    path = Path(__file__).parents[2] / "alembic" / "versions"
    import sys

    sys.path.insert(0, str(path))
    try:
        migration = import_module("0005_dashboard_counters")
    finally:
        sys.path.remove(str(path))
    bounds = migration.BOUNDS.split("[")[1].split("]")[0]
    assert tuple(float(b) for b in bounds.split(",")) == PHASE_BUCKETS
