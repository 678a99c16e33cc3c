"""`mirror pause` against a real `mirror worker` process in the middle of a download."""

from __future__ import annotations

import signal

from mirror.demo.media import SampleMedia
from mirror.domain.jobs import FleetMode
from tests.fixtures.stack import Stack


def test_pause_releases_a_download_in_a_worker_process_and_resume_continues_it(
    stack: Stack, sample_h264_aac: SampleMedia
) -> None:
    item = stack.add_sample(sample_h264_aac)
    stack.jellyfin.throttle(sample_h264_aac.size // 8)  # ~8 s download
    stack.enqueue(item)
    worker = stack.start_worker(MIRROR_HEARTBEAT_INTERVAL="300ms")
    stack.wait_for(
        lambda: (stack.job(item).heartbeat_data or {}).get("bytes_done", 0) > 0,
        30,
        "the download to start",
    )

    paused = stack.mirror_here("pause", "--reason", "maintenance")
    assert paused.returncode == 0, paused.stderr
    assert paused.stdout.strip() == (
        "paused: 1 job running goes back to the queue at the next heartbeat, 0 queued wait"
    )
    stack.wait_for(lambda: stack.job(item).status == "new", 15, "the release")
    job = stack.job(item)
    assert (job.attempts, job.worker_id) == (0, None)  # no attempt used
    assert (stack.work_dir / item).is_dir()  # the partial download is kept for the resume

    stack.jellyfin.throttle(None)
    stack.repo.set_fleet_mode(FleetMode.RUNNING, changed_by="test")  # `mirror resume`
    stack.wait_for(lambda: stack.job(item).status == "done", 60, "the resumed job")
    assert stack.job(item).attempts == 1
    ranges = [request.range or "" for request in stack.jellyfin.download_requests()]
    assert ranges[-1].startswith("bytes=") and not ranges[-1].startswith("bytes=0-")
    assert "released to the queue for the fleet's pause" in stack.log_of()
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0
