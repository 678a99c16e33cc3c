"""SIGTERM at awkward moments: the worker always puts its job back before it exits."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from mirror.db.attempt_log import AttemptLog
from mirror.demo.media import SampleMedia
from tests.fixtures.stack import FAST_FAULTS, Stack, phase_of
from tests.fixtures.tcp_proxy import TcpProxy

# A stale timeout far beyond the test: only the worker itself can put the job back.
SHUTDOWN = {**FAST_FAULTS, "MIRROR_STALE_TIMEOUT": "120s", "MIRROR_SHUTDOWN_GRACE": "2s"}


@pytest.fixture(autouse=True)
def shutdown_settings(stack: Stack) -> None:
    stack.settings.update(SHUTDOWN)


def outcomes(stack: Stack, item_id: str) -> list[str | None]:
    return [a.outcome for a in AttemptLog(stack.repo.engine).attempts_of(stack.job(item_id).id)]


def terminate_and_time(worker: subprocess.Popen[str], *, timeout: float = 30) -> float:
    signalled = time.monotonic()
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=timeout) == 0
    return time.monotonic() - signalled


def assert_released_then_done(stack: Stack, item: str, log_name: str) -> None:
    job = stack.job(item)
    assert (job.status, job.attempts, job.worker_id) == ("new", 0, None), job.error
    assert "released to the queue for shutdown" in stack.log_of(log_name)
    result = stack.mirror("worker", "--burst")
    assert result.returncode == 0, result.stderr[-2000:]
    assert stack.job(item).status == "done"
    assert outcomes(stack, item) == ["released", "done"]


def test_sigterm_while_jellyfin_metadata_is_silent_releases_the_job_within_the_grace(
    stack: Stack, sample_h264_aac: SampleMedia
) -> None:
    item = stack.add_sample(sample_h264_aac)
    stack.jellyfin.stall_metadata(True)
    stack.mirror("enqueue", item)
    worker = stack.start_worker(name="a")
    stack.wait_for(lambda: stack.jellyfin.metadata_requests_held > 0, 60, "the metadata GET")
    took = terminate_and_time(worker)
    assert took < 8  # grace 2 s; the silent GET (60 s read timeout) does not hold it up
    stack.jellyfin.stall_metadata(False)
    assert_released_then_done(stack, item, "a")


def test_sigterm_while_the_s3_bucket_check_is_silent_releases_the_job_within_the_grace(
    stack: Stack, s3_proxy: TcpProxy, sample_h264_aac: SampleMedia
) -> None:
    item = stack.add_sample(sample_h264_aac)
    s3_proxy.stall(True)
    stack.mirror("enqueue", item)
    worker = stack.start_worker(name="a", MIRROR_S3_ENDPOINT_URL=s3_proxy.url)
    stack.wait_for(lambda: s3_proxy.held > 0, 60, "the bucket check")
    took = terminate_and_time(worker)
    assert took < 8
    s3_proxy.stall(False)
    assert stack.jellyfin.download_requests() == []
    assert_released_then_done(stack, item, "a")


def test_a_second_sigterm_cuts_the_grace_short(stack: Stack, sample_h264_aac: SampleMedia) -> None:
    item = stack.add_sample(sample_h264_aac)
    stack.jellyfin.throttle(sample_h264_aac.size // 100)  # a download of ~100 s
    stack.mirror("enqueue", item)
    worker = stack.start_worker(name="a", MIRROR_SHUTDOWN_GRACE="60s")
    stack.wait_for(lambda: phase_of(stack, item) == "download", 60, "the download")
    worker.send_signal(signal.SIGTERM)
    stack.wait_for(lambda: "stop requested" in stack.log_of("a"), 10, "the first stop")
    took = terminate_and_time(worker)
    assert took < 8  # not the 60 s grace
    assert "another stop request: aborting running jobs now" in stack.log_of("a")
    stack.jellyfin.throttle(None)
    assert_released_then_done(stack, item, "a")
