"""Download, transcode and upload overlap (issue 14): seen from the stand-in and S3.

Real worker processes, Postgres, the Jellyfin stand-in (throttled), SeaweedFS's S3 and ffmpeg.
The part size is S3's minimum (5 MiB), so the 12 MB sample's video goes up in parts.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from mirror.demo.media import SampleMedia
from tests.e2e.test_faults_crashes import assert_mirrored_once, outcomes, stop
from tests.fixtures.stack import FAST_FAULTS, Stack, ffmpeg_pids, phase_of

SMALL_PARTS = {"MIRROR_S3_PART_SIZE": "5MiB"}
DOWNLOAD_S = 10


@pytest.fixture(autouse=True)
def fast_faults(stack: Stack) -> None:
    stack.settings.update(FAST_FAULTS)


def stored_parts(stack: Stack) -> int:
    """Parts S3 holds for unfinished multipart uploads (not yet visible objects)."""
    client, bucket = stack.s3.client, stack.s3.bucket
    return sum(
        len(client.list_parts(Bucket=bucket, Key=key, UploadId=upload_id).get("Parts", []))
        for key, upload_id in stack.s3.multipart_uploads()
    )


def test_first_part_reaches_s3_while_the_download_is_still_under_way(
    stack: Stack, sample_large_h264: SampleMedia, tmp_path: Path, ffmpeg_path: str
) -> None:
    item = stack.add_sample(sample_large_h264)
    stack.jellyfin.throttle(sample_large_h264.size // DOWNLOAD_S)
    stack.mirror_here("enqueue", item)
    worker = stack.start_worker("--burst", name="a", **SMALL_PARTS)
    stack.wait_for(lambda: stack.jellyfin.download_requests(), 30, "the download to start")
    asked_at = time.monotonic()
    stack.wait_for(lambda: stored_parts(stack) > 0, 60, "a part in S3")
    part_after = time.monotonic() - asked_at
    # The stand-in needs DOWNLOAD_S seconds to send the file: a part stored well before
    # that was cut from an output ffmpeg wrote from a source still arriving.
    assert part_after < DOWNLOAD_S * 0.8, part_after
    assert stack.object_keys() == []  # parts are invisible until the job publishes them
    assert worker.wait(timeout=120) == 0, stack.log_of("a")[-3000:]
    assert [r.range for r in stack.jellyfin.download_requests()] == [None]  # one pass
    assert_mirrored_once(stack, item, tmp_path, ffmpeg_path)
    assert list(stack.work_dir.iterdir()) == []


def test_kill_9_mid_overlap_is_finished_once_by_another_worker(
    stack: Stack, sample_large_h264: SampleMedia, tmp_path: Path, ffmpeg_path: str
) -> None:
    item = stack.add_sample(sample_large_h264)
    stack.jellyfin.throttle(sample_large_h264.size // DOWNLOAD_S)
    stack.mirror_here("enqueue", item)
    victim = stack.start_worker(name="victim", **SMALL_PARTS)
    # Download (phase), transcode (ffmpeg) and upload (a stored part) all under way.
    stack.wait_for(lambda: stored_parts(stack) > 0, 60, "a part in S3")
    assert phase_of(stack, item) == "download"
    assert ffmpeg_pids(str(stack.work_dir))
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)
    stack.wait_for(lambda: not ffmpeg_pids(str(stack.work_dir)), 10, "ffmpeg to die")
    assert stack.object_keys() == []  # the dead worker's parts never became objects

    stack.jellyfin.throttle(None)
    rescuer = stack.start_worker(name="rescuer", **SMALL_PARTS)
    stack.wait_for(lambda: stack.job(item).status == "done", 120, "the takeover to finish")
    stop(rescuer)
    # The outcomes first: when they are wrong, they say what the extra attempt was.
    assert outcomes(stack, item) == ["stale", "done"], stack.job(item).error
    assert stack.job(item).attempts == 2
    # Exactly the right objects, whole and decodable; no multipart upload left behind.
    assert_mirrored_once(stack, item, tmp_path, ffmpeg_path)
    # The takeover resumed the partial source and fed ffmpeg from its byte 0.
    assert (stack.jellyfin.download_requests()[-1].range or "").startswith("bytes=")
    assert list(stack.work_dir.iterdir()) == []
