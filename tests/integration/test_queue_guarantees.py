"""The guarantees the queue exists for, under real concurrency on real Postgres."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from sqlalchemy import Engine, text

from mirror.db.engine import make_engine
from mirror.db.repository import JobRepository
from mirror.domain.jobs import Fence, Mirrored
from mirror.domain.progress import Progress
from mirror.runner.heartbeat import Heartbeat
from tests.fixtures import launcher


def test_live_job_longer_than_stale_timeout_is_never_reclaimed(
    engine: Engine, repo: JobRepository
) -> None:
    """The failure this service exists to prevent: a long live job taken twice."""
    stale_timeout, interval = 1.5, 0.3
    work_seconds = 3 * stale_timeout
    repo.enqueue(["a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21"])
    lease = repo.claim_next("worker-a")
    assert lease is not None
    stop = threading.Event()
    stolen: list[uuid.UUID] = []
    rescued: list[uuid.UUID] = []

    def rival(name: str) -> None:
        while not stop.is_set():
            rescued.extend(r.job_id for r in repo.return_stale_to_new(stale_timeout))
            other = repo.claim_next(name)
            if other is not None:
                stolen.append(other.job_id)
            time.sleep(0.05)

    rivals = [threading.Thread(target=rival, args=(f"rival-{i}",)) for i in range(3)]
    for thread in rivals:
        thread.start()
    heartbeat = Heartbeat(
        repo,
        lease.job_id,
        lease.token,
        interval=interval,
        stall_timeout=stale_timeout * 10,
        lease_timeout=stale_timeout,
    )
    try:
        with heartbeat:
            started = time.monotonic()
            frame = 0
            # Work in two shapes: busy with callbacks, then silent (keep-alive only).
            while time.monotonic() - started < work_seconds / 2:
                frame += 1
                heartbeat(Progress(phase="transcode", frames_done=frame, frames_total=10**6))
                time.sleep(0.01)
            time.sleep(work_seconds / 2)
            heartbeat.checkpoint()
        fence = repo.mark_done(lease.job_id, lease.token, Mirrored(video_key="v", audio_keys=[]))
    finally:
        stop.set()
        for thread in rivals:
            thread.join()
    assert fence is Fence.OK
    assert stolen == [] and rescued == []
    job = repo.get(lease.job_id)
    assert (job.status, job.attempts, job.worker_id) == ("done", 1, "worker-a")
    assert heartbeat.writes >= work_seconds / interval * 0.5


def test_keep_alive_beats_while_the_job_is_silent(repo: JobRepository) -> None:
    repo.enqueue(["a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21"])
    lease = repo.claim_next("w")
    assert lease is not None
    first = repo.get(lease.job_id).heartbeat_at
    heartbeat = Heartbeat(
        repo, lease.job_id, lease.token, interval=0.2, stall_timeout=60, lease_timeout=60
    )
    with heartbeat:
        deadline = time.monotonic() + 10
        while heartbeat.writes < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert heartbeat.writes >= 3
    last = repo.get(lease.job_id).heartbeat_at
    assert first is not None and last is not None and last > first


def test_cancel_reaches_the_job_thread_at_the_next_beat(repo: JobRepository) -> None:
    repo.enqueue(["a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21"])
    lease = repo.claim_next("w")
    assert lease is not None
    heartbeat = Heartbeat(
        repo, lease.job_id, lease.token, interval=0.2, stall_timeout=60, lease_timeout=60
    )
    killed = threading.Event()
    heartbeat.abort.on_abort(killed.set)
    with heartbeat:
        repo.cancel(lease.job_id)
        assert killed.wait(5), "the keep-alive did not notice the cancel"
    assert type(heartbeat.abort.reason).__name__ == "JobCancelled"
    assert repo.get(lease.job_id).status == "cancelled"


def _claim_all(url: str, worker: str, start: object) -> list[str]:
    engine = make_engine(url, pool_size=2)
    repo = JobRepository(engine)
    start.wait()  # type: ignore[attr-defined]
    claimed: list[str] = []
    while (lease := repo.claim_next(worker)) is not None:
        claimed.append(str(lease.job_id))
        repo.mark_done(lease.job_id, lease.token, Mirrored(video_key="v", audio_keys=[]))
    engine.dispose()
    return claimed


@pytest.mark.e2e  # eight processes: with the e2e tests, out of `make test-fast`
def test_eight_processes_claim_each_of_600_jobs_exactly_once(
    database_url: str, engine: Engine, repo: JobRepository
) -> None:
    repo.enqueue([uuid.uuid4().hex for _ in range(600)])  # ~75 claims per process
    # Eight processes forked from one that imported this module once (spawned as fresh
    # interpreters, each paid the imports, ~1.5 CPU-s, for its ~75 claims).
    context = launcher.forkserver(__name__)
    with context.Manager() as manager:
        start = manager.Event()
        with context.Pool(8) as pool:
            pending = [
                pool.apply_async(_claim_all, (database_url, f"worker-{n}", start)) for n in range(8)
            ]
            time.sleep(0.5)
            start.set()
            per_worker = [result.get(timeout=240) for result in pending]
    claimed = [job_id for batch in per_worker for job_id in batch]
    assert len(claimed) == 600
    assert len(set(claimed)) == 600
    with engine.connect() as conn:
        stats = conn.execute(
            text(
                "SELECT count(*) FILTER (WHERE status = 'done') AS done, max(attempts) AS most "
                "FROM media_mirror.jobs"
            )
        ).one()
    assert (stats.done, stats.most) == (600, 1)
    assert sum(1 for batch in per_worker if batch) >= 2  # it really was a race
