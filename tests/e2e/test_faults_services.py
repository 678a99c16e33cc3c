"""Services failing under a running job: Postgres, Jellyfin, S3, disk, a stalled source."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from mirror.db.attempt_log import AttemptLog
from mirror.demo.media import SampleMedia
from tests.fixtures.stack import FAST_FAULTS, Stack, mirrored_keys, phase_of
from tests.fixtures.tcp_proxy import TcpProxy


@pytest.fixture(autouse=True)
def fast_faults(stack: Stack) -> None:
    stack.settings.update(FAST_FAULTS)


def attempt_outcomes(stack: Stack, item_id: str) -> list[str | None]:
    return [a.outcome for a in AttemptLog(stack.repo.engine).attempts_of(stack.job(item_id).id)]


def terminate_worker_connections(database_url: str) -> int:
    """pg_terminate_backend on every connection mirror holds to the test database."""
    engine = create_engine(database_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            return len(
                conn.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                        "AND application_name LIKE 'mirror%'"
                    )
                ).all()
            )
    finally:
        engine.dispose()


def test_postgres_connections_killed_mid_job_heal_and_the_job_completes_once(
    stack: Stack, sample_large_h264: SampleMedia
) -> None:
    item = stack.add_sample(sample_large_h264)
    stack.jellyfin.throttle(sample_large_h264.size // 12)  # ~12 s download
    stack.enqueue(item)
    worker = stack.start_worker("--burst", name="a")
    stack.wait_for(lambda: phase_of(stack, item) == "download", 60, "the download")
    for _ in range(3):
        killed = terminate_worker_connections(stack.database_url)
        assert killed >= 1
        before = stack.job(item).heartbeat_at
        # heartbeats resume on fresh connections
        stack.wait_for(lambda b=before: stack.job(item).heartbeat_at != b, 10, "a new beat")
    stack.jellyfin.throttle(None)
    assert worker.wait(timeout=120) == 0, stack.log_of("a")[-3000:]
    job = stack.job(item)
    assert (job.status, job.attempts) == ("done", 1), job.error
    assert attempt_outcomes(stack, item) == ["done"]
    assert "Traceback" not in stack.log_of("a")
    assert list(stack.work_dir.iterdir()) == []


def test_jellyfin_503_then_5xx_then_a_cut_connection_within_the_first_attempt(
    stack: Stack, sample_h264_aac: SampleMedia
) -> None:
    item = stack.add_sample(sample_h264_aac)
    stack.jellyfin.fail_next(503, retry_after=1, path_prefix="/Items")
    stack.jellyfin.fail_next(500, path_prefix="/Items")
    stack.jellyfin.fail_next(502, path_prefix=f"/Items/{item}/Download")
    stack.jellyfin.cut_after(sample_h264_aac.size // 2)
    stack.enqueue(item)
    assert stack.burst_in_process() == ["done"]  # the retries are the subject, not the process
    job = stack.job(item)
    assert (job.status, job.attempts) == ("done", 1), job.error
    statuses = [r.status for r in stack.jellyfin.requests if r.path.startswith("/Items")]
    assert {503, 500, 502} <= set(statuses)
    assert 206 in statuses  # the cut download was resumed
    assert list(stack.work_dir.iterdir()) == []


def test_s3_down_mid_upload_goes_back_to_the_queue_then_completes(
    stack: Stack, s3_proxy: TcpProxy, sample_large_h264: SampleMedia
) -> None:
    item = stack.add_sample(sample_large_h264)
    stack.enqueue(item)
    s3_proxy.throttle(1_000_000)
    worker = stack.start_worker(
        name="a", MIRROR_S3_ENDPOINT_URL=s3_proxy.url, MIRROR_RETRY_BACKOFF="2s"
    )
    stack.wait_for(stack.s3.multipart_uploads, 60, "a multipart upload")
    s3_proxy.go_down()
    stack.wait_for(lambda: stack.job(item).status == "new", 120, "the job back in the queue")
    job = stack.job(item)
    assert job.error is not None and "S3" in job.error
    assert job.run_after > job.updated_at  # backing off, not hammering
    assert job.attempts == 1
    assert stack.s3.multipart_uploads()  # nothing could abort it while S3 was away
    s3_proxy.throttle(None)
    s3_proxy.come_back()
    stack.wait_for(lambda: stack.job(item).status == "done", 120, "the retry to finish")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0
    job = stack.job(item)
    assert job.attempts == 2
    assert attempt_outcomes(stack, item) == ["retry", "done"]
    assert stack.s3.multipart_uploads() == []  # the retry aborted the leftover
    assert stack.object_keys() == mirrored_keys(job)


def test_four_workers_with_two_slots_mirror_16_items_exactly_once(
    stack: Stack, sample_h264_aac: SampleMedia, tmp_path: Path
) -> None:
    items = [stack.add_sample(sample_h264_aac, f"Item {n:02d}") for n in range(16)]
    stack.enqueue(*items)
    workers = [stack.start_worker("--burst", "--concurrency", "2", name=f"w{n}") for n in range(4)]
    for worker in workers:
        assert worker.wait(timeout=300) == 0
    history = AttemptLog(stack.repo.engine)
    holders: dict[str, str] = {}
    for item in items:
        job = stack.job(item)
        assert (job.status, job.attempts) == ("done", 1), job.error
        [attempt] = history.attempts_of(job.id)
        holders[item] = attempt.worker_id
    claims = [
        line
        for n in range(4)
        for line in stack.log_of(f"w{n}").splitlines()
        if "claimed by" in line
    ]
    assert len(claims) == 16
    assert len({line.split("job=")[1].split()[0] for line in claims}) == 16
    assert len({holder.rsplit(":", 1)[0] for holder in holders.values()}) >= 2  # shared work
    assert stack.object_keys() == sorted(k for i in items for k in mirrored_keys(stack.job(i)))


def test_a_later_attempt_resumes_the_partial_download_of_one_that_gave_up(
    stack: Stack, sample_large_h264: SampleMedia
) -> None:
    item = stack.add_sample(sample_large_h264)
    size = sample_large_h264.size
    stack.jellyfin.throttle(size // 4)  # ~2 s to the cut, time to arm the 503s below
    stack.jellyfin.cut_after(size // 2)
    stack.enqueue(item)
    worker = stack.start_worker(name="a")
    stack.wait_for(lambda: stack.jellyfin.downloads_bytes_served > 0, 60, "the download")
    # After the cut, every resume is refused until the first attempt gives up (5 tries).
    stack.jellyfin.fail_next(503, times=4, retry_after=1, path_prefix=f"/Items/{item}/Download")
    stack.wait_for(lambda: stack.job(item).attempts == 2, 120, "the second attempt")
    stack.jellyfin.throttle(None)
    stack.wait_for(lambda: stack.job(item).status == "done", 120, "the job to finish")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0
    assert attempt_outcomes(stack, item) == ["retry", "done"]
    served = stack.jellyfin.downloads_bytes_served
    print(f"bytes served: {served} for a file of {size} ({served / size:.3f}x)")
    assert served <= 1.05 * size
    downloads = stack.jellyfin.download_requests()
    assert downloads[-1].status == 206 and downloads[-1].range == f"bytes={size // 2}-"
    assert list(stack.work_dir.iterdir()) == []
