"""Crash safety: no job lost, none run twice, none finished by a worker that lost it.

Real worker processes, real Postgres, the Jellyfin stand-in, SeaweedFS's S3 and ffmpeg, with
stale_timeout 3 s and heartbeat 0.5 s. Each test checks the job row, the S3 objects and
the work directory afterwards.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mirror.db.attempt_log import AttemptLog
from mirror.demo.media import SampleMedia, describe_streams
from tests.fixtures.launcher import Launched
from tests.fixtures.stack import FAST_FAULTS, Stack, ffmpeg_pids, mirrored_keys, phase_of
from tests.fixtures.tcp_proxy import TcpProxy


@pytest.fixture(autouse=True)
def fast_faults(stack: Stack) -> None:
    stack.settings.update(FAST_FAULTS)


@pytest.fixture
def slow_transcode(paced_ffmpeg: Callable[[float], str]) -> dict[str, str]:
    """A worker's settings for a re-encode of `sample_slow` that lasts ~10 s (paced input)."""
    return {
        "MIRROR_VIDEO_CODEC": "libx264",
        "MIRROR_X264_PRESET": "ultrafast",
        "MIRROR_FFMPEG_PATH": paced_ffmpeg(2),
    }


def outcomes(stack: Stack, item_id: str) -> list[str | None]:
    return [a.outcome for a in AttemptLog(stack.repo.engine).attempts_of(stack.job(item_id).id)]


def assert_mirrored_once(stack: Stack, item_id: str, tmp_path: Path, ffmpeg_path: str) -> None:
    """Done, every object decodes to exactly its one stream, no multipart upload left."""
    job = stack.job(item_id)
    assert job.status == "done", job.error
    keys = [job.video_key or "", *(entry["key"] for entry in job.audio_keys or [])]
    assert stack.object_keys() == mirrored_keys(job)
    for key in keys:
        local = stack.download_object(key, tmp_path / "check" / key)
        streams = describe_streams(local, ffmpeg_path)
        assert len(streams) == 1, (key, streams)
        assert streams[0].type == ("Video" if key.endswith("video.mp4") else "Audio")
    assert stack.s3.multipart_uploads() == []


def wait_phase(stack: Stack, item_id: str, phase: str, timeout: float = 60) -> None:
    stack.wait_for(lambda: phase_of(stack, item_id) == phase, timeout, f"phase {phase}")


def stop(process: Launched) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


def test_live_job_three_times_longer_than_stale_timeout_is_claimed_once(
    stack: Stack, sample_slow: SampleMedia, slow_transcode: dict[str, str]
) -> None:
    item = stack.add_sample(sample_slow)
    stack.jellyfin.throttle(sample_slow.size // 5)  # ~5 s download, then a slow transcode
    stack.enqueue(item)
    started = time.monotonic()
    worker = stack.start_worker("--burst", name="a", **slow_transcode)
    stack.wait_for(lambda: stack.job(item).status == "processing", 30, "the claim")
    rival = stack.start_worker(name="rival")  # polls and reaps all along
    assert worker.wait(timeout=240) == 0, stack.log_of("a")[-3000:]
    took = time.monotonic() - started
    stop(rival)
    job = stack.job(item)
    assert took > 3 * 3  # really ran 3x the stale timeout
    assert (job.status, job.attempts) == ("done", 1), job.error
    assert outcomes(stack, item) == ["done"]
    assert str(job.id) not in stack.log_of("rival")
    assert list(stack.work_dir.iterdir()) == []


@pytest.mark.parametrize("phase", ["download", "transcode", "upload"])
def test_kill_9_mid_phase_is_finished_by_another_worker(
    stack: Stack,
    s3_proxy: TcpProxy,
    sample_large_h264: SampleMedia,
    sample_slow: SampleMedia,
    tmp_path: Path,
    ffmpeg_path: str,
    phase: str,
    slow_transcode: dict[str, str],
) -> None:
    sample = sample_slow if phase == "transcode" else sample_large_h264
    item = stack.add_sample(sample)
    stack.enqueue(item)
    env = dict(slow_transcode) if phase == "transcode" else {}
    if phase == "download":
        stack.jellyfin.throttle(sample.size // 10)
    if phase == "upload":
        s3_proxy.throttle(1_000_000)  # ~12 s for the 12 MB video
        env["MIRROR_S3_ENDPOINT_URL"] = s3_proxy.url
    victim = stack.start_worker(name="victim", **env)
    wait_phase(stack, item, phase)
    if phase == "download":
        stack.wait_for(lambda: (stack.job(item).heartbeat_data or {}).get("bytes_done", 0) > 0)
    if phase == "transcode":
        stack.wait_for(lambda: ffmpeg_pids(str(stack.work_dir)), 30, "ffmpeg to start")
    if phase == "upload":
        # a multipart upload under way: the kill leaves it incomplete for the takeover
        stack.wait_for(stack.s3.multipart_uploads, 30, "a multipart upload")
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)
    killed_at = time.monotonic()

    # ffmpeg must not outlive its worker as an orphan writing files
    stack.wait_for(lambda: not ffmpeg_pids(str(stack.work_dir)), 10, "ffmpeg to die")
    orphan_gone_after = time.monotonic() - killed_at

    stack.jellyfin.throttle(None)
    rescuer = stack.start_worker(name="rescuer")
    stack.wait_for(lambda: stack.job(item).status == "done", 120, "the takeover to finish")
    stop(rescuer)
    job = stack.job(item)
    assert job.attempts == 2
    assert outcomes(stack, item) == ["stale", "done"]
    assert_mirrored_once(stack, item, tmp_path, ffmpeg_path)
    assert list(stack.work_dir.iterdir()) == []
    if phase == "download":  # the takeover resumed the partial file
        assert (stack.jellyfin.download_requests()[-1].range or "").startswith("bytes=")
    if phase == "transcode":
        assert orphan_gone_after < 10


def test_paused_worker_cannot_finish_the_job_it_lost(
    stack: Stack,
    sample_slow: SampleMedia,
    tmp_path: Path,
    ffmpeg_path: str,
    slow_transcode: dict[str, str],
) -> None:
    item = stack.add_sample(sample_slow)
    stack.enqueue(item)
    paused = stack.start_worker(name="paused", **slow_transcode)
    wait_phase(stack, item, "transcode")
    paused.send_signal(signal.SIGSTOP)
    try:
        takeover = stack.start_worker(name="takeover", MIRROR_X264_PRESET="ultrafast")
        stack.wait_for(lambda: stack.job(item).status == "done", 120, "the takeover")
        stop(takeover)
        finished = stack.job(item)
        modified = {
            key: stack.s3.client.head_object(Bucket=stack.s3.bucket, Key=key)["LastModified"]
            for key in stack.object_keys()
        }
        time.sleep(3.5)  # past stale_timeout again while paused
    finally:
        paused.send_signal(signal.SIGCONT)
    stack.wait_for(
        lambda: "attempt ended: lease_lost" in stack.log_of("paused"), 30, "the lost lease"
    )
    stack.wait_for(lambda: not ffmpeg_pids(str(stack.work_dir)), 10, "its ffmpeg to die")
    stop(paused)

    assert "lease lost" in stack.log_of("paused")
    after = stack.job(item)
    assert (after.status, after.finished_at, after.worker_id) == (
        "done",
        finished.finished_at,
        finished.worker_id,
    )
    assert after.video_key == finished.video_key and after.attempts == 2
    assert {
        key: stack.s3.client.head_object(Bucket=stack.s3.bucket, Key=key)["LastModified"]
        for key in stack.object_keys()
    } == modified
    assert outcomes(stack, item) == ["stale", "done"]
    assert_mirrored_once(stack, item, tmp_path, ffmpeg_path)
    assert list(stack.work_dir.iterdir()) == []


def test_sigterm_during_transcode_releases_the_job_within_the_grace(
    stack: Stack, sample_slow: SampleMedia, slow_transcode: dict[str, str]
) -> None:
    item = stack.add_sample(sample_slow)
    stack.enqueue(item)
    worker = stack.start_worker(
        name="a", MIRROR_SHUTDOWN_GRACE="1s", MIRROR_STALE_TIMEOUT="60s", **slow_transcode
    )
    wait_phase(stack, item, "transcode")
    signalled = time.monotonic()
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0
    released_after = time.monotonic() - signalled
    job = stack.job(item)
    assert (job.status, job.attempts, job.worker_id) == ("new", 0, None)
    assert released_after < 10  # grace 1 s, far below the 60 s stale timeout
    assert "released to the queue for shutdown" in stack.log_of("a")
    assert stack.object_keys() == []
    assert not ffmpeg_pids(str(stack.work_dir))
    assert stack.burst_in_process(MIRROR_X264_PRESET="ultrafast") == ["done"]  # it still can
    assert stack.job(item).status == "done"
    assert outcomes(stack, item) == ["released", "done"]


def test_cancel_during_transcode_kills_ffmpeg_and_writes_nothing(
    stack: Stack, sample_slow: SampleMedia, slow_transcode: dict[str, str]
) -> None:
    item = stack.add_sample(sample_slow)
    [job_id] = stack.enqueue(item)
    worker = stack.start_worker(name="a", MIRROR_HEARTBEAT_INTERVAL="1s", **slow_transcode)
    wait_phase(stack, item, "transcode")
    stack.wait_for(lambda: ffmpeg_pids(str(stack.work_dir)), 30, "ffmpeg")
    assert stack.mirror_here("cancel", job_id).returncode == 0
    cancelled_at = time.monotonic()
    stack.wait_for(lambda: not ffmpeg_pids(str(stack.work_dir)), 10, "ffmpeg to die")
    assert time.monotonic() - cancelled_at <= 2 * 1.0 + 0.5  # two heartbeat intervals
    stack.wait_for(lambda: "attempt ended: cancelled" in stack.log_of("a"), 10, "the end")
    stop(worker)
    assert stack.job(item).status == "cancelled"
    assert list(stack.work_dir.iterdir()) == []
    assert stack.object_keys() == []
    assert os.path.exists(stack.log_dir / "a.log")
