"""JobRepository on real Postgres: enqueue, claim, fencing, reaping, cancel, retry, view."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

import pytest
from sqlalchemy import Engine, text

from mirror.db.repository import JobRepository
from mirror.domain.jobs import Fence, JobNotFound, JobStateError, Mirrored
from mirror.views import speed_text
from tests.fixtures.postgres import seconds_until_run_after

ITEM = "a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21"
ITEM_2 = "0123456789abcdef0123456789abcdef"
OUTPUTS = Mirrored(video_key="v", audio_keys=[])  # what a done job recorded


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def make_stale(engine: Engine, job_id: uuid.UUID, seconds: float = 3600) -> None:
    """Age a job's heartbeat as if its worker died `seconds` ago."""
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE media_mirror.jobs SET heartbeat_at = now() - make_interval(secs => :s) "
                "WHERE id = :id"
            ),
            {"s": seconds, "id": job_id},
        )


def test_enqueue_twice_gives_one_job(repo: JobRepository) -> None:
    first = repo.enqueue([ITEM])
    second = repo.enqueue([ITEM.upper()])
    assert [r.created for r in first] == [True]
    assert [r.created for r in second] == [False]
    assert first[0].job.id == second[0].job.id
    assert len(repo.list()) == 1


def test_enqueue_normalizes_dashed_and_upper_case_ids(repo: JobRepository) -> None:
    dashed = "A3F4C2E1-B5D6-4E0F-9C8B-7A6D5E4F3A21"
    [result] = repo.enqueue([dashed])
    assert result.job.item_id == ITEM


def test_malformed_id_inserts_nothing(repo: JobRepository) -> None:
    with pytest.raises(ValueError, match="not a Jellyfin item id"):
        repo.enqueue([ITEM_2, "not-an-id"])
    assert repo.list() == []


def test_enqueue_of_a_done_item_is_a_remirror_but_sweeps_skip_it(repo: JobRepository) -> None:
    [first] = repo.enqueue([ITEM])
    lease = repo.claim_next("w1")
    assert lease is not None
    assert repo.mark_done(lease.job_id, lease.token, OUTPUTS) is Fence.OK
    assert repo.enqueue([ITEM], skip_mirrored=True) == []
    [again] = repo.enqueue([ITEM])
    assert again.created and again.job.id != first.job.id


def test_enqueue_notifies_listeners(engine: Engine, repo: JobRepository) -> None:
    raw = engine.raw_connection()
    try:
        dbapi = raw.driver_connection
        assert dbapi is not None
        dbapi.autocommit = True
        dbapi.execute("LISTEN media_mirror_jobs")
        repo.enqueue([ITEM])
        notifies = list(dbapi.notifies(timeout=5, stop_after=1))
    finally:
        raw.close()
    assert [n.channel for n in notifies] == ["media_mirror_jobs"]


def test_claim_sets_the_lease_and_counts_the_attempt(repo: JobRepository) -> None:
    repo.enqueue([ITEM])
    lease = repo.claim_next("host:1:0")
    assert lease is not None
    job = repo.get(lease.job_id)
    assert job.status == "processing"
    assert job.worker_id == "host:1:0"
    assert job.attempts == 1
    assert job.lease_token == lease.token
    assert job.taken_at is not None and job.heartbeat_at is not None
    assert repo.claim_next("host:1:1") is None


def test_claim_order_is_priority_then_run_after(repo: JobRepository) -> None:
    low = repo.enqueue([ITEM])[0].job
    high = repo.enqueue([ITEM_2], priority=5)[0].job
    first = repo.claim_next("w")
    second = repo.claim_next("w")
    assert first is not None and second is not None
    assert (first.job_id, second.job_id) == (high.id, low.id)


def test_run_after_in_the_future_is_not_claimed(engine: Engine, repo: JobRepository) -> None:
    job = repo.enqueue([ITEM])[0].job
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE media_mirror.jobs SET run_after = now() + interval '1 hour' WHERE id=:i"),
            {"i": job.id},
        )
    assert repo.claim_next("w") is None


def test_heartbeat_records_progress(repo: JobRepository) -> None:
    repo.enqueue([ITEM])
    lease = repo.claim_next("w")
    assert lease is not None
    before = repo.get(lease.job_id).heartbeat_at
    progress = {"phase": "download", "bytes_done": 10, "bytes_total": 100, "percent": 10.0}
    assert repo.heartbeat(lease.job_id, lease.token, progress) is Fence.OK
    assert repo.heartbeat(lease.job_id, lease.token, None) is Fence.OK  # keep-alive only
    job = repo.get(lease.job_id)
    assert job.heartbeat_data == progress  # a keep-alive keeps the last progress
    assert before is not None and job.heartbeat_at is not None and job.heartbeat_at > before


def test_cancel_while_processing_is_reported_at_the_next_beat(repo: JobRepository) -> None:
    repo.enqueue([ITEM])
    lease = repo.claim_next("w")
    assert lease is not None
    repo.cancel(lease.job_id)
    assert repo.heartbeat(lease.job_id, lease.token, {"phase": "upload"}) is Fence.CANCELLED
    assert repo.mark_done(lease.job_id, lease.token, OUTPUTS) is (Fence.CANCELLED)
    assert repo.fail_or_retry(lease.job_id, lease.token, "x", backoff_s=1)[0] is Fence.CANCELLED
    assert repo.get(lease.job_id).status == "cancelled"


def test_old_lease_changes_nothing_after_a_stale_rescue_and_new_claim(
    engine: Engine, repo: JobRepository
) -> None:
    repo.enqueue([ITEM])
    old = repo.claim_next("paused-worker")
    assert old is not None
    make_stale(engine, old.job_id)
    [rescued] = repo.return_stale_to_new(stale_timeout_s=60)
    assert (rescued.status, rescued.previous_worker) == ("new", "paused-worker")
    new = repo.claim_next("takeover")
    assert new is not None and new.job_id == old.job_id and new.token != old.token
    snapshot = repo.get(old.job_id)

    assert repo.heartbeat(old.job_id, old.token, {"phase": "upload"}) is Fence.LEASE_LOST
    assert repo.mark_done(old.job_id, old.token, OUTPUTS) is (Fence.LEASE_LOST)
    assert repo.mark_failed(old.job_id, old.token, "boom") is Fence.LEASE_LOST
    assert repo.release(old.job_id, old.token) is Fence.LEASE_LOST
    assert repo.fail_or_retry(old.job_id, old.token, "x", backoff_s=1) == (Fence.LEASE_LOST, None)

    after = repo.get(old.job_id)
    assert after == snapshot
    assert after.worker_id == "takeover" and after.attempts == 2
    assert repo.mark_done(new.job_id, new.token, OUTPUTS) is Fence.OK


def test_dead_job_is_rescued_after_stale_timeout_then_failed_when_attempts_run_out(
    repo: JobRepository,
) -> None:
    repo.enqueue([ITEM], max_attempts=3)
    stale = 0.3
    for attempt in (1, 2, 3):
        lease = repo.claim_next(f"dying-{attempt}")
        assert lease is not None and lease.job.attempts == attempt
        assert repo.return_stale_to_new(stale_timeout_s=60) == []  # live for now
        wait_until(lambda: bool(repo.return_stale_to_new(stale)))
        job = repo.get(lease.job_id)
        if attempt < 3:
            assert job.status == "new"
            assert job.error is not None and "stopped sending heartbeats" in job.error
            assert job.worker_id is None and job.lease_token is None
    assert job.status == "failed"
    assert job.error is not None and "attempts used up (3 of 3)" in job.error
    assert job.finished_at is not None
    assert repo.claim_next("w") is None


def test_concurrent_reapers_rescue_each_job_once(engine: Engine, repo: JobRepository) -> None:
    ids = [uuid.uuid4().hex for _ in range(40)]
    repo.enqueue(ids)
    for _ in ids:
        lease = repo.claim_next("dead")
        assert lease is not None
    with engine.begin() as conn:
        conn.execute(text("UPDATE media_mirror.jobs SET heartbeat_at = now() - interval '1h'"))
    results: list[list[uuid.UUID]] = []
    barrier = threading.Barrier(4)

    def reap() -> None:
        barrier.wait()
        results.append([r.job_id for r in repo.return_stale_to_new(60)])

    threads = [threading.Thread(target=reap) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rescued = [job_id for batch in results for job_id in batch]
    assert len(rescued) == 40 and len(set(rescued)) == 40
    assert all(job.status == "new" and job.attempts == 1 for job in repo.list(limit=100))


def test_fail_or_retry_backs_off_exponentially_then_fails(
    engine: Engine, repo: JobRepository
) -> None:
    job = repo.enqueue([ITEM], max_attempts=2)[0].job
    lease = repo.claim_next("w")
    assert lease is not None
    fence, status = repo.fail_or_retry(lease.job_id, lease.token, "Jellyfin 502", backoff_s=30)
    assert (fence, status) == (Fence.OK, "new")
    assert 25 < seconds_until_run_after(engine, job.id) <= 30
    assert repo.claim_next("w") is None  # backing off
    with engine.begin() as conn:
        conn.execute(text("UPDATE media_mirror.jobs SET run_after = now()"))
    lease = repo.claim_next("w")
    assert lease is not None
    fence, status = repo.fail_or_retry(lease.job_id, lease.token, "Jellyfin 502", backoff_s=30)
    assert (fence, status) == (Fence.OK, "failed")
    failed = repo.get(job.id)
    assert failed.error == "Jellyfin 502 (attempts used up: 2 of 2)"


def test_release_returns_the_job_without_using_an_attempt(repo: JobRepository) -> None:
    repo.enqueue([ITEM])
    lease = repo.claim_next("w")
    assert lease is not None
    assert repo.release(lease.job_id, lease.token, note="not enough disk") is Fence.OK
    job = repo.get(lease.job_id)
    assert (job.status, job.attempts, job.worker_id, job.lease_token) == ("new", 0, None, None)
    assert job.error == "not enough disk"
    assert repo.claim_next("w") is not None


def test_mark_done_records_keys(repo: JobRepository) -> None:
    repo.enqueue([ITEM])
    lease = repo.claim_next("w")
    assert lease is not None
    audio = [{"key": "p/x/audio/1-eng.m4a", "stream_index": 1, "language": "eng",
              "title": "English", "codec": "aac"}]  # fmt: skip
    fence = repo.mark_done(
        lease.job_id, lease.token, Mirrored(video_key="p/x/video.mp4", audio_keys=audio),
        progress={"phase": "upload", "percent": 100.0},
    )  # fmt: skip
    assert fence is Fence.OK
    job = repo.get(lease.job_id)
    assert (job.status, job.video_key, job.audio_keys) == ("done", "p/x/video.mp4", audio)
    assert job.heartbeat_data == {"phase": "upload", "percent": 100.0}
    assert job.finished_at is not None and job.error is None


def test_cancel_and_retry_rules(repo: JobRepository) -> None:
    job = repo.enqueue([ITEM])[0].job
    assert repo.cancel(job.id).status == "cancelled"
    with pytest.raises(JobStateError, match="already cancelled"):
        repo.cancel(job.id)
    retried = repo.retry(job.id)
    assert (retried.status, retried.attempts) == ("new", 0)
    with pytest.raises(JobStateError, match="only failed or cancelled"):
        repo.retry(job.id)
    repo.cancel(job.id)
    repo.enqueue([ITEM])  # a new active job for the item
    with pytest.raises(JobStateError, match="already has an active job"):
        repo.retry(job.id)
    with pytest.raises(JobNotFound):
        repo.get(uuid.uuid4())


def test_job_status_view_shows_progress_for_people(engine: Engine, repo: JobRepository) -> None:
    repo.enqueue([ITEM])
    lease = repo.claim_next("w")
    assert lease is not None
    repo.heartbeat(
        lease.job_id,
        lease.token,
        {"phase": "transcode", "frames_done": 50, "frames_total": 200, "percent": 25.0,
         "speed_factor": 3.1},
    )  # fmt: skip
    with engine.connect() as conn:
        row = conn.execute(text("SELECT * FROM media_mirror.job_status")).one()
    assert (row.item_id, row.status, row.phase, float(row.percent)) == (
        ITEM,
        "processing",
        "transcode",
        25.0,
    )
    assert (row.frames_done, row.frames_total, row.speed, row.attempts) == (50, 200, "3.1x", 1)
    assert row.heartbeat_age.total_seconds() < 60


@pytest.mark.parametrize(
    ("data", "shown"),
    [
        ({"phase": "download", "speed_bps": 45_123_456}, "45.1 MB/s"),
        ({"phase": "upload", "speed_bps": 0}, "0.0 MB/s"),
        ({"phase": "transcode", "speed_factor": 1020.0}, "1020x"),
        ({"phase": "download", "speed": "12.5 MB/s"}, "12.5 MB/s"),  # a row from before 0007
        ({"phase": "download"}, None),
    ],
)
def test_job_status_view_formats_speeds_as_the_cli_does(
    engine: Engine, repo: JobRepository, data: dict[str, object], shown: str | None
) -> None:
    repo.enqueue([ITEM])
    lease = repo.claim_next("w")
    assert lease is not None
    repo.heartbeat(lease.job_id, lease.token, data)
    with engine.connect() as conn:
        speed = conn.execute(text("SELECT speed FROM media_mirror.job_status")).scalar_one()
    assert speed == shown
    assert speed_text(data) == (shown or "")


def test_attempt_history_follows_claims_rescues_and_ends(
    engine: Engine, repo: JobRepository
) -> None:
    from mirror.db.attempt_log import AttemptLog
    from mirror.domain.jobs import AttemptStats

    history = AttemptLog(engine)
    repo.enqueue([ITEM])
    first = repo.claim_next("host:1:0")
    assert first is not None
    make_stale(engine, first.job_id)
    repo.return_stale_to_new(60)
    second = repo.claim_next("host:2:0")
    assert second is not None
    # the paused first attempt wakes up and tries to close its row: the reaper's word stands
    assert not history.end_attempt(first.token, "lease_lost", "late", AttemptStats())
    stats = AttemptStats(heartbeat_writes=4, bytes_downloaded=100, download_s=1.5)
    assert history.end_attempt(second.token, "done", None, stats)
    rows = history.attempts_of(first.job_id)
    assert [(r.attempt, r.worker_id, r.outcome) for r in rows] == [
        (1, "host:1:0", "stale"),
        (2, "host:2:0", "done"),
    ]
    assert rows[0].error is not None and "no heartbeat" in rows[0].error
    assert (rows[1].heartbeat_writes, rows[1].bytes_downloaded, rows[1].download_s) == (4, 100, 1.5)
    assert all(r.ended_at is not None for r in rows)


def test_mark_done_repeated_after_a_lost_answer_is_ok_but_other_statements_are_fenced(
    repo: JobRepository,
) -> None:
    repo.enqueue([ITEM])
    lease = repo.claim_next("w:1:0")
    assert lease is not None
    assert repo.mark_done(lease.job_id, lease.token, OUTPUTS) is Fence.OK
    # The retry of a commit whose answer never arrived: same attempt, row already done.
    assert repo.mark_done(lease.job_id, lease.token, OUTPUTS) is Fence.OK
    assert repo.heartbeat(lease.job_id, lease.token, None) is Fence.LEASE_LOST
    assert repo.mark_failed(lease.job_id, lease.token, "late") is Fence.LEASE_LOST
    assert repo.get(lease.job_id).status == "done"
